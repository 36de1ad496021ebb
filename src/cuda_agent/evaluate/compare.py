"""Comparing a candidate's outputs with the reference's: `compare` runs only in the judge's process.

`same_bits` also runs in the runners' processes, the candidate's among them (worker/runner.py:
`StreamCheck`, which compares an output's snapshot at return with the output after the synchronize):
there it serves a check that runs inside the process the candidate controls, as guard.py's do."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from cuda_agent.evaluate.result import Code


@dataclass(frozen=True, slots=True)
class Mismatch:
    code: Code
    message: str


# Elements per chunk of a comparison: the judge's temporary memory stays a few hundred MB whatever
# the output's size (a 4 GB output compared whole needs several times that).
CHUNK = 1 << 24


def compare(ref: Any, out: Any, *, atol: float, rtol: float, norm_tol: float,
            path: str = "output", stats: dict[str, float] | None = None) -> Mismatch | None:
    """The first difference between `out` and `ref`, or None when they agree within tolerance.

    Structure, type, shape, dtype and device must match exactly; values must satisfy
    allclose(atol, rtol) element-wise, have no NaN/Inf where the reference is finite, and a relative
    error norm ||out - ref|| / ||ref|| of at most `norm_tol` (so degenerate answers such as all zeros
    fail). When `stats` is given, it receives the worst `max_abs` error and `rel_norm` seen: how much
    precision a passing candidate traded (TF32, fp16 internal math) within tolerance.
    """
    kw = dict(atol=atol, rtol=rtol, norm_tol=norm_tol, stats=stats)
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            return Mismatch(Code.STRUCTURE_MISMATCH, f"{path}: expected a tensor, got {_kind(out)}")
        return _compare_tensor(ref, out, path=path, **kw)
    if isinstance(ref, (list, tuple)):
        if type(out) is not type(ref) or len(out) != len(ref):
            return Mismatch(Code.STRUCTURE_MISMATCH,
                            f"{path}: expected a {type(ref).__name__} of {len(ref)} items, got {_kind(out)}")
        for i, (r, o) in enumerate(zip(ref, out)):
            if m := compare(r, o, path=f"{path}[{i}]", **kw):
                return m
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return Mismatch(Code.STRUCTURE_MISMATCH, f"{path}: expected a dict with keys {sorted(ref)}")
        for k in ref:
            if m := compare(ref[k], out[k], path=f"{path}[{k!r}]", **kw):
                return m
        return None
    if isinstance(ref, (int, float)) and not isinstance(ref, bool):
        if type(out) not in (int, float) or not math.isclose(out, ref, rel_tol=rtol, abs_tol=atol):
            return Mismatch(Code.OUTPUT_MISMATCH, f"{path}: expected {ref!r}, got {out!r}")
        return None
    if out != ref:
        return Mismatch(Code.OUTPUT_MISMATCH, f"{path}: expected {ref!r}, got {out!r}")
    return None


def _kind(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)} items"
    return type(x).__name__


def _compare_tensor(ref: torch.Tensor, out: torch.Tensor, *, atol: float, rtol: float,
                    norm_tol: float, path: str, stats: dict[str, float] | None) -> Mismatch | None:
    if out.shape != ref.shape:
        return Mismatch(Code.SHAPE_MISMATCH, f"{path}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Mismatch(Code.DTYPE_MISMATCH, f"{path}: dtype {out.dtype}, expected {ref.dtype}")
    if out.device.type != ref.device.type:
        return Mismatch(Code.DEVICE_MISMATCH, f"{path}: on {out.device.type}, expected on {ref.device.type}")
    n = ref.numel()
    if n == 0:
        return None
    r, o = ref.reshape(-1), out.reshape(-1)
    if not (ref.is_floating_point() or ref.is_complex()):
        bad = sum(int((o[s:s + CHUNK] != r[s:s + CHUNK]).sum()) for s in range(0, n, CHUNK))
        if bad:
            return Mismatch(Code.OUTPUT_MISMATCH, f"{path}: {bad} of {n} elements differ (exact dtype {ref.dtype})")
        return None
    wide = ref.dtype if ref.dtype in (torch.float64, torch.complex64, torch.complex128) else torch.float32
    nonfinite = not_close = 0
    worst_diff, worst_at = -1.0, 0
    max_abs = diff_sq = ref_sq = 0.0
    for s in range(0, n, CHUNK):
        rc, oc = r[s:s + CHUNK].to(wide), o[s:s + CHUNK].to(wide)
        finite = torch.isfinite(rc)
        nonfinite += int((~torch.isfinite(oc) & finite).sum())
        close = torch.isclose(oc, rc, rtol=rtol, atol=atol, equal_nan=True)
        diff = (oc - rc).masked_fill_(~finite, 0)
        adiff = diff.abs()
        if (bad := int((~close).sum())):
            not_close += bad
            masked = adiff.masked_fill(close, -1)
            i = int(masked.argmax())
            if float(masked[i]) > worst_diff:
                worst_diff, worst_at = float(masked[i]), s + i
        max_abs = max(max_abs, float(adiff.max()))
        diff_sq += float(torch.linalg.vector_norm(diff)) ** 2
        ref_sq += float(torch.linalg.vector_norm(rc.masked_fill(~finite, 0))) ** 2  # rc may alias ref
    if nonfinite:
        return Mismatch(Code.NON_FINITE, f"{path}: {nonfinite} NaN/Inf values where the reference is finite")
    if not_close:
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst_at), ref.shape))
        return Mismatch(
            Code.OUTPUT_MISMATCH,
            f"{path}: {not_close} of {n} elements differ beyond atol={atol}, rtol={rtol}; "
            f"largest at {idx}: got {o[worst_at].item():.6g}, expected {r[worst_at].item():.6g}",
        )
    rel = math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else 0.0
    if not rel <= norm_tol:
        return Mismatch(Code.OUTPUT_MISMATCH,
                        f"{path}: relative error norm {rel:.3g} exceeds {norm_tol:g} "
                        "(element-wise within tolerance, but wrong overall)")
    if stats is not None:
        stats["max_abs"] = max(stats.get("max_abs", 0.0), max_abs)
        stats["rel_norm"] = max(stats.get("rel_norm", 0.0), rel)
    return None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe): used to prove inputs were not modified."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
