"""Stress inputs (the judge's stress trials): inputs beyond the task's distribution that keep the
structure its `get_inputs()` gave them, so that a kernel may still rely on every property the task
guarantees (DESIGN section 3, "Correctness")."""

from __future__ import annotations

from typing import Any


def stress_input(x: Any, variant: int) -> Any:
    """An input beyond the task's distribution that keeps the structure `get_inputs()` gave it, so
    that a kernel may rely on every property the task guarantees (DESIGN section 3, "Correctness"):

    - tensors that are not floating, empty, hold NaN/Inf or only integral values (labels, counts,
      masks) stay as they are;
    - tensors within [-1, 1] are pushed towards the ends of their range, x -> sign(x) |x|^p with
      p = 1/4 or 4: they stay in range, keep their zeros, signs and order; non-negative ones whose
      slices along a dimension all sum to 1 (probabilities: a softmax's output) are divided by
      their new sums, so they stay distributions, flatter or sharper;
    - other tensors are scaled by 4 or 8, and shifted by 0.5 or -1 only when they have both signs
      and no exact zero: zeros stay zero (triangular, masked, sparse inputs) and non-negative
      inputs stay non-negative.
    """
    import torch

    if (not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0
            or not bool(torch.isfinite(x).all()) or bool((x == x.round()).all())):
        return x
    # (one new tensor of x's size at a time, the result: a large task's inputs are several GiB)
    lo, hi = float(x.min()), float(x.max())
    if -1.0 <= lo and hi <= 1.0:
        y = x.abs().pow_((0.25, 4.0)[variant % 2]).copysign_(x)  # sign(x) |x|^p
        if lo >= 0.0 and (dim := simplex_dim(x)) is not None:
            y = y / y.sum(dim, keepdim=True)
        return y
    scale, shift = [(4.0, 0.5), (8.0, -1.0)][variant % 2]
    if not (lo < 0 < hi) or bool((x == 0).any()):
        shift = 0.0
    y = x * scale
    return y.add_(shift) if shift else y


def simplex_dim(x: Any) -> int | None:
    """The last dimension (of more than one element) along which every slice of non-negative `x`
    sums to 1, or None. The sums are made in x's precision first, and in float64 only where those
    are all near 1: float64 sums of a float32 tensor go through a float64 copy of it."""
    import torch

    for dim in range(x.dim() - 1, -1, -1):
        if x.shape[dim] > 1 and bool(((x.sum(dim) - 1.0).abs() <= SIMPLEX_ROUGH).all()) \
                and bool(((x.sum(dim, dtype=torch.float64) - 1.0).abs() <= SIMPLEX_TOL).all()):
            return dim
    return None


SIMPLEX_TOL = 1e-3  # how far from 1 a slice's sum may be, for float32 sums of many elements
SIMPLEX_ROUGH = 0.25  # the same in x's own precision, before the float64 sums (bfloat16's error included)
