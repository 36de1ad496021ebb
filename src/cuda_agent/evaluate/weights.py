"""The reference's learned state, re-drawn at random, and where it goes in ModelNew (DESIGN section 3,
"Weights"). The judge's process re-draws and matches; the runners' processes, the candidate's among
them, call only `distinct` (worker/runner.py), to list their model's state each tensor once.

At default init several learned tensors are constants: LayerNorm's and BatchNorm's affine are ones
and zeros, BatchNorm's running statistics zeros and ones, PReLU's slope 0.25, many biases zeros. A
kernel that ignores them reproduces the reference exactly, so the judge re-draws the reference's
learned state before it is copied into ModelNew (`redraw`):

- *learned*: floating-point parameters, and the running statistics (`running_mean`, `running_var`)
  of normalisation layers. Other buffers are constants of the model (a causal mask, a positional
  table) and stay as built: kernels may hard-code them.
- *how*: a constant tensor c becomes c * U(0.5, 1.5) (positive stays positive: variances, scales),
  or U(-0.5, 0.5) where c = 0. Any other tensor is drawn from a normal with its own mean and
  standard deviation, clipped to its own range, its exact zeros kept. Every tensor keeps its shape,
  dtype and magnitude.
- *fallback*: when the re-drawn state makes the reference's output non-finite or constant where
  the default init's is not (`degenerate`), the evaluation keeps the default init and says so.

Where each tensor goes (`match`): by name when ModelNew's state_dict has Model's names (the strict
profile requires it). Otherwise (kernelbench profile) by value, which is KernelBench's own rule made
explicit: ModelNew is built under the same seed as Model, so a tensor of ModelNew that holds one of
Model's is bitwise equal to it at default init; equal constants are told apart by their last name
part (`weight`, `running_var`), then by order. A tensor of Model with a random default init that
no tensor of ModelNew holds was fused or reshaped by ModelNew, and one whose elements an unmatched
tensor of ModelNew holds in another order was copied into another layout at init (`copies`, e.g. a
transposed weight beside the Linear it came from): then every random-init tensor keeps
its default init (KernelBench's same-seed rule, recorded as such), while constant-init tensors are
re-drawn all the same, since a kernel that folded a constant into something else at init time
ignores that tensor.

A tensor held under several state_dict names (a submodule registered twice, as `self.conv` and in a
fused wrapper; tied weights) is one entry, under its first name (`distinct`), on both sides: each
alias matched on its own would take a reference tensor of its own, and loading writes every alias
into the one tensor, the last write winning.

Derived tensors that ModelNew computes in `__init__` from its own parameters go stale when the
reference's state is loaded, as they would after loading any trained checkpoint: recompute them in
a `register_load_state_dict_post_hook`, or in forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

LEARNED_BUFFERS = ("running_mean", "running_var")


def learned(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The learned tensors of `model` by state_dict name (tied parameters under each name)."""
    from torch.nn.modules.batchnorm import _NormBase

    keys = set(model.state_dict(keep_vars=True))
    out: dict[str, torch.Tensor] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if p.is_floating_point() and name in keys:
            out[name] = p
    for prefix, mod in model.named_modules(remove_duplicate=False):
        if isinstance(mod, _NormBase):
            for b in LEARNED_BUFFERS:
                name = f"{prefix}.{b}" if prefix else b
                t = getattr(mod, b, None)
                if isinstance(t, torch.Tensor) and t.is_floating_point() and name in keys:
                    out[name] = t
    return out


