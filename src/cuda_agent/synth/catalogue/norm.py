"""Normalisation (family `norm`), with per-sample statistics only: layer, RMS, group, instance and local
response norms, `F.normalize`, `torch.renorm` (per sample: dim 0), and `F.batch_norm` in its inference
form (fixed running statistics, `training=False`). The BatchNorm modules are excluded: in training mode,
a task's default, their statistics mix the batch.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from cuda_agent.synth.catalogue.base import (ND, SRC_F, SRC_NN, SRC_T, MakeFn, Shape, dim_str, instance, module_call,
                                             nonbatch, numel, param, register, rnd_float, shape_args, tuple_literal)


def _divisors(n: int, candidates: Iterable[int]) -> list[int]:
    return [c for c in candidates if c <= n and n % c == 0]


def _eps(rng: random.Random) -> str:
    return rng.choice(("1e-5", "1e-6", "1e-3"))


def _trailing(rng: random.Random, shape: Shape) -> Shape | None:
    """Trailing non-batch dims to normalise over (>= 2 elements, <= 1M)."""
    options = []
    for k in range(1, min(2, len(shape) - 1) + 1):
        ns = shape[-k:]
        if 2 <= numel(ns) <= 1 << 20:
            options.append(ns)
    return rng.choice(options) if options else None


def _layer_norm(module: bool) -> MakeFn:
    def make(rng, shape):
        ns = _trailing(rng, shape)
        if ns is None:
            return None
        nsl = str(ns[0]) if len(ns) == 1 else tuple_literal(ns)
        eps = _eps(rng)
        if module:
            affine = rng.choice(("", ", elementwise_affine=False", ", bias=False"))
            return module_call(f"nn.LayerNorm({nsl}, eps={eps}{affine})")(shape)
        init = (param("_weight", f"1.0 + 0.1 * torch.randn({shape_args(ns)})"),
                param("_bias", f"0.1 * torch.randn({shape_args(ns)})"))
        return instance(f"{{x}} = F.layer_norm({{x}}, {tuple_literal(ns)}, self.{{name}}_weight, self.{{name}}_bias, "
                        f"eps={eps})", shape, init=init)
    return make


register("torch.nn.LayerNorm", SRC_NN, "norm", ND, _layer_norm(True))
register("torch.nn.functional.layer_norm", SRC_F, "norm", ND, _layer_norm(False))


def _rms_norm(module: bool) -> MakeFn:
    def make(rng, shape):
        ns = _trailing(rng, shape)
        if ns is None:
            return None
        nsl = str(ns[0]) if len(ns) == 1 else tuple_literal(ns)
        eps = _eps(rng)
        if module:
            affine = rng.choice(("", ", elementwise_affine=False"))
            return module_call(f"nn.RMSNorm({nsl}, eps={eps}{affine})")(shape)
        init = param("_weight", f"1.0 + 0.1 * torch.randn({shape_args(ns)})")
        return instance(f"{{x}} = F.rms_norm({{x}}, {tuple_literal(ns)}, self.{{name}}_weight, eps={eps})", shape,
                        init=init)
    return make


register("torch.nn.RMSNorm", SRC_NN, "norm", ND, _rms_norm(True))
register("torch.nn.functional.rms_norm", SRC_F, "norm", ND, _rms_norm(False))


def _group_norm(module: bool) -> MakeFn:
    def make(rng, shape):
        c, rest = shape[1], numel(shape[2:])
        gs = [g for g in _divisors(c, (1, 2, 4, 8, 16, 32)) if (c // g) * rest >= 2]
        if not gs or c > 4096:
            return None
        g = rng.choice(gs)
        eps = _eps(rng)
        if module:
            affine = rng.choice(("", ", affine=False"))
            return module_call(f"nn.GroupNorm({g}, {c}, eps={eps}{affine})")(shape)
        init = (param("_weight", f"1.0 + 0.1 * torch.randn({c})"), param("_bias", f"0.1 * torch.randn({c})"))
        return instance(f"{{x}} = F.group_norm({{x}}, {g}, self.{{name}}_weight, self.{{name}}_bias, eps={eps})",
                        shape, init=init)
    return make


register("torch.nn.GroupNorm", SRC_NN, "norm", ND, _group_norm(True))
register("torch.nn.functional.group_norm", SRC_F, "norm", ND, _group_norm(False))


def _instance_norm(nd: int | None) -> MakeFn:
    def make(rng, shape):
        c = shape[1]
        if numel(shape[2:]) < 2 or c > 4096:
            return None
        eps = _eps(rng)
        if nd is not None:
            affine = rng.choice(("", ", affine=True"))
            return module_call(f"nn.InstanceNorm{nd}d({c}, eps={eps}{affine})")(shape)
        init = (param("_weight", f"1.0 + 0.1 * torch.randn({c})"), param("_bias", f"0.1 * torch.randn({c})"))
        return instance(f"{{x}} = F.instance_norm({{x}}, weight=self.{{name}}_weight, bias=self.{{name}}_bias, "
                        f"eps={eps})", shape, init=init)
    return make


for _nd in (1, 2, 3):
    register(f"torch.nn.InstanceNorm{_nd}d", SRC_NN, "norm", (_nd + 2,), _instance_norm(_nd))
register("torch.nn.functional.instance_norm", SRC_F, "norm", (3, 4, 5), _instance_norm(None))


def _lrn(kind: str) -> MakeFn:
    def make(rng, shape):
        if shape[1] < 2:
            return None
        size = rng.choice((2, 3, 5))
        args = f"{size}, alpha={rnd_float(rng, (1e-4, 1e-3))}, beta=0.75, k={rnd_float(rng, (1.0, 2.0))}"
        if kind == "module":
            return module_call(f"nn.LocalResponseNorm({args})")(shape)
        if kind == "crossmap":
            return module_call(f"nn.CrossMapLRN2d({args})")(shape)
        return instance(f"{{x}} = F.local_response_norm({{x}}, {args})", shape)
    return make


register("torch.nn.LocalResponseNorm", SRC_NN, "norm", (3, 4, 5), _lrn("module"))
register("torch.nn.functional.local_response_norm", SRC_F, "norm", (3, 4, 5), _lrn("functional"))
register("torch.nn.CrossMapLRN2d", SRC_NN, "norm", (4,), _lrn("crossmap"))


def _normalize(rng, shape):
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = dim_str(rng.choice(dims), len(shape))
    p = rng.choice(("2.0", "1.0"))
    return instance(f"{{x}} = F.normalize({{x}}, p={p}, dim={d})", shape)


register("torch.nn.functional.normalize", SRC_F, "norm", ND, _normalize)


def _batch_norm_inference(rng, shape):
    c = shape[1]
    if c > 4096:
        return None
    init = (f'self.register_buffer("{{name}}_mean", 0.1 * torch.randn({c}))',
            f'self.register_buffer("{{name}}_var", torch.rand({c}) + 0.5)',
            param("_weight", f"1.0 + 0.1 * torch.randn({c})"),
            param("_bias", f"0.1 * torch.randn({c})"))
    return instance("{x} = F.batch_norm({x}, self.{name}_mean, self.{name}_var, self.{name}_weight, self.{name}_bias, "
                    f"training=False, eps={_eps(rng)})", shape, init=init)


register("torch.nn.functional.batch_norm", SRC_F, "norm", ND, _batch_norm_inference)


def _renorm(rng, shape):
    return instance(f"{{x}} = torch.renorm({{x}}, p=2, dim=0, maxnorm={rnd_float(rng, (0.5, 1.0, 5.0))})", shape)


register("torch.renorm", SRC_T, "norm", ND, _renorm)
