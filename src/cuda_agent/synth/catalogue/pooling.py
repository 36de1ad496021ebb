"""Pooling (family `pool`): max, average and power-average pooling 1d-3d, their adaptive forms, and
max-unpooling, each as a module and as a functional call.

Max-unpooling is fed by the indices of a max-pooling written just before it, in the same instance.
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import (POOL_START, SRC_F, SRC_NN, MakeFn, instance, module_call, register,
                                             tuple_literal)


def _pool_out(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = n + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool(kind: str, nd: int, module: bool) -> MakeFn:
    """kind: max | avg | lp."""
    def make(rng, shape):
        spatial = shape[2:]
        ks = [k for k in (2, 3) if k <= min(spatial)]
        if not ks:
            return None
        k = rng.choice(ks)
        s = rng.choice((k, k, 1, 2))
        p = rng.choice((0, k // 2)) if kind != "lp" else 0
        d = 2 if kind == "max" and rng.random() < 0.15 and 2 * (k - 1) + 1 <= min(spatial) else 1
        ceil = kind != "lp" and rng.random() < 0.2
        out_sp = tuple(_pool_out(n, k, s, p, d, ceil) for n in spatial)
        if min(out_sp) < 1:
            return None
        out = shape[:2] + out_sp
        kw = [f"kernel_size={k}", f"stride={s}"]
        if p:
            kw.append(f"padding={p}")
        if d != 1:
            kw.append(f"dilation={d}")
        if ceil:
            kw.append("ceil_mode=True")
        if kind == "avg" and p and rng.random() < 0.5:
            kw.append("count_include_pad=False")
        if kind == "lp":
            kw.insert(0, f"norm_type={rng.choice((1, 2))}")
        cls = {"max": "MaxPool", "avg": "AvgPool", "lp": "LPPool"}[kind] + f"{nd}d"
        if module:
            return module_call(f"nn.{cls}({', '.join(kw)})", out=out)(shape)
        fn = {"max": "max_pool", "avg": "avg_pool", "lp": "lp_pool"}[kind] + f"{nd}d"
        return instance(f"{{x}} = F.{fn}({{x}}, {', '.join(kw)})", out)
    return make


def _adaptive(kind: str, nd: int, module: bool) -> MakeFn:
    def make(rng, shape):
        spatial = shape[2:]
        choice = rng.choice(("one", "half", "fixed"))
        if choice == "one":
            out_sp = (1,) * nd
        elif choice == "half":
            out_sp = tuple(max(1, n // 2) for n in spatial)
        else:
            out_sp = tuple(min(n, rng.choice((4, 7, 8))) for n in spatial)
        size = str(out_sp[0]) if len(set(out_sp)) == 1 else tuple_literal(out_sp)
        cls = f"Adaptive{'Max' if kind == 'max' else 'Avg'}Pool{nd}d"
        out = shape[:2] + out_sp
        if module:
            return module_call(f"nn.{cls}({size})", out=out)(shape)
        return instance(f"{{x}} = F.adaptive_{kind}_pool{nd}d({{x}}, {size})", out)
    return make


for _nd in (1, 2, 3):
    for _kind in ("max", "avg", "lp"):
        _cls = {"max": "MaxPool", "avg": "AvgPool", "lp": "LPPool"}[_kind] + f"{_nd}d"
        _fn = {"max": "max_pool", "avg": "avg_pool", "lp": "lp_pool"}[_kind] + f"{_nd}d"
        register(f"torch.nn.{_cls}", SRC_NN, "pool", (_nd + 2,), _pool(_kind, _nd, True), POOL_START[_nd])
        register(f"torch.nn.functional.{_fn}", SRC_F, "pool", (_nd + 2,), _pool(_kind, _nd, False), POOL_START[_nd])
    for _kind in ("max", "avg"):
        _cls = f"Adaptive{'Max' if _kind == 'max' else 'Avg'}Pool{_nd}d"
        register(f"torch.nn.{_cls}", SRC_NN, "pool", (_nd + 2,), _adaptive(_kind, _nd, True), POOL_START[_nd])
        register(f"torch.nn.functional.adaptive_{_kind}_pool{_nd}d", SRC_F, "pool", (_nd + 2,),
                 _adaptive(_kind, _nd, False), POOL_START[_nd])


def _unpool(nd: int, module: bool) -> MakeFn:
    """Max-unpooling fed by the indices of the max-pooling just before it (stride = kernel), back to the
    input's size: the maxima stay in place, everything else becomes zero."""
    def make(rng, shape):
        spatial = shape[2:]
        ks = [k for k in (2, 3) if k <= min(spatial)]
        if not ks:
            return None
        k = rng.choice(ks)
        size = tuple_literal(spatial)
        if module:
            init = (f"self.{{name}}_pool = nn.MaxPool{nd}d({k}, return_indices=True)",
                    f"self.{{name}} = nn.MaxUnpool{nd}d({k})")
            fwd = ("{x}, {name}_idx = self.{name}_pool({x})",
                   f"{{x}} = self.{{name}}({{x}}, {{name}}_idx, output_size={size})")
            return instance(fwd, shape, init=init)
        fwd = (f"{{x}}, {{name}}_idx = F.max_pool{nd}d({{x}}, {k}, return_indices=True)",
               f"{{x}} = F.max_unpool{nd}d({{x}}, {{name}}_idx, {k}, output_size={size})")
        return instance(fwd, shape)
    return make


for _nd in (1, 2, 3):
    register(f"torch.nn.MaxUnpool{_nd}d", SRC_NN, "pool", (_nd + 2,), _unpool(_nd, True), POOL_START[_nd])
    register(f"torch.nn.functional.max_unpool{_nd}d", SRC_F, "pool", (_nd + 2,), _unpool(_nd, False), POOL_START[_nd])