def distinct(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """`state` (a state_dict) with each tensor once, under its first name, and each other name of a
    tensor (an alias: the same storage, offset, shape, strides and dtype) mapped to that first name."""
    def place(t: torch.Tensor) -> tuple[Any, ...] | None:
        try:  # a tensor without storage (a wrapper subclass) has no data pointer: never an alias
            ptr = t.data_ptr() if t.numel() else 0
        except (RuntimeError, TypeError, NotImplementedError):
            ptr = 0
        return (t.device, ptr, t.dtype, tuple(t.shape), tuple(t.stride())) if ptr else None

    first: dict[tuple[Any, ...], str] = {}
    out: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, t in state.items():
        key = place(t)
        if key in first:
            aliases[name] = first[key]
            continue
        if key is not None:
            first[key] = name
        out[name] = t
    return out, aliases


def is_constant(t: torch.Tensor) -> bool:
    """Every element equal (a single element counts): ones, zeros, a fill value."""
    return t.numel() > 0 and bool((t == t.reshape(-1)[0]).all())


@torch.no_grad()
def redraw(tensors: dict[str, torch.Tensor], seed: int) -> list[str]:
    """Re-draw `tensors` in place (see the module's docstring); returns the names re-drawn. Empty
    tensors and tensors holding NaN or Inf stay as they are."""
    gens: dict[torch.device, torch.Generator] = {}
    done: set[int] = set()
    names = []
    for name, t in tensors.items():
        if id(t) in done:  # a tied parameter: drawn once
            names.append(name)
            continue
        if t.numel() == 0 or not bool(torch.isfinite(t).all()):
            continue
        if t.device not in gens:
            gens[t.device] = torch.Generator(device=t.device).manual_seed(seed)
        t.copy_(_draw(t.detach(), gens[t.device]))
        done.add(id(t))
        names.append(name)
    return names


def _draw(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    x = t.float()
    rand = lambda fn: fn(x.shape, generator=gen, device=x.device, dtype=x.dtype)  # noqa: E731
    if is_constant(x):
        c = float(x.reshape(-1)[0])
        new = rand(torch.rand) - 0.5 if c == 0 else c * (0.5 + rand(torch.rand))
    else:
        new = (x.mean() + x.std() * rand(torch.randn)).clamp(x.min(), x.max())
        new = torch.where(x == 0, x, new)
    return new.to(t.dtype)


def degenerate(out: Any) -> str | None:
    """What makes a reference output useless for judging: a floating tensor with NaN or Inf, or one
    whose elements are all equal (more than one of them); None when it is fine."""
    from cuda_agent.evaluate.transport import tensors_of

    for i, t in enumerate(tensors_of(out)):
        if not t.is_floating_point() or t.numel() == 0:
            continue
        if not bool(torch.isfinite(t).all()):
            return f"output tensor {i} is not finite"
        if t.numel() > 1 and is_constant(t):
            return f"output tensor {i} is constant"
    return None


@dataclass(slots=True)
class Match:
    """Where ModelNew's state entries come from: `pairs` maps each of ModelNew's names that receives
    a reference tensor to the reference's name; `by` is `name` or `value`."""

    pairs: dict[str, str]
    by: str
    missing: list[str] = field(default_factory=list)  # reference names no entry of ModelNew holds
    extra: list[str] = field(default_factory=list)  # ModelNew's names that hold no reference tensor


def same_layout(spec: dict[str, Any], t: torch.Tensor) -> bool:
    """Does a transport spec (shape, dtype) describe a tensor like `t`?"""
    from cuda_agent.evaluate.transport import dtype_name

    return isinstance(spec, dict) and spec.get("shape") == list(t.shape) and spec.get("dtype") == dtype_name(t.dtype)


def match_by_name(ref: dict[str, torch.Tensor], specs: dict[str, Any]) -> Match | None:
    """The identity map when ModelNew's entries have exactly Model's names, shapes and dtypes."""
    if set(ref) != set(specs) or not all(same_layout(specs[k], v) for k, v in ref.items()):
        return None
    return Match(pairs={k: k for k in ref}, by="name")


def match_by_value(default: dict[str, torch.Tensor], values: dict[str, torch.Tensor]) -> Match:
    """Each of ModelNew's entries (`values`, in its state_dict's order) paired with the reference
    entry it equals at default init (`default`, in Model's order): same shape, dtype and bits, or
    failing that, the same elements in the same order under another shape (a reshape: a
    (1, C, 1, 1) scale kept as (C,), a (1, 1, 1) bias as (1,); the reference's tensor then reaches
    ModelNew reshaped, `fit`). Each reference entry is taken once.

    First the entries that say which one they are: the one of Model's with the same name, or the
    only one of Model's with that value (random-init weights). Then the rest, equal constants
    (normalisation layers' ones and zeros), in ModelNew's order: among the free reference entries
    equal to it, those with the same last name part (`weight`, `running_var`), and of those the
    first after the reference entry that ModelNew's previous entry was paired with (so a norm
    layer's constants follow the convolution they follow in both models, whatever order the
    blocks were declared in), else the first."""
    from cuda_agent.evaluate.compare import same_bits

    def equal(pool, v: torch.Tensor) -> list[str]:
        same = [r for r in pool if default[r].shape == v.shape and default[r].dtype == v.dtype
                and same_bits(default[r], v)]
        return same or [r for r in pool if default[r].numel() == v.numel() > 0 and default[r].dtype == v.dtype
                        and same_bits(default[r].reshape(-1), v.reshape(-1))]

    def leaf(name: str) -> str:
        return name.rsplit(".", 1)[-1]

    order = {r: i for i, r in enumerate(default)}
    hits = {name: equal(default, v) for name, v in values.items()}
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for name in values:  # the entries that say which one they are
        h = hits[name]
        pick = name if name in h else h[0] if len(h) == 1 else None
        if pick is not None and pick not in taken:
            pairs[name] = pick
            taken.add(pick)
    extra = []
    anchor = -1
    for name in values:  # equal constants, by name part and position
        if name in pairs:
            anchor = order[pairs[name]]
            continue
        free = [r for r in hits[name] if r not in taken]
        if not free:
            extra.append(name)
            continue
        named = [r for r in free if leaf(r) == leaf(name)] or free
        pick = next((r for r in named if order[r] > anchor), named[0])
        pairs[name] = pick
        taken.add(pick)
        anchor = order[pick]
    pairs = {name: pairs[name] for name in values if name in pairs}  # ModelNew's order
    return Match(pairs=pairs, by="value", missing=[r for r in default if r not in taken], extra=extra)


def copies(extra: list[str], values: dict[str, torch.Tensor], random_init: dict[str, torch.Tensor]) -> dict[str, str]:
    """Which of ModelNew's unmatched entries (`extra`, with their default-init `values`) hold the
    elements of one of Model's random-init tensors in another order, or an affine image of them
    (s * w + t, s != 0): a weight transposed, re-laid out, scaled or shifted by a constant of the
    model in __init__ and kept beside the original. {ModelNew's name: Model's name}. The same
    multiset of a few thousand random floats, or an exact affine image of it, does not happen by
    chance (two independent draws of one distribution differ by far more than rounding). Cheap
    tests first (extremes; moments, which an affine map keeps), so that a large model's many
    tensors of one size are not all sorted against each other."""
    out: dict[str, str] = {}
    stats: dict[str, tuple[float, float, tuple[float, float] | None]] = {}

    def stats_of(key: str, t: torch.Tensor) -> tuple[float, float, tuple[float, float] | None]:
        if key not in stats:  # each tensor's once: min, max, moments
            stats[key] = (float(t.min()), float(t.max()), _moments(t) if t.numel() >= AFFINE_MIN else None)
        return stats[key]

    for name in extra:
        v = values[name]
        if not v.is_floating_point() or v.numel() < 2:
            continue
        for ref_name, r in random_init.items():
            if r.numel() != v.numel() or r.dtype != v.dtype:
                continue
            a, b = v.reshape(-1).to(r.device), r.reshape(-1)
            (lo_a, hi_a, ma), (lo_b, hi_b, mb) = stats_of("new:" + name, a), stats_of(ref_name, b)
            if lo_a == lo_b and hi_a == hi_b and torch.equal(torch.sort(a).values, torch.sort(b).values):
                out[name] = ref_name
                break
            if ma is not None and mb is not None and math.isclose(ma[0], mb[0], rel_tol=1e-5, abs_tol=1e-5) \
                    and math.isclose(ma[1], mb[1], rel_tol=1e-5) and _affine_image(a, b):
                out[name] = ref_name
                break
    return out


AFFINE_MIN = 16  # elements an affine copy needs before it counts: any two short tensors are affine images


def _moments(x: torch.Tensor) -> tuple[float, float] | None:
    """|skewness| and kurtosis of `x`'s elements (kept by any map s * x + t, s != 0); None if constant.
    Two draws of one distribution differ in them by about sqrt(24 / n), float rounding by 1e-7."""
    x = x.double()
    sd = x.std(unbiased=False)
    if not sd > 0:
        return None
    z = (x - x.mean()) / sd
    return abs(float((z ** 3).mean())), float((z ** 4).mean())


def _affine_image(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Is `a` a permutation of s * b + t for some s != 0 and t, within float rounding?"""
    sa, sb = torch.sort(a.double()).values, torch.sort(b.double()).values
    for side in (sb, sb.flip(0)):  # s < 0 reverses the order
        span = side[-1] - side[0]
        if span == 0:
            return False
        s = (sa[-1] - sa[0]) / span
        if s == 0 or not torch.isfinite(s):
            continue
        t = sa[0] - s * side[0]
        scale = float(sa.abs().max())
        if torch.allclose(sa, s * side + t, rtol=1e-5, atol=1e-6 * scale):
            return True
    return False


def random_init_names(learned: Any, default: dict[str, torch.Tensor]) -> list[str]:
    """The learned tensors (names) whose default init is random, not a constant."""
    return [k for k in learned if not is_constant(default[k])]


def fused_or_copied(m: Match, own: dict[str, torch.Tensor], default: dict[str, torch.Tensor],
                    random_init: list[str]) -> tuple[list[str], dict[str, str]]:
    """Why a by-value match falls back to the same-seed rule, if it does: Model's random-init
    learned tensors (`random_init`) that ModelNew holds nowhere (fused or reshaped), and ModelNew's
    unmatched entries that hold a matched one's elements in another order (`copies`). Both empty:
    it does not."""
    fused = [k for k in m.missing if k in random_init]
    matched = set(m.pairs.values())
    return fused, copies(m.extra, own, {k: default[k] for k in random_init if k in matched})


def fit(t: torch.Tensor, shape: Any) -> torch.Tensor:
    """The reference's tensor `t` in the shape of the ModelNew entry it was matched to (the same
    elements in the same order: `match_by_value` pairs reshapes only)."""
    shape = tuple(shape)
    return t if tuple(t.shape) == shape else t.reshape(shape)


def mismatch_hint(ref: dict[str, Any], specs: dict[str, Any], by_value: Match | None) -> str:
    """What differs between ModelNew's state_dict names and Model's, and how to fix it."""
    from cuda_agent.evaluate.transport import dtype_name

    missing, extra = sorted(set(ref) - set(specs)), sorted(set(specs) - set(ref))
    lines = [f"ModelNew's state_dict must have Model's names, shapes and dtypes (the strict policy loads "
             f"the reference's weights by name); missing: {_few(missing)}; unexpected: {_few(extra)}"]
    for k in sorted(set(ref) & set(specs)):
        if not same_layout(specs[k], ref[k]):
            lines.append(f"{k}: ModelNew has {specs[k].get('dtype')}{specs[k].get('shape')}, Model has "
                         f"{dtype_name(ref[k].dtype)}{list(ref[k].shape)}")
    if by_value is not None:
        renames = [f"`{c}` holds Model's `{r}`" for c, r in by_value.pairs.items() if c != r][:6]
        if renames:
            lines.append("Rename: " + "; ".join(renames) + ".")
    lines.append("Keep Model's submodules under Model's attribute names (e.g. `self.conv = nn.Conv2d(...)`, "
                 "then pass `self.conv.weight` to your kernel), or re-score with --policy kernelbench, "
                 "which matches weights by value")
    return "\n".join(lines)


def _few(names: list[str]) -> str:
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "") if names else "none"
