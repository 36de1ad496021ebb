"""Comparing a candidate's outputs with the reference's. Runs only in the judge's process."""

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


def compare(ref: Any, out: Any, *, atol: float, rtol: float, norm_tol: float,
            path: str = "output") -> Mismatch | None:
    """The first difference between `out` and `ref`, or None when they agree within tolerance.

    Structure, type, shape and dtype must match exactly; values must satisfy allclose(atol, rtol)
    element-wise, have no NaN/Inf where the reference is finite, and a relative error norm
    ||out - ref|| / ||ref|| of at most `norm_tol` (so degenerate answers such as all zeros fail).
    """
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            return Mismatch(Code.STRUCTURE_MISMATCH, f"{path}: expected a tensor, got {_kind(out)}")
        return _compare_tensor(ref, out, atol, rtol, norm_tol, path)
    if isinstance(ref, (list, tuple)):
        if type(out) is not type(ref) or len(out) != len(ref):
            return Mismatch(Code.STRUCTURE_MISMATCH,
                            f"{path}: expected a {type(ref).__name__} of {len(ref)} items, got {_kind(out)}")
        for i, (r, o) in enumerate(zip(ref, out)):
            if m := compare(r, o, atol=atol, rtol=rtol, norm_tol=norm_tol, path=f"{path}[{i}]"):
                return m
        return None
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return Mismatch(Code.STRUCTURE_MISMATCH, f"{path}: expected a dict with keys {sorted(ref)}")
        for k in ref:
            if m := compare(ref[k], out[k], atol=atol, rtol=rtol, norm_tol=norm_tol, path=f"{path}[{k!r}]"):
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


def _compare_tensor(ref: torch.Tensor, out: torch.Tensor, atol: float, rtol: float,
                    norm_tol: float, path: str) -> Mismatch | None:
    if out.shape != ref.shape:
        return Mismatch(Code.SHAPE_MISMATCH, f"{path}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Mismatch(Code.DTYPE_MISMATCH, f"{path}: dtype {out.dtype}, expected {ref.dtype}")
    if out.device.type != ref.device.type:
        return Mismatch(Code.DEVICE_MISMATCH, f"{path}: on {out.device.type}, expected on {ref.device.type}")
    if ref.numel() == 0:
        return None
    if not (ref.is_floating_point() or ref.is_complex()):
        if not torch.equal(out, ref):
            bad = int((out != ref).sum())
            return Mismatch(Code.OUTPUT_MISMATCH, f"{path}: {bad} of {ref.numel()} elements differ (exact dtype {ref.dtype})")
        return None
    ref_finite = torch.isfinite(ref)
    bad_nonfinite = int((~torch.isfinite(out) & ref_finite).sum())
    if bad_nonfinite:
        return Mismatch(Code.NON_FINITE, f"{path}: {bad_nonfinite} NaN/Inf values where the reference is finite")
    wide = torch.float64 if ref.dtype == torch.float64 else torch.float32
    r, o = ref.to(wide), out.to(wide)
    close = torch.isclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
    n_bad = int((~close).sum())
    if n_bad:
        diff = (o - r).abs().masked_fill(~ref_finite, 0)
        worst = int(diff.argmax())
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), ref.shape))
        return Mismatch(
            Code.OUTPUT_MISMATCH,
            f"{path}: {n_bad} of {ref.numel()} elements differ beyond atol={atol}, rtol={rtol}; "
            f"largest at {idx}: got {o.flatten()[worst].item():.6g}, expected {r.flatten()[worst].item():.6g}",
        )
    rf, of = r.masked_fill(~ref_finite, 0), o.masked_fill(~ref_finite, 0)
    ref_norm = float(torch.linalg.vector_norm(rf))
    if ref_norm > 0:
        rel = float(torch.linalg.vector_norm(of - rf)) / ref_norm
        if not rel <= norm_tol:
            return Mismatch(Code.OUTPUT_MISMATCH,
                            f"{path}: relative error norm {rel:.3g} exceeds {norm_tol:g} "
                            "(element-wise within tolerance, but wrong overall)")
    return None


def error_stats(ref: Any, out: Any) -> dict[str, float]:
    """Worst absolute error and worst relative error norm over the floating tensors of a passing
    output: how much precision the candidate traded (TF32, fp16 internal math) within tolerance."""
    from cuda_agent.evaluate.transport import tensors_of

    worst_abs, worst_rel = 0.0, 0.0
    for r, o in zip(tensors_of(ref), tensors_of(out)):
        if not r.is_floating_point() or r.numel() == 0:
            continue
        wide = torch.float64 if r.dtype == torch.float64 else torch.float32
        finite = torch.isfinite(r)
        rf = r.to(wide).masked_fill(~finite, 0)
        diff = o.to(wide).masked_fill(~finite, 0) - rf
        worst_abs = max(worst_abs, float(diff.abs().max()))
        ref_norm = float(torch.linalg.vector_norm(rf))
        if ref_norm > 0:
            worst_rel = max(worst_rel, float(torch.linalg.vector_norm(diff)) / ref_norm)
    return {"max_abs": worst_abs, "rel_norm": worst_rel}


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe): used to prove inputs were not modified."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
