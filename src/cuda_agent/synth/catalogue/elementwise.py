"""Elementwise unary math (family `elementwise`): torch, torch.special and Tensor functions, and clamps.

A restricted domain is fixed in the generated code (`torch.log({x}.abs() + 1e-3)`,
`torch.asin({x}.clamp(-1.0, 1.0))`) and exponentials are clamped, so any finite input gives a finite
output.
"""

from __future__ import annotations

import random

from cuda_agent.synth.catalogue.base import ANY, SRC_T, SRC_TT, MakeFn, instance, register, rnd_float

_UNARY: list[tuple[str, str]] = [
    ("torch.abs", "torch.abs({x})"),
    ("torch.neg", "torch.neg({x})"),
    ("torch.exp", "torch.exp({x}.clamp(max=20.0))"),
    ("torch.exp2", "torch.exp2({x}.clamp(max=30.0))"),
    ("torch.expm1", "torch.expm1({x}.clamp(max=20.0))"),
    ("torch.log", "torch.log({x}.abs() + 1e-3)"),
    ("torch.log2", "torch.log2({x}.abs() + 1e-3)"),
    ("torch.log10", "torch.log10({x}.abs() + 1e-3)"),
    ("torch.log1p", "torch.log1p({x}.abs())"),
    ("torch.sqrt", "torch.sqrt({x}.abs())"),
    ("torch.rsqrt", "torch.rsqrt({x}.abs() + 1e-3)"),
    ("torch.sin", "torch.sin({x})"),
    ("torch.cos", "torch.cos({x})"),
    ("torch.tan", "torch.tan({x}.clamp(-1.5, 1.5))"),
    ("torch.asin", "torch.asin({x}.clamp(-1.0, 1.0))"),
    ("torch.acos", "torch.acos({x}.clamp(-1.0, 1.0))"),
    ("torch.atan", "torch.atan({x})"),
    ("torch.sinh", "torch.sinh({x}.clamp(-20.0, 20.0))"),
    ("torch.cosh", "torch.cosh({x}.clamp(-20.0, 20.0))"),
    ("torch.tanh", "torch.tanh({x})"),
    ("torch.asinh", "torch.asinh({x})"),
    ("torch.acosh", "torch.acosh({x}.abs() + 1.0)"),
    ("torch.atanh", "torch.atanh({x}.clamp(-0.99, 0.99))"),
    ("torch.erf", "torch.erf({x})"),
    ("torch.erfc", "torch.erfc({x})"),
    ("torch.erfinv", "torch.erfinv({x}.clamp(-0.99, 0.99))"),
    ("torch.sigmoid", "torch.sigmoid({x})"),
    ("torch.logit", "torch.logit(torch.sigmoid({x}), eps=1e-6)"),
    ("torch.sign", "torch.sign({x})"),
    ("torch.square", "torch.square({x})"),
    ("torch.reciprocal", "torch.reciprocal({x}.abs() + 1.0)"),
    ("torch.floor", "torch.floor({x})"),
    ("torch.ceil", "torch.ceil({x})"),
    ("torch.round", "torch.round({x})"),
    ("torch.trunc", "torch.trunc({x})"),
    ("torch.frac", "torch.frac({x})"),
    ("torch.lgamma", "torch.lgamma({x}.abs() + 0.1)"),
    ("torch.digamma", "torch.digamma({x}.abs() + 0.1)"),
    ("torch.polygamma", "torch.polygamma(1, {x}.abs() + 0.5)"),
    ("torch.i0", "torch.i0({x}.clamp(-20.0, 20.0))"),
    ("torch.sinc", "torch.sinc({x})"),
    ("torch.deg2rad", "torch.deg2rad({x})"),
    ("torch.rad2deg", "torch.rad2deg({x})"),
    ("torch.special.ndtr", "torch.special.ndtr({x})"),
    ("torch.special.ndtri", "torch.special.ndtri(torch.sigmoid({x}).clamp(1e-6, 1.0 - 1e-6))"),
    ("torch.special.log_ndtr", "torch.special.log_ndtr({x})"),
    ("torch.special.erfcx", "torch.special.erfcx({x}.clamp(min=-9.0))"),
    ("torch.special.i0e", "torch.special.i0e({x})"),
    ("torch.special.i1", "torch.special.i1({x}.clamp(-20.0, 20.0))"),
    ("torch.special.i1e", "torch.special.i1e({x})"),
    ("torch.special.entr", "torch.special.entr({x}.abs())"),
    ("torch.special.bessel_j0", "torch.special.bessel_j0({x})"),
    ("torch.special.bessel_j1", "torch.special.bessel_j1({x})"),
]


def _const_expr(expr: str) -> MakeFn:
    def make(rng, shape):
        return instance(f"{{x}} = {expr}", shape)
    return make


for _name, _expr in _UNARY:
    register(_name, SRC_T, "elementwise", ANY, _const_expr(_expr))


def _clamp_bounds(rng: random.Random) -> str:
    return rng.choice(("min=-1.0, max=1.0", "min=-0.5, max=0.5", "min=0.0, max=6.0", "min=-2.0, max=0.25"))


register("torch.clamp", SRC_T, "elementwise", ANY,
         lambda rng, shape: instance(f"{{x}} = torch.clamp({{x}}, {_clamp_bounds(rng)})", shape))
register("torch.Tensor.clamp", SRC_TT, "elementwise", ANY,
         lambda rng, shape: instance(f"{{x}} = {{x}}.clamp({_clamp_bounds(rng)})", shape))
register("torch.clamp_min", SRC_T, "elementwise", ANY,
         lambda rng, shape: instance(f"{{x}} = torch.clamp_min({{x}}, {rnd_float(rng, (-0.5, 0.0, 0.25))})", shape))
register("torch.clamp_max", SRC_T, "elementwise", ANY,
         lambda rng, shape: instance(f"{{x}} = torch.clamp_max({{x}}, {rnd_float(rng, (-0.25, 0.0, 0.5))})", shape))
