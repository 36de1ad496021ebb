"""Choosing the backend and describing the machine a verdict was measured on."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from functools import lru_cache
from typing import Any


def nvidia_smi_lines(*args: str) -> list[str]:
    """Lines of `nvidia-smi ARGS`, or none where there is no working nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.strip() for ln in out.stdout.strip().splitlines()] if out.returncode == 0 else []


def nvidia_smi(*args: str) -> str | None:
    """First line of `nvidia-smi ARGS`, or None where there is no working nvidia-smi."""
    lines = nvidia_smi_lines(*args)
    return lines[0] if lines else None


def resolve_device(device: str) -> str:
    """`auto` -> `cuda` when a GPU is present, else `cpu`; without importing torch where it is not
    loaded yet (the harness stays light): a GPU that nvidia-smi lists counts."""
    if device != "auto":
        return device
    if "torch" in sys.modules:
        return "cuda" if sys.modules["torch"].cuda.is_available() else "cpu"
    listed = nvidia_smi("-L")
    return "cuda" if listed and listed.startswith("GPU") else "cpu"


@lru_cache(maxsize=None)
def cuda_arch() -> str | None:
    """Compute capability of the first GPU ("9.0"), the build's target architecture."""
    return nvidia_smi("--query-gpu=compute_cap", "--format=csv,noheader")


@lru_cache(maxsize=None)
def _driver_version() -> str | None:
    return nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")


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


@lru_cache(maxsize=None)
def _gpu_memory() -> dict[str, int]:
    """{GPU index: memory in MiB} of every GPU nvidia-smi lists, read once per process."""
    table = {}
    for line in nvidia_smi_lines("--query-gpu=index,memory.total", "--format=csv,noheader,nounits"):
        index, _, mib = (x.strip() for x in line.partition(","))
        if index.isdigit():
            try:
                table[index] = int(float(mib))
            except ValueError:
                table[index] = 0
    return table


def gpu_indices() -> list[int]:
    """The indices of the GPUs nvidia-smi lists (empty where there is none)."""
    return [int(x) for x in _gpu_memory()]


def gpu_memory_mib(gpu: str) -> int | None:
    """The memory of GPU `gpu` (an index, or a UUID as CUDA_VISIBLE_DEVICES names it) in MiB, or
    None where nvidia-smi cannot tell."""
    if gpu in _gpu_memory():
        return _gpu_memory()[gpu] or None
    line = nvidia_smi("--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", str(gpu))
    try:
        return int(float(line)) if line else None
    except ValueError:
        return None


def parse_cpulist(text: str) -> set[int]:
    """CPUs of a sysfs cpulist ("0-15,32-47"); ValueError on anything else."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def gpu_local_cpus(index: int | str, sysfs: str = "/sys/bus/pci/devices") -> set[int] | None:
    """The CPUs on the GPU's own NUMA node (its PCI device's `local_cpulist`) that this process may
    use, or None where they cannot be told (no nvidia-smi, no sysfs entry, none allowed here).
    A process timed on the other socket pays a farther trip for every launch and synchronize."""
    bus = nvidia_smi("--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", str(index))
    if not bus:
        return None
    domain, _, rest = bus.lower().partition(":")  # NVML: 00000000:18:00.0; sysfs: 0000:18:00.0
    try:
        with open(f"{sysfs}/{domain[-4:]}:{rest}/local_cpulist") as f:
            local = parse_cpulist(f.read())
    except (OSError, ValueError):
        return None
    return (local & os.sched_getaffinity(0)) or None
