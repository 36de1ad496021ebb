"""Activations (family `activation`): `torch.nn` activation modules and their functional forms.

Each row of `_ACTIVATIONS` registers the module and the functional form with one argument generator.
GLU halves a non-batch dim of even size; PReLU's weight is one value or one per channel (dim 1).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from cuda_agent.synth.catalogue.base import (ANY, ND, SRC_F, SRC_NN, MakeFn, dim_str, instance, module_call, nonbatch,
                                             param, register, rnd_float)

_ArgFn = Callable[[random.Random], str]
_ACTIVATIONS: list[tuple[str, str, _ArgFn | None]] = [
    ("ReLU", "relu", None),
    ("ReLU6", "relu6", None),
    ("ELU", "elu", lambda r: f"alpha={rnd_float(r, (0.5, 1.0, 1.5))}"),
    ("SELU", "selu", None),
    ("CELU", "celu", lambda r: f"alpha={rnd_float(r, (0.5, 1.0, 2.0))}"),
    ("GELU", "gelu", lambda r: r.choice(("", "approximate='tanh'"))),
    ("SiLU", "silu", None),
    ("Mish", "mish", None),
    ("Hardswish", "hardswish", None),
    ("Hardsigmoid", "hardsigmoid", None),
    ("Hardtanh", "hardtanh", lambda r: r.choice(("min_val=-1.0, max_val=1.0", "min_val=-0.5, max_val=2.0",
                                                  "min_val=0.0, max_val=6.0"))),
    ("LeakyReLU", "leaky_relu", lambda r: f"negative_slope={rnd_float(r, (0.01, 0.1, 0.2))}"),
    ("LogSigmoid", "logsigmoid", None),
    ("Softplus", "softplus", lambda r: r.choice(("beta=1.0, threshold=20.0", "beta=2.0, threshold=10.0",
                                                  "beta=0.5, threshold=20.0"))),
    ("Softsign", "softsign", None),
    ("Softshrink", "softshrink", lambda r: f"lambd={rnd_float(r, (0.1, 0.5))}"),
    ("Hardshrink", "hardshrink", lambda r: f"lambd={rnd_float(r, (0.1, 0.5))}"),
    ("Tanhshrink", "tanhshrink", None),
    ("Threshold", "threshold", lambda r: r.choice(("threshold=0.1, value=0.0", "threshold=-0.5, value=-1.0",
                                                    "threshold=0.5, value=0.2"))),
    ("Sigmoid", "sigmoid", None),
    ("Tanh", "tanh", None),
]


def _act_module(cls: str, args: _ArgFn | None) -> MakeFn:
    def make(rng, shape):
        return module_call(f"nn.{cls}({args(rng) if args else ''})")(shape)
    return make


def _act_functional(fn: str, args: _ArgFn | None) -> MakeFn:
    def make(rng, shape):
        a = args(rng) if args else ""
        return instance(f"{{x}} = F.{fn}({{x}}{', ' + a if a else ''})", shape)
    return make


for _cls, _fn, _argfn in _ACTIVATIONS:
    register(f"torch.nn.{_cls}", SRC_NN, "activation", ANY, _act_module(_cls, _argfn))
    register(f"torch.nn.functional.{_fn}", SRC_F, "activation", ANY, _act_functional(_fn, _argfn))


def _glu(module: bool) -> MakeFn:
    def make(rng, shape):
        dims = [d for d in nonbatch(shape, 2) if shape[d] % 2 == 0]
        if not dims:
            return None
        d = rng.choice(dims)
        out = shape[:d] + (shape[d] // 2,) + shape[d + 1:]
        ds = dim_str(d, len(shape))
        if module:
            return module_call(f"nn.GLU(dim={ds})", out=out)(shape)
        return instance(f"{{x}} = F.glu({{x}}, dim={ds})", out)
    return make


register("torch.nn.GLU", SRC_NN, "activation", ND, _glu(True))
register("torch.nn.functional.glu", SRC_F, "activation", ND, _glu(False))


def _prelu(module: bool) -> MakeFn:
    def make(rng, shape):
        n = rng.choice((1, shape[1])) if shape[1] <= 4096 else 1
        if module:
            return module_call(f"nn.PReLU(num_parameters={n}, init={rnd_float(rng, (0.1, 0.25))})")(shape)
        return instance("{x} = F.prelu({x}, self.{name}_weight)", shape,
                        init=param("_weight", f"torch.rand({n}) * 0.5"))
    return make


register("torch.nn.PReLU", SRC_NN, "activation", ND, _prelu(True))
register("torch.nn.functional.prelu", SRC_F, "activation", ND, _prelu(False))
