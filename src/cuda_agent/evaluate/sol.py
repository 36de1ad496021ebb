"""Speed of light: the least time the reference's work can take on the device, and how close the
candidate came to it (the result's `sol`).

The work is counted in the judge while it runs the reference on the first trial's inputs
(worker/work.py): FLOPs per class of arithmetic, and the bytes a kernel must move at least (inputs,
outputs, parameters, each once). The device's peaks come from NVIDIA's datasheets for the GPUs
below (dense figures, boost clock) and are otherwise measured once by a worker and cached under
the evaluator's cache (a CPU's are always measured: its memory bandwidth and matrix-product rate).

    time_ms = max(bytes / DRAM bandwidth, sum over classes of FLOPs / the class's peak)

`bound` says which term is larger; `fraction` is `time_ms` over the candidate's median time per call
(1.0 would be the hardware's limit; it can exceed 1 only where the count is a lower bound of the
work, as when a kernel keeps its inputs in a cache larger than them, or where the peaks are wrong).
Where some operators' FLOPs could not be counted (custom operators, data-dependent ones), `exact`
is false and they are named: `time_ms` is then a lower bound of the true speed of light, and the
fraction a lower bound of the true fraction.

Float32 matrix products are counted at the TF32 tensor-core peak: the evaluator admits TF32 within
its tolerance (`reduced_precision` is a note, not a failure), so that is the limit a kernel can reach.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from cuda_agent.evaluate.cache_layout import PEAKS
from cuda_agent.evaluate.memory import read_record, write_record

HOW = ("FLOPs: torch's formulas for matrix products, convolutions and attention, at the tensor-core peak of "
       "their dtype (float32 at TF32); elementwise operators one FLOP per output element and reductions one per "
       "input element, at the FP32 (vector) peak; bytes: inputs, outputs, parameters and buffers, once each")

# Dense peaks per class (FLOP/s) and DRAM bandwidth (bytes/s), from NVIDIA's datasheets (boost clock,
# without sparsity). Matched against torch's device name, the first pattern found wins.
_T = 1e12
GPU_PEAKS: list[tuple[str, dict[str, float]]] = [
    ("H100 PCIe", {"dram_bytes_s": 2.0 * _T, "vector": 51.2 * _T, "tensor_tf32": 378 * _T, "tensor_16": 756 * _T,
                   "tensor_8": 1513 * _T, "fp64": 25.6 * _T}),
    ("H100 NVL", {"dram_bytes_s": 3.9 * _T, "vector": 60 * _T, "tensor_tf32": 417.5 * _T, "tensor_16": 835.5 * _T,
                  "tensor_8": 1670.5 * _T, "fp64": 30 * _T}),
    ("H100", {"dram_bytes_s": 3.35 * _T, "vector": 66.9 * _T, "tensor_tf32": 494.7 * _T, "tensor_16": 989.4 * _T,
              "tensor_8": 1978.9 * _T, "fp64": 33.5 * _T}),  # H100 SXM5 80GB HBM3
    ("H200", {"dram_bytes_s": 4.8 * _T, "vector": 66.9 * _T, "tensor_tf32": 494.7 * _T, "tensor_16": 989.4 * _T,
              "tensor_8": 1978.9 * _T, "fp64": 33.5 * _T}),  # H200 SXM 141GB HBM3e
    ("A100-SXM4-80GB", {"dram_bytes_s": 2.039 * _T, "vector": 19.5 * _T, "tensor_tf32": 156 * _T,
                        "tensor_16": 312 * _T, "fp64": 9.7 * _T}),
    ("A100 80GB PCIe", {"dram_bytes_s": 1.935 * _T, "vector": 19.5 * _T, "tensor_tf32": 156 * _T,
                        "tensor_16": 312 * _T, "fp64": 9.7 * _T}),
    ("A100", {"dram_bytes_s": 1.555 * _T, "vector": 19.5 * _T, "tensor_tf32": 156 * _T,
              "tensor_16": 312 * _T, "fp64": 9.7 * _T}),  # the 40GB parts, SXM4 and PCIe
    ("L40S", {"dram_bytes_s": 0.864 * _T, "vector": 91.6 * _T, "tensor_tf32": 183 * _T, "tensor_16": 362 * _T,
              "tensor_8": 733 * _T, "fp64": 1.4 * _T}),
    ("L4", {"dram_bytes_s": 0.3 * _T, "vector": 30.3 * _T, "tensor_tf32": 60 * _T, "tensor_16": 121 * _T,
            "tensor_8": 242.5 * _T, "fp64": 0.49 * _T}),
]


def table_peaks(name: str) -> dict[str, Any] | None:
    """The datasheet peaks of a GPU named `name` (torch's device name), or None if unknown."""
    for pattern, peaks in GPU_PEAKS:
        if pattern in name:
            return {**peaks, "source": f"datasheet ({pattern})"}
    return None


def _cache_file(cache_dir: Path, device: dict[str, Any]) -> Path:
    ident = json.dumps({k: device.get(k) for k in ("type", "name", "capability", "threads", "host", "torch")},
                       sort_keys=True)
    return cache_dir / PEAKS / f"{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"


def peaks_for(device: dict[str, Any], cache_dir: Path,
              measure: Callable[[], dict[str, Any]] | None) -> dict[str, Any] | None:
    """The peaks of the device a result's `device` describes: the datasheet's for a known GPU, else
    those measured before on this machine (cached under `cache_dir/peaks`), else `measure()`'s
    (cached; written by the harness only), else None (nothing to measure with)."""
    if device.get("type") == "cuda" and (known := table_peaks(str(device.get("name", "")))):
        return known
    path = _cache_file(cache_dir, device)
    cached = read_record(path)
    if cached.get("dram_bytes_s"):
        return cached
    if measure is None:
        return None
    measured = {**measure(), "source": f"measured on {device.get('name') or device.get('type')}"}
    write_record(path, measured)
    return measured


def speed_of_light(work: dict[str, Any] | None, peaks: dict[str, Any] | None, candidate_ms: float | None,
                   why_untimed: str | None = None) -> dict[str, Any]:
    """The result's `sol` from the reference's `work` (worker/work.py), the device's `peaks` and the
    candidate's median ms per call (None when it was not timed: `why_untimed` says why)."""
    if not work:
        return {"time_ms": None, "fraction": None, "why": why_untimed or "the reference's work was not counted "
                "(no trial ran)", "how": HOW}
    out: dict[str, Any] = {"time_ms": None, "fraction": None, "bound": None, "flops": work["flops"],
                           "bytes": work["bytes"], "bytes_by": work.get("bytes_by"),
                           "exact": not work.get("uncounted"), "uncounted": work.get("uncounted", []),
                           "peaks": peaks, "how": HOW}
    if not peaks:
        out["why"] = why_untimed or "the device's peaks are unknown"
        return out
    memory_s = work["bytes"] / peaks["dram_bytes_s"]
    missing = [c for c in work["flops"] if not peaks.get(c)]
    compute_s = sum(n / peaks[c] for c, n in work["flops"].items() if peaks.get(c))
    out["memory_ms"], out["compute_ms"] = memory_s * 1e3, compute_s * 1e3
    out["time_ms"] = max(memory_s, compute_s) * 1e3
    out["bound"] = "memory" if memory_s >= compute_s else "compute"
    if missing:  # (e.g. float8 on a GPU without it): the time is a lower bound, as for uncounted operators
        out["exact"] = False
        out["uncounted"] = out["uncounted"] + [f"{c} FLOPs (no peak for this device)" for c in missing]
    if candidate_ms and candidate_ms > 0 and out["time_ms"] > 0:
        out["fraction"] = float(f"{out['time_ms'] / candidate_ms:.4g}")
    else:
        out["why"] = why_untimed or "the candidate was not timed"
    for k in ("time_ms", "memory_ms", "compute_ms"):
        out[k] = float(f"{out[k]:.4g}")
    return out


def result_sol(work: dict[str, Any] | None, device: dict[str, Any], cache_dir: Path, candidate_ms: float | None,
               why_untimed: str | None, measure: Callable[[], dict[str, Any]] | None) -> dict[str, Any]:
    """An evaluation's `sol`: from the work the judge counted (None: no trial ran), the result's
    `device`, and the candidate's median ms per call; `measure` (None: do not) gives the peaks of a
    device no datasheet or cache has. Never raises: what failed is the `why`."""
    if work is not None and "error" in work:
        return {"time_ms": None, "fraction": None, "why": f"counting the work failed: {work['error']}", "how": HOW}
    try:
        peaks = peaks_for(device, cache_dir, measure) if work is not None and "type" in device else None
    except Exception as exc:  # noqa: BLE001 - (a judge that died measuring): the verdict stands without
        return {"time_ms": None, "fraction": None, "how": HOW,
                "why": f"the device's peaks could not be measured: {type(exc).__name__}: {str(exc)[:300]}"}
    return speed_of_light(work, peaks, candidate_ms, why_untimed)
