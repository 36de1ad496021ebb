"""Softmax, reductions and scans over non-batch dims (families `softmax`, `reduction`, `scan`).

The reduced or scanned dim is never dim 0. Ops whose values grow with the size of the dim
(`torch.prod`, `torch.cumprod`) are only given small dims (`max_size`) and start from small shapes.
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import (ND, SRC_F, SRC_NN, SRC_T, MakeFn, dim_str, dims_arg, instance,
                                             module_call, nonbatch, pick_dims, reduced, register, start_fixed)

# --- softmax --------------------------------------------------------------------------------------


def _softmax(cls: str | None, fn: str | None) -> MakeFn:
    def make(rng, shape):
        dims = nonbatch(shape, 2)
        if not dims:
            return None
        d = dim_str(rng.choice(dims), len(shape))
        if cls:
            return module_call(f"nn.{cls}(dim={d})")(shape)
        return instance(f"{{x}} = F.{fn}({{x}}, dim={d})", shape)
    return make


for _cls, _fn in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Softmin", "softmin")):
    register(f"torch.nn.{_cls}", SRC_NN, "softmax", ND, _softmax(_cls, None))
    register(f"torch.nn.functional.{_fn}", SRC_F, "softmax", ND, _softmax(None, _fn))
register("torch.nn.Softmax2d", SRC_NN, "softmax", (4,),
         lambda rng, shape: module_call("nn.Softmax2d()")(shape) if shape[1] >= 2 else None)

# --- reductions and scans -------------------------------------------------------------------------


def _reduction(template: str, multi: bool = True, keepdim: bool = True, min_size: int = 1,
               max_size: int | None = None) -> MakeFn:
    """`template` uses `{dim}` and `{keepdim}` (rendered `, keepdim=True` or nothing)."""
    def make(rng, shape):
        dims = pick_dims(rng, shape, multi, min_size, max_size)
        if dims is None:
            return None
        keep = keepdim and rng.random() < 0.5
        code = template.replace("{dim}", dims_arg(dims)).replace("{keepdim}", ", keepdim=True" if keep else "")
        return instance(f"{{x}} = {code}", reduced(shape, dims, keep))
    return make


_REDUCTIONS: list[tuple[str, str, dict]] = [
    ("torch.sum", "torch.sum({x}, dim={dim}{keepdim})", {}),
    ("torch.mean", "torch.mean({x}, dim={dim}{keepdim})", {}),
    ("torch.amax", "torch.amax({x}, dim={dim}{keepdim})", {}),
    ("torch.amin", "torch.amin({x}, dim={dim}{keepdim})", {}),
    ("torch.logsumexp", "torch.logsumexp({x}, dim={dim}{keepdim})", {}),
    ("torch.nansum", "torch.nansum({x}, dim={dim}{keepdim})", {}),
    ("torch.nanmean", "torch.nanmean({x}, dim={dim}{keepdim})", {}),
    ("torch.max", "torch.max({x}, dim={dim}{keepdim}).values", {"multi": False}),
    ("torch.min", "torch.min({x}, dim={dim}{keepdim}).values", {"multi": False}),
    ("torch.median", "torch.median({x}, dim={dim}{keepdim}).values", {"multi": False}),
    ("torch.nanmedian", "torch.nanmedian({x}, dim={dim}{keepdim}).values", {"multi": False}),
    ("torch.argmax", "torch.argmax({x}, dim={dim}{keepdim}).float()", {"multi": False, "min_size": 2}),
    ("torch.argmin", "torch.argmin({x}, dim={dim}{keepdim}).float()", {"multi": False, "min_size": 2}),
    ("torch.prod", "torch.prod({x}, dim={dim}{keepdim})", {"multi": False, "max_size": 32}),
    ("torch.var", "torch.var({x}, dim={dim}{keepdim})", {"min_size": 2}),
    ("torch.std", "torch.std({x}, dim={dim}{keepdim})", {"min_size": 2}),
    ("torch.norm", "torch.norm({x}, p=2, dim={dim}{keepdim})", {}),
    ("torch.linalg.vector_norm", "torch.linalg.vector_norm({x}, ord=2, dim={dim}{keepdim})", {}),
    ("torch.trapezoid", "torch.trapezoid({x}, dim={dim})", {"multi": False, "keepdim": False, "min_size": 2}),
]
_SMALL_DIMS_START = start_fixed((256, 16), (64, 32), (32, 8, 16), (16, 16, 16))
for _name, _tmpl, _kw in _REDUCTIONS:
    register(_name, SRC_T, "reduction", ND, _reduction(_tmpl, **_kw), _SMALL_DIMS_START if "max_size" in _kw else None)


def _kthvalue(rng, shape):
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    k = rng.randint(1, shape[d])
    keep = rng.random() < 0.5
    return instance(f"{{x}} = torch.kthvalue({{x}}, {k}, dim={d}{', keepdim=True' if keep else ''}).values",
                    reduced(shape, (d,), keep))


register("torch.kthvalue", SRC_T, "reduction", ND, _kthvalue)


def _topk(rng, shape):
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    k = rng.randint(1, min(shape[d], 64))
    largest = rng.choice(("", ", largest=False"))
    return instance(f"{{x}} = torch.topk({{x}}, {k}, dim={dim_str(d, len(shape))}{largest}).values",
                    shape[:d] + (k,) + shape[d + 1:])


register("torch.topk", SRC_T, "reduction", ND, _topk)


def _sort(rng, shape):
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    desc = rng.choice(("", ", descending=True"))
    return instance(f"{{x}} = torch.sort({{x}}, dim={dim_str(d, len(shape))}{desc}).values", shape)


register("torch.sort", SRC_T, "reduction", ND, _sort)


def _matrix_norm(rng, shape):
    if shape[-1] < 2 or shape[-2] < 2:
        return None
    order = rng.choice(("'fro'", "1", "-1", "float('inf')"))
    return instance(f"{{x}} = torch.linalg.matrix_norm({{x}}, ord={order})", shape[:-2])


register("torch.linalg.matrix_norm", SRC_T, "reduction", (3, 4, 5), _matrix_norm)


def _scan(template: str, min_size: int = 2, max_size: int | None = None, shrink: int = 0) -> MakeFn:
    def make(rng, shape):
        dims = [d for d in nonbatch(shape, min_size) if max_size is None or shape[d] <= max_size]
        if not dims:
            return None
        d = rng.choice(dims)
        out = shape[:d] + (shape[d] - shrink,) + shape[d + 1:]
        return instance("{x} = " + template.replace("{dim}", dim_str(d, len(shape))), out)
    return make


_SCANS = [
    ("torch.cumsum", "torch.cumsum({x}, dim={dim})", {}),
    ("torch.cumprod", "torch.cumprod({x}, dim={dim})", {"max_size": 64}),
    ("torch.cummax", "torch.cummax({x}, dim={dim}).values", {}),
    ("torch.cummin", "torch.cummin({x}, dim={dim}).values", {}),
    ("torch.logcumsumexp", "torch.logcumsumexp({x}, dim={dim})", {}),
    ("torch.diff", "torch.diff({x}, dim={dim})", {"shrink": 1}),
    ("torch.cumulative_trapezoid", "torch.cumulative_trapezoid({x}, dim={dim})", {"shrink": 1}),
]
for _name, _tmpl, _kw in _SCANS:
    register(_name, SRC_T, "scan", ND, _scan(_tmpl, **_kw), _SMALL_DIMS_START if "max_size" in _kw else None)
