"""Choosing the backend and describing the machine a verdict was measured on."""

from __future__ import annotations

import platform
import shutil
import subprocess
from functools import lru_cache
from typing import Any


def cuda_available() -> bool:
    """True when torch sees a CUDA device. Imports torch; call only where torch is needed anyway."""
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    return device


@lru_cache(maxsize=None)
def _driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def device_info(device: str) -> dict[str, Any]:
    """What the result's `device` field records: enough to know whether two timings are comparable."""
    import torch

    info: dict[str, Any] = {
        "type": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    if device == "cuda":
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_gb=round(props.total_memory / 2**30, 1),
            l2_bytes=getattr(props, "L2_cache_size", None),
            cuda=torch.version.cuda,
            driver=_driver_version(),
            index=idx,
        )
    else:
        info.update(name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return info
