"""KernelBench's results/timing layout, written from measured baselines (`cuda-agent baselines --out`):
<out>/<hardware>/baseline_time_torch.json and baseline_time_torch_compile_inductor_default.json, each
{"level1": {"19_ReLU.py": {"mean", "std", "min", "max", "num_trials", "hardware", "device"}}}, plus
our median and IQR, so that KernelBench's scripts read our timings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

FILES = {"eager": "baseline_time_torch.json", "compile": "baseline_time_torch_compile_inductor_default.json"}


def write_kernelbench_timing(rows: Iterable[tuple[Any, Any]], out: str | Path) -> list[Path]:
    """Write the (task, EvalResult) `rows`' eager and compile timings under `out`, in a folder named
    after the first result's hardware; returns the files written (none for a baseline never timed)."""
    docs: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in FILES}
    folder_name = None
    for task, res in rows:
        dev = res.device
        hardware = dev.get("name") or dev.get("type") or "unknown"
        folder_name = folder_name or hardware.replace(" ", "_")
        device = f"cuda:{dev.get('index', 0)}" if dev.get("type") == "cuda" else "cpu"
        level = f"level{task.level}" if task.level is not None else "examples"
        for which in FILES:
            st = res.times_ms.get(which)
            if st is None:
                continue
            docs[which].setdefault(level, {})[f"{task.name}.py"] = {
                "mean": round(st.mean if st.mean is not None else st.median, 6),
                "std": round(st.std or 0.0, 6), "min": round(st.min, 6), "max": round(st.max, 6),
                "num_trials": st.n, "median": round(st.median, 6), "iqr": round(st.iqr, 6),
                "hardware": hardware, "device": device,
            }
    folder = Path(out) / (folder_name or "unknown")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for which, name in FILES.items():
        if docs[which]:
            path = folder / name
            path.write_text(json.dumps(docs[which], indent=2, sort_keys=True) + "\n")
            written.append(path)
    return written
