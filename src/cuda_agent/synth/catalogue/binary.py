"""Binary elementwise ops (family `binary`): the second operand is an extra input, a parameter or a literal.

`_operand` draws that operand broadcastable to the running tensor; where it is a denominator or a base
it is made positive, so the result stays finite. (`torch.linalg.cross`, also `binary`, is in `linalg`.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from cuda_agent.synth.catalogue.base import (ANY, SRC_T, SRC_TT, MakeFn, Shape, instance, numel, param, register,
                                             rnd_float, shape_args)


@dataclass(frozen=True)
class _Operand:
    expr: str
    init: tuple[str, ...] = ()
    extra: tuple[Shape, ...] = ()


def _operand(rng: random.Random, shape: Shape, kinds: Sequence[str] = ("input", "param", "scalar"),
             positive: bool = False, index: int = 0) -> _Operand:
    """A second operand broadcastable to `shape`; `positive` makes it > 0 (a safe denominator/base)."""
    kind = rng.choice(list(kinds))
    rank = len(shape)
    if kind == "scalar":
        return _Operand(rnd_float(rng, (0.5, 1.5, 2.0, 3.0) if positive else (-1.5, -0.5, 0.5, 2.0)))
    if kind == "input":
        options = [shape]
        if rank >= 2:
            options.append((shape[0],) + (1,) * (rank - 1))
        if rank >= 3:
            options.append((shape[0], shape[1]) + (1,) * (rank - 2))
        eshape = rng.choice(options)
        y = f"{{y{index}}}"
        expr = f"({y}.abs() + 0.5)" if positive else y
        return _Operand(expr, extra=(eshape,))
    options = [(1,)]
    if rank >= 2:
        options.append((shape[-1],))
        options.append((shape[1],) + (1,) * (rank - 2))
        if numel(shape[1:]) <= 1 << 20:
            options.append(shape[1:])
    pshape = rng.choice(options)
    ctor = f"torch.rand({shape_args(pshape)}) + 0.5" if positive else f"torch.randn({shape_args(pshape)})"
    return _Operand("self.{name}", init=(param("", ctor),))


def _binary(template: str, kinds: Sequence[str] = ("input", "param", "scalar"), positive: bool = False) -> MakeFn:
    def make(rng, shape):
        a = _operand(rng, shape, kinds, positive)
        return instance("{x} = " + template.replace("{a}", a.expr), shape, init=a.init, extra=a.extra)
    return make


_TENSOR = ("input", "param")
_BINARY: list[tuple[str, str, Sequence[str], bool]] = [
    ("torch.add", "torch.add({x}, {a})", ("input", "param", "scalar"), False),
    ("torch.sub", "torch.sub({x}, {a})", ("input", "param", "scalar"), False),
    ("torch.mul", "torch.mul({x}, {a})", ("input", "param", "scalar"), False),
    ("torch.div", "torch.div({x}, {a})", ("input", "param", "scalar"), True),
    ("torch.maximum", "torch.maximum({x}, {a})", _TENSOR, False),
    ("torch.minimum", "torch.minimum({x}, {a})", _TENSOR, False),
    ("torch.fmax", "torch.fmax({x}, {a})", _TENSOR, False),
    ("torch.fmin", "torch.fmin({x}, {a})", _TENSOR, False),
    ("torch.atan2", "torch.atan2({x}, {a})", _TENSOR, False),
    ("torch.hypot", "torch.hypot({x}, {a})", _TENSOR, False),
    ("torch.remainder", "torch.remainder({x}, {a})", ("input", "param", "scalar"), True),
    ("torch.fmod", "torch.fmod({x}, {a})", ("input", "param", "scalar"), True),
    ("torch.floor_divide", "torch.floor_divide({x}, {a})", ("input", "param", "scalar"), True),
    ("torch.copysign", "torch.copysign({x}, {a})", _TENSOR, False),
    ("torch.lerp", "torch.lerp({x}, {a}, 0.3)", _TENSOR, False),
    ("torch.logaddexp", "torch.logaddexp({x}, {a})", _TENSOR, False),
    ("torch.logaddexp2", "torch.logaddexp2({x}, {a})", _TENSOR, False),
    ("torch.xlogy", "torch.xlogy({x}, {a})", _TENSOR, True),
    ("torch.special.xlog1py", "torch.special.xlog1py({x}, {a})", _TENSOR, True),
]
for _name, _tmpl, _kinds, _pos in _BINARY:
    register(_name, SRC_T, "binary", ANY, _binary(_tmpl, _kinds, _pos))


def _pow(rng, shape):
    if rng.random() < 0.6:
        return instance(f"{{x}} = torch.pow({{x}}.abs() + 1e-3, {rnd_float(rng, (0.5, 1.5, 2.0, 3.0))})", shape)
    a = _operand(rng, shape, _TENSOR)
    return instance(f"{{x}} = torch.pow({{x}}.abs() + 1e-3, {a.expr}.clamp(-2.0, 2.0))", shape, init=a.init,
                    extra=a.extra)


register("torch.pow", SRC_T, "binary", ANY, _pow)


def _where(rng, shape):
    other = _operand(rng, shape, ("input", "scalar"), index=1)
    return instance(f"{{x}} = torch.where({{y0}} > 0, {{x}}, {other.expr})", shape, extra=(shape, *other.extra))


register("torch.where", SRC_T, "binary", ANY, _where)
register("torch.Tensor.masked_fill", SRC_TT, "binary", ANY,
         lambda rng, shape: instance(f"{{x}} = {{x}}.masked_fill({{y0}} > {rnd_float(rng, (0.0, 0.5, 1.0))}, "
                                     f"{rnd_float(rng, (0.0, -1.0))})", shape, extra=(shape,)))
register("torch.addcmul", SRC_T, "binary", ANY,
         lambda rng, shape: instance(f"{{x}} = torch.addcmul({{x}}, {{y0}}, {{y1}}, "
                                     f"value={rnd_float(rng, (0.1, 0.5, 1.0))})", shape, extra=(shape, shape)))
register("torch.addcdiv", SRC_T, "binary", ANY,
         lambda rng, shape: instance(f"{{x}} = torch.addcdiv({{x}}, {{y0}}, {{y1}}.abs() + 1.0, "
                                     f"value={rnd_float(rng, (0.1, 0.5, 1.0))})", shape, extra=(shape, shape)))
