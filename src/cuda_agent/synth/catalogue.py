"""The operator catalogue: what a synthesised task may be composed of, and why everything else is out.

Each `Op` names one public operator (a `torch.nn` module, a `torch.nn.functional` function, a `torch`
or `torch.Tensor` operator, or a `transformers` layer written out as plain torch code) and carries two
generators: `start_shape(rng)`, a typical input shape when the op opens a chain, and `make(rng, shape)`,
a random valid `Instance` for an input of that shape (None when the shape does not suit). An instance
is code, not a module object: `init` and `forward` statements with placeholders that `render` fills in
(`{name}` the attribute prefix, `{x}` the running tensor, `{y0}`, `{y1}`... the op's extra inputs).

Rules every generator keeps (the composer and the filters rely on them):
- dim 0 is the batch and is never mixed: no reduction, softmax, normalisation statistic, reshape or
  attention across it. Modules that read a lower-rank input as "unbatched" (Conv1d on 2-D, Softmax2d
  on 3-D, MultiheadAttention on 2-D...) are only offered the batched rank, where that reading is safe.
- BatchNorm is excluded as a module (in training mode, the default of a task, its statistics mix the
  batch); `F.batch_norm` is catalogued in its inference form (`training=False`, fixed running stats).
- Restricted domains are fixed in the generated code (`torch.log(x.abs() + 1e-3)`), and exponentials
  are clamped, so any finite float input gives a finite output.
- Float32 only; deterministic ops only; sizes bounded (`_MAX_SAMPLE` elements per sample for outputs and
  extra inputs, `_MAX_PARAMS` parameters and `_MAX_MACS` multiply-adds per sample for one op).

`sweep()` lists every public `torch.nn` module class and `torch.nn.functional` function of the installed
torch, plus the documented list of torch/Tensor operators considered (`_CONSIDERED`), each either in
`CATALOGUE` or excluded with a code of `REASONS` and a one-line note. torch is imported only by `sweep`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

Shape = tuple[int, ...]  # dim 0 is always the batch dimension

_MAX_SAMPLE = 1 << 24  # elements per sample of an output or extra input
_MAX_PARAMS = 1 << 25  # parameters of one op
_MAX_MACS = 1 << 31  # multiply-adds per sample of one op
_MAX_RANK = 5
_BATCHES = (8, 16, 32)


@dataclass(frozen=True)
class Instance:
    """One operator applied to one input shape, as code for `render`.

    `init`/`forward` statements may use `{name}` (the attribute prefix the renderer picks), `{x}` (the
    running tensor, read and reassigned) and `{y0}`, `{y1}`... (this op's extra inputs, in order).
    `in_shape` is the input shape the instance was made for (set by `Op.make`); `render` checks that
    consecutive instances connect with it.
    """

    op: str
    init: tuple[str, ...]
    forward: tuple[str, ...]
    out_shape: Shape
    extra_inputs: tuple[Shape, ...] = ()
    defs: tuple[str, ...] = ()
    in_shape: Shape | None = None


MakeFn = Callable[[random.Random, Shape], "Instance | None"]
StartFn = Callable[[random.Random], Shape]


@dataclass(frozen=True)
class Op:
    """A catalogued operator: its public name, where it comes from, and its generators."""

    name: str
    source: str
    family: str
    ranks: frozenset[int]
    _make: MakeFn = field(repr=False, compare=False)
    _start: StartFn = field(repr=False, compare=False)

    def make(self, rng: random.Random, shape: Shape) -> Instance | None:
        """A random valid instance for an input of `shape`, or None when the shape does not suit."""
        shape = tuple(int(d) for d in shape)
        if len(shape) not in self.ranks or any(d < 1 for d in shape):
            return None
        inst = self._make(rng, shape)
        if inst is None:
            return None
        out = inst.out_shape
        if not 1 <= len(out) <= _MAX_RANK or out[0] != shape[0] or min(out) < 1:
            return None
        if _numel(out[1:]) > _MAX_SAMPLE or any(_numel(e[1:]) > _MAX_SAMPLE for e in inst.extra_inputs):
            return None
        assert all(e[0] == shape[0] for e in inst.extra_inputs), (self.name, inst.extra_inputs)
        return replace(inst, op=self.name, in_shape=shape)

    def start_shape(self, rng: random.Random) -> Shape:
        """A typical input shape for this op opening a chain (batch included, moderate sizes)."""
        return self._start(rng)


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _args(shape: Sequence[int]) -> str:
    """`(2, 3)` -> `2, 3`, for `torch.randn(2, 3)`."""
    return ", ".join(str(d) for d in shape)


def _tuple(values: Sequence[int]) -> str:
    """A Python tuple literal: `(2,)`, `(2, 3)`."""
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _dims_arg(dims: Sequence[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else _tuple(dims)


def _scale(fan_in: int) -> str:
    return f"{1.0 / math.sqrt(max(fan_in, 1)):.4g}"


def _I(forward: str | Sequence[str], out: Shape, init: str | Sequence[str] = (),
       extra: Sequence[Shape] = (), defs: Sequence[str] = ()) -> Instance:
    as_tuple = (lambda v: (v,) if isinstance(v, str) else tuple(v))
    return Instance(op="", init=as_tuple(init), forward=as_tuple(forward), out_shape=tuple(out),
                    extra_inputs=tuple(tuple(e) for e in extra), defs=tuple(defs))


def _mod(ctor: str, call: str = "self.{name}({x})", out: Shape | None = None, **kw) -> Callable[[Shape], Instance]:
    """Instance for a module call: `self.{name} = <ctor>` and `{x} = <call>`."""
    def build(shape: Shape) -> Instance:
        return _I(f"{{x}} = {call}", out if out is not None else shape, init=f"self.{{name}} = {ctor}", **kw)
    return build


def _param(suffix: str, ctor: str) -> str:
    return f"self.{{name}}{suffix} = nn.Parameter({ctor})"


def _randn_param(suffix: str, shape: Sequence[int], fan_in: int | None = None) -> str:
    scale = f" * {_scale(fan_in)}" if fan_in else ""
    return _param(suffix, f"torch.randn({_args(shape)}){scale}")


def _nonbatch(shape: Shape, min_size: int = 1) -> list[int]:
    return [d for d in range(1, len(shape)) if shape[d] >= min_size]


def _dim_str(d: int, rank: int) -> str:
    return "-1" if d == rank - 1 else str(d)


def _divisors(n: int, candidates: Iterable[int]) -> list[int]:
    return [c for c in candidates if c <= n and n % c == 0]


def _rnd_float(rng: random.Random, choices: Sequence[float]) -> str:
    return repr(float(rng.choice(list(choices))))


# --- start shapes -----------------------------------------------------------------------------------


def _shape_of_rank(rng: random.Random, rank: int) -> Shape:
    b = rng.choice(_BATCHES)
    if rank == 1:
        return (b,)
    if rank == 2:
        return (b, rng.choice((256, 512, 1024, 2048, 4096)))
    if rank == 3:
        c = rng.choice((16, 32, 64, 128))
        return (b, c, rng.choice((64, 128, 256)))
    if rank == 4:
        c = rng.choice((3, 8, 16, 32))
        h = rng.choice((16, 32, 64))
        return (b, c, h, rng.choice((h, h // 2, h * 2)))
    c = rng.choice((3, 4, 8, 16))
    return (b, c, rng.choice((8, 16)), rng.choice((16, 32)), rng.choice((16, 32)))


def _start(*ranks: int) -> StartFn:
    usable = sorted(r for r in ranks if r >= 2) or sorted(ranks)

    def start(rng: random.Random) -> Shape:
        return _shape_of_rank(rng, rng.choice(usable))
    return start


def _start_fixed(*choices: Sequence[int]) -> StartFn:
    """Start shapes drawn from per-sample shapes (batch prepended)."""
    def start(rng: random.Random) -> Shape:
        return (rng.choice(_BATCHES), *rng.choice(choices))
    return start


_ANY = (1, 2, 3, 4, 5)
_ND = (2, 3, 4, 5)

# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

_OPS: list[Op] = []


def _reg(name: str, source: str, family: str, ranks: Iterable[int], make: MakeFn,
         start: StartFn | None = None) -> None:
    ranks = frozenset(ranks)
    _OPS.append(Op(name, source, family, ranks, make, start or _start(*ranks)))


_NN, _F, _T, _TT, _HF = "torch.nn", "torch.nn.functional", "torch", "torch.Tensor", "transformers"


# --------------------------------------------------------------------------------------------------
# Activations: nn modules and their functional forms
# --------------------------------------------------------------------------------------------------

_ArgFn = Callable[[random.Random], str]
_ACTIVATIONS: list[tuple[str, str, _ArgFn | None]] = [
    ("ReLU", "relu", None),
    ("ReLU6", "relu6", None),
    ("ELU", "elu", lambda r: f"alpha={_rnd_float(r, (0.5, 1.0, 1.5))}"),
    ("SELU", "selu", None),
    ("CELU", "celu", lambda r: f"alpha={_rnd_float(r, (0.5, 1.0, 2.0))}"),
    ("GELU", "gelu", lambda r: r.choice(("", "approximate='tanh'"))),
    ("SiLU", "silu", None),
    ("Mish", "mish", None),
    ("Hardswish", "hardswish", None),
    ("Hardsigmoid", "hardsigmoid", None),
    ("Hardtanh", "hardtanh", lambda r: r.choice(("min_val=-1.0, max_val=1.0", "min_val=-0.5, max_val=2.0",
                                                  "min_val=0.0, max_val=6.0"))),
    ("LeakyReLU", "leaky_relu", lambda r: f"negative_slope={_rnd_float(r, (0.01, 0.1, 0.2))}"),
    ("LogSigmoid", "logsigmoid", None),
    ("Softplus", "softplus", lambda r: r.choice(("beta=1.0, threshold=20.0", "beta=2.0, threshold=10.0",
                                                  "beta=0.5, threshold=20.0"))),
    ("Softsign", "softsign", None),
    ("Softshrink", "softshrink", lambda r: f"lambd={_rnd_float(r, (0.1, 0.5))}"),
    ("Hardshrink", "hardshrink", lambda r: f"lambd={_rnd_float(r, (0.1, 0.5))}"),
    ("Tanhshrink", "tanhshrink", None),
    ("Threshold", "threshold", lambda r: r.choice(("threshold=0.1, value=0.0", "threshold=-0.5, value=-1.0",
                                                    "threshold=0.5, value=0.2"))),
    ("Sigmoid", "sigmoid", None),
    ("Tanh", "tanh", None),
]


def _act_module(cls: str, args: _ArgFn | None) -> MakeFn:
    def make(rng, shape):
        return _mod(f"nn.{cls}({args(rng) if args else ''})")(shape)
    return make


def _act_functional(fn: str, args: _ArgFn | None) -> MakeFn:
    def make(rng, shape):
        a = args(rng) if args else ""
        return _I(f"{{x}} = F.{fn}({{x}}{', ' + a if a else ''})", shape)
    return make


for _cls, _fn, _argfn in _ACTIVATIONS:
    _reg(f"torch.nn.{_cls}", _NN, "activation", _ANY, _act_module(_cls, _argfn))
    _reg(f"torch.nn.functional.{_fn}", _F, "activation", _ANY, _act_functional(_fn, _argfn))


def _glu(module: bool) -> MakeFn:
    def make(rng, shape):
        dims = [d for d in _nonbatch(shape, 2) if shape[d] % 2 == 0]
        if not dims:
            return None
        d = rng.choice(dims)
        out = shape[:d] + (shape[d] // 2,) + shape[d + 1:]
        ds = _dim_str(d, len(shape))
        if module:
            return _mod(f"nn.GLU(dim={ds})", out=out)(shape)
        return _I(f"{{x}} = F.glu({{x}}, dim={ds})", out)
    return make


_reg("torch.nn.GLU", _NN, "activation", _ND, _glu(True))
_reg("torch.nn.functional.glu", _F, "activation", _ND, _glu(False))


def _prelu(module: bool) -> MakeFn:
    def make(rng, shape):
        n = rng.choice((1, shape[1])) if shape[1] <= 4096 else 1
        if module:
            return _mod(f"nn.PReLU(num_parameters={n}, init={_rnd_float(rng, (0.1, 0.25))})")(shape)
        return _I("{x} = F.prelu({x}, self.{name}_weight)", shape,
                  init=_param("_weight", f"torch.rand({n}) * 0.5"))
    return make


_reg("torch.nn.PReLU", _NN, "activation", _ND, _prelu(True))
_reg("torch.nn.functional.prelu", _F, "activation", _ND, _prelu(False))

# --------------------------------------------------------------------------------------------------
# Elementwise unary math (torch / torch.special / Tensor methods), with domain fixes in the code
# --------------------------------------------------------------------------------------------------

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
        return _I(f"{{x}} = {expr}", shape)
    return make


for _name, _expr in _UNARY:
    _reg(_name, _T, "elementwise", _ANY, _const_expr(_expr))


def _clamp_bounds(rng: random.Random) -> str:
    return rng.choice(("min=-1.0, max=1.0", "min=-0.5, max=0.5", "min=0.0, max=6.0", "min=-2.0, max=0.25"))


_reg("torch.clamp", _T, "elementwise", _ANY,
     lambda rng, shape: _I(f"{{x}} = torch.clamp({{x}}, {_clamp_bounds(rng)})", shape))
_reg("torch.Tensor.clamp", _TT, "elementwise", _ANY,
     lambda rng, shape: _I(f"{{x}} = {{x}}.clamp({_clamp_bounds(rng)})", shape))
_reg("torch.clamp_min", _T, "elementwise", _ANY,
     lambda rng, shape: _I(f"{{x}} = torch.clamp_min({{x}}, {_rnd_float(rng, (-0.5, 0.0, 0.25))})", shape))
_reg("torch.clamp_max", _T, "elementwise", _ANY,
     lambda rng, shape: _I(f"{{x}} = torch.clamp_max({{x}}, {_rnd_float(rng, (-0.25, 0.0, 0.5))})", shape))

# --------------------------------------------------------------------------------------------------
# Binary elementwise: the second operand is an extra input, a parameter, or a literal
# --------------------------------------------------------------------------------------------------


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
        return _Operand(_rnd_float(rng, (0.5, 1.5, 2.0, 3.0) if positive else (-1.5, -0.5, 0.5, 2.0)))
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
        if _numel(shape[1:]) <= 1 << 20:
            options.append(shape[1:])
    pshape = rng.choice(options)
    ctor = f"torch.rand({_args(pshape)}) + 0.5" if positive else f"torch.randn({_args(pshape)})"
    return _Operand("self.{name}", init=(_param("", ctor),))


def _binary(template: str, kinds: Sequence[str] = ("input", "param", "scalar"), positive: bool = False) -> MakeFn:
    def make(rng, shape):
        a = _operand(rng, shape, kinds, positive)
        return _I("{x} = " + template.replace("{a}", a.expr), shape, init=a.init, extra=a.extra)
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
    _reg(_name, _T, "binary", _ANY, _binary(_tmpl, _kinds, _pos))


def _pow(rng, shape):
    if rng.random() < 0.6:
        return _I(f"{{x}} = torch.pow({{x}}.abs() + 1e-3, {_rnd_float(rng, (0.5, 1.5, 2.0, 3.0))})", shape)
    a = _operand(rng, shape, _TENSOR)
    return _I(f"{{x}} = torch.pow({{x}}.abs() + 1e-3, {a.expr}.clamp(-2.0, 2.0))", shape, init=a.init,
              extra=a.extra)


_reg("torch.pow", _T, "binary", _ANY, _pow)


def _where(rng, shape):
    other = _operand(rng, shape, ("input", "scalar"), index=1)
    return _I(f"{{x}} = torch.where({{y0}} > 0, {{x}}, {other.expr})", shape, extra=(shape, *other.extra))


_reg("torch.where", _T, "binary", _ANY, _where)
_reg("torch.Tensor.masked_fill", _TT, "binary", _ANY,
     lambda rng, shape: _I(f"{{x}} = {{x}}.masked_fill({{y0}} > {_rnd_float(rng, (0.0, 0.5, 1.0))}, "
                           f"{_rnd_float(rng, (0.0, -1.0))})", shape, extra=(shape,)))
_reg("torch.addcmul", _T, "binary", _ANY,
     lambda rng, shape: _I(f"{{x}} = torch.addcmul({{x}}, {{y0}}, {{y1}}, value={_rnd_float(rng, (0.1, 0.5, 1.0))})",
                           shape, extra=(shape, shape)))
_reg("torch.addcdiv", _T, "binary", _ANY,
     lambda rng, shape: _I(f"{{x}} = torch.addcdiv({{x}}, {{y0}}, {{y1}}.abs() + 1.0, "
                           f"value={_rnd_float(rng, (0.1, 0.5, 1.0))})", shape, extra=(shape, shape)))

# --------------------------------------------------------------------------------------------------
# Softmax family
# --------------------------------------------------------------------------------------------------


def _softmax(cls: str | None, fn: str | None) -> MakeFn:
    def make(rng, shape):
        dims = _nonbatch(shape, 2)
        if not dims:
            return None
        d = _dim_str(rng.choice(dims), len(shape))
        if cls:
            return _mod(f"nn.{cls}(dim={d})")(shape)
        return _I(f"{{x}} = F.{fn}({{x}}, dim={d})", shape)
    return make


for _cls, _fn in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Softmin", "softmin")):
    _reg(f"torch.nn.{_cls}", _NN, "softmax", _ND, _softmax(_cls, None))
    _reg(f"torch.nn.functional.{_fn}", _F, "softmax", _ND, _softmax(None, _fn))
_reg("torch.nn.Softmax2d", _NN, "softmax", (4,),
     lambda rng, shape: _mod("nn.Softmax2d()")(shape) if shape[1] >= 2 else None)

# --------------------------------------------------------------------------------------------------
# Reductions and scans over non-batch dims
# --------------------------------------------------------------------------------------------------


def _pick_dims(rng: random.Random, shape: Shape, multi: bool, min_size: int = 1, max_size: int | None = None
               ) -> tuple[int, ...] | None:
    dims = [d for d in _nonbatch(shape, min_size) if max_size is None or shape[d] <= max_size]
    if not dims:
        return None
    k = 2 if multi and len(dims) >= 2 and rng.random() < 0.35 else 1
    return tuple(sorted(rng.sample(dims, k)))


def _reduced(shape: Shape, dims: Sequence[int], keepdim: bool) -> Shape:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _reduction(template: str, multi: bool = True, keepdim: bool = True, min_size: int = 1,
               max_size: int | None = None) -> MakeFn:
    """`template` uses `{dim}` and `{keepdim}` (rendered `, keepdim=True` or nothing)."""
    def make(rng, shape):
        dims = _pick_dims(rng, shape, multi, min_size, max_size)
        if dims is None:
            return None
        keep = keepdim and rng.random() < 0.5
        code = template.replace("{dim}", _dims_arg(dims)).replace("{keepdim}", ", keepdim=True" if keep else "")
        return _I(f"{{x}} = {code}", _reduced(shape, dims, keep))
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
_SMALL_DIMS_START = _start_fixed((256, 16), (64, 32), (32, 8, 16), (16, 16, 16))
for _name, _tmpl, _kw in _REDUCTIONS:
    _reg(_name, _T, "reduction", _ND, _reduction(_tmpl, **_kw), _SMALL_DIMS_START if "max_size" in _kw else None)


def _kthvalue(rng, shape):
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    k = rng.randint(1, shape[d])
    keep = rng.random() < 0.5
    return _I(f"{{x}} = torch.kthvalue({{x}}, {k}, dim={d}{', keepdim=True' if keep else ''}).values",
              _reduced(shape, (d,), keep))


_reg("torch.kthvalue", _T, "reduction", _ND, _kthvalue)


def _topk(rng, shape):
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    k = rng.randint(1, min(shape[d], 64))
    largest = rng.choice(("", ", largest=False"))
    return _I(f"{{x}} = torch.topk({{x}}, {k}, dim={_dim_str(d, len(shape))}{largest}).values",
              shape[:d] + (k,) + shape[d + 1:])


_reg("torch.topk", _T, "reduction", _ND, _topk)


def _sort(rng, shape):
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    desc = rng.choice(("", ", descending=True"))
    return _I(f"{{x}} = torch.sort({{x}}, dim={_dim_str(d, len(shape))}{desc}).values", shape)


_reg("torch.sort", _T, "reduction", _ND, _sort)


def _matrix_norm(rng, shape):
    if shape[-1] < 2 or shape[-2] < 2:
        return None
    order = rng.choice(("'fro'", "1", "-1", "float('inf')"))
    return _I(f"{{x}} = torch.linalg.matrix_norm({{x}}, ord={order})", shape[:-2])


_reg("torch.linalg.matrix_norm", _T, "reduction", (3, 4, 5), _matrix_norm)


def _scan(template: str, min_size: int = 2, max_size: int | None = None, shrink: int = 0) -> MakeFn:
    def make(rng, shape):
        dims = [d for d in _nonbatch(shape, min_size) if max_size is None or shape[d] <= max_size]
        if not dims:
            return None
        d = rng.choice(dims)
        out = shape[:d] + (shape[d] - shrink,) + shape[d + 1:]
        return _I("{x} = " + template.replace("{dim}", _dim_str(d, len(shape))), out)
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
    _reg(_name, _T, "scan", _ND, _scan(_tmpl, **_kw), _SMALL_DIMS_START if "max_size" in _kw else None)

# --------------------------------------------------------------------------------------------------
# Linear, bilinear, matmul
# --------------------------------------------------------------------------------------------------

_FEATURES = (64, 128, 256, 512, 1024, 2048, 4096)


def _out_features(rng: random.Random, in_f: int, rows: int) -> int | None:
    ok = [f for f in _FEATURES if in_f * f <= 1 << 22 and rows * in_f * f <= _MAX_MACS and rows * f <= _MAX_SAMPLE]
    return rng.choice(ok) if ok else None


def _linear(module: bool) -> MakeFn:
    def make(rng, shape):
        k = shape[-1]
        rows = _numel(shape[1:-1])
        n = _out_features(rng, k, rows)
        if n is None or k > 16384:
            return None
        bias = rng.random() < 0.75
        out = shape[:-1] + (n,)
        if module:
            return _mod(f"nn.Linear({k}, {n}{'' if bias else ', bias=False'})", out=out)(shape)
        init = [_randn_param("_weight", (n, k), k)]
        if bias:
            init.append(_randn_param("_bias", (n,), k))
        b = ", self.{name}_bias" if bias else ""
        return _I(f"{{x}} = F.linear({{x}}, self.{{name}}_weight{b})", out, init=init)
    return make


_reg("torch.nn.Linear", _NN, "linear", _ND, _linear(True))
_reg("torch.nn.functional.linear", _F, "linear", _ND, _linear(False))


def _bilinear(module: bool) -> MakeFn:
    def make(rng, shape):
        in1 = shape[-1]
        if in1 > 1024:
            return None
        in2 = rng.choice((16, 32, 64))
        rows = _numel(shape[1:-1])
        outs = [o for o in (16, 32, 64, 128, 256) if in1 * in2 * o <= 1 << 20 and rows * in1 * in2 * o <= _MAX_MACS]
        if not outs:
            return None
        o = rng.choice(outs)
        extra = (shape[:-1] + (in2,),)
        out = shape[:-1] + (o,)
        if module:
            return _mod(f"nn.Bilinear({in1}, {in2}, {o})", "self.{name}({x}, {y0})", out=out, extra=extra)(shape)
        init = (_randn_param("_weight", (o, in1, in2), in1 * in2), _randn_param("_bias", (o,), in1))
        return _I("{x} = F.bilinear({x}, {y0}, self.{name}_weight, self.{name}_bias)", out, init=init, extra=extra)
    return make


_reg("torch.nn.Bilinear", _NN, "linear", _ND, _bilinear(True), _start_fixed((256,), (64, 128), (128,)))
_reg("torch.nn.functional.bilinear", _F, "linear", _ND, _bilinear(False), _start_fixed((256,), (64, 128), (128,)))


def _matmul(rng, shape):
    k = shape[-1]
    rows = _numel(shape[1:-1])
    if len(shape) >= 3 and rng.random() < 0.5:
        n = rng.choice((16, 32, 64, 128, 256))
        if rows * k * n > _MAX_MACS:
            return None
        return _I("{x} = torch.matmul({x}, {y0})", shape[:-1] + (n,), extra=(shape[:-2] + (k, n),))
    n = _out_features(rng, k, rows)
    if n is None:
        return None
    return _I("{x} = torch.matmul({x}, self.{name})", shape[:-1] + (n,), init=_randn_param("", (k, n), k))


_reg("torch.matmul", _T, "matmul", _ND, _matmul)


def _mm(rng, shape):
    n = _out_features(rng, shape[-1], 1)
    if n is None:
        return None
    return _I("{x} = torch.mm({x}, self.{name})", (shape[0], n), init=_randn_param("", (shape[-1], n), shape[-1]))


_reg("torch.mm", _T, "matmul", (2,), _mm)


def _addmm(rng, shape):
    k = shape[-1]
    n = _out_features(rng, k, 1)
    if n is None:
        return None
    init = (_randn_param("_bias", (n,), k), _randn_param("_weight", (k, n), k))
    beta = _rnd_float(rng, (0.5, 1.0))
    return _I(f"{{x}} = torch.addmm(self.{{name}}_bias, {{x}}, self.{{name}}_weight, beta={beta})", (shape[0], n),
              init=init)


_reg("torch.addmm", _T, "matmul", (2,), _addmm)


def _bmm(with_bias: bool) -> MakeFn:
    def make(rng, shape):
        _, m, k = shape
        n = rng.choice((16, 32, 64, 128, 256))
        if m * k * n > _MAX_MACS:
            return None
        out = (shape[0], m, n)
        if not with_bias:
            return _I("{x} = torch.bmm({x}, {y0})", out, extra=((shape[0], k, n),))
        return _I(f"{{x}} = torch.baddbmm(self.{{name}}, {{x}}, {{y0}}, alpha={_rnd_float(rng, (0.5, 1.0))})", out,
                  init=_randn_param("", (n,)), extra=((shape[0], k, n),))
    return make


_reg("torch.bmm", _T, "matmul", (3,), _bmm(False))
_reg("torch.baddbmm", _T, "matmul", (3,), _bmm(True))


def _einsum(rng, shape):
    r = len(shape)
    if r == 2:
        k = shape[1]
        n = _out_features(rng, k, 1)
        if n is None:
            return None
        return _I("{x} = torch.einsum('bi,ij->bj', {x}, self.{name})", (shape[0], n),
                  init=_randn_param("", (k, n), k))
    if r in (3, 4) and rng.random() < 0.5:
        n = rng.choice((16, 32, 64, 128))
        if _numel(shape[1:]) * n > _MAX_MACS:
            return None
        if r == 3:
            eq, extra = "bij,bjk->bik", (shape[0], shape[2], n)
        else:
            eq, extra = "bhij,bhjk->bhik", (shape[0], shape[1], shape[3], n)
        return _I(f"{{x}} = torch.einsum('{eq}', {{x}}, {{y0}})", shape[:-1] + (n,), extra=(extra,))
    # contract the channel dim (dim 1) with a weight, like a 1x1 convolution
    c = shape[1]
    o = rng.choice((8, 16, 32, 64, 128))
    if c > 4096 or _numel(shape[2:]) * c * o > _MAX_MACS:
        return None
    rest = "xyz"[: r - 2]
    return _I(f"{{x}} = torch.einsum('bc{rest},oc->bo{rest}', {{x}}, self.{{name}})", (shape[0], o) + shape[2:],
              init=_randn_param("", (o, c), c))


_reg("torch.einsum", _T, "matmul", _ND, _einsum)


def _tensordot(rng, shape):
    k = shape[-1]
    n = _out_features(rng, k, _numel(shape[1:-1]))
    if n is None:
        return None
    return _I(f"{{x}} = torch.tensordot({{x}}, self.{{name}}, dims=([{len(shape) - 1}], [0]))", shape[:-1] + (n,),
              init=_randn_param("", (k, n), k))


_reg("torch.tensordot", _T, "matmul", _ND, _tensordot)


def _cdist(rng, shape):
    _, p, m = shape
    r = rng.choice((16, 32, 64, 128))
    if p * r * m > _MAX_MACS:
        return None
    norm = rng.choice(("2.0", "1.0"))
    return _I(f"{{x}} = torch.cdist({{x}}, {{y0}}, p={norm})", (shape[0], p, r), extra=((shape[0], r, m),))


_reg("torch.cdist", _T, "matmul", (3,), _cdist)


def _cross(rng, shape):
    dims = [d for d in range(1, len(shape)) if shape[d] == 3]
    if not dims:
        return None
    d = rng.choice(dims)
    return _I(f"{{x}} = torch.linalg.cross({{x}}, {{y0}}, dim={_dim_str(d, len(shape))})", shape, extra=(shape,))


_reg("torch.linalg.cross", _T, "binary", _ND, _cross, _start_fixed((4096, 3), (3, 32, 32), (64, 3)))

# --------------------------------------------------------------------------------------------------
# Convolutions (modules and functional forms with explicit parameters)
# --------------------------------------------------------------------------------------------------

_CONV_START = {
    1: _start_fixed((16, 256), (32, 128), (64, 64), (3, 512)),
    2: _start_fixed((3, 32, 32), (16, 32, 32), (32, 16, 16), (8, 64, 64)),
    3: _start_fixed((3, 8, 16, 16), (8, 8, 16, 16), (16, 8, 8, 8)),
}


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _convt_out(size: int, k: int, s: int, p: int, d: int, op: int) -> int:
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def _conv(nd: int, transposed: bool, module: bool) -> MakeFn:
    def make(rng, shape):
        c, spatial = shape[1], shape[2:]
        if c > 512:
            return None
        ks = [k for k in ((1, 3, 5) if nd < 3 else (1, 3)) if k <= min(spatial) or transposed]
        k = rng.choice(ks)
        s = rng.choice((1, 1, 2))
        p = rng.choice((0, k // 2))
        d = 2 if (k > 1 and rng.random() < 0.2) else 1
        groups = 1
        outs = [o for o in (8, 16, 32, 64, 128, 256)]
        o = rng.choice(outs)
        if rng.random() < 0.25:
            g = rng.choice([g for g in (2, 4, 8) if c % g == 0 and o % g == 0] or [1])
            groups = g
        if rng.random() < 0.1 and c <= 256:  # depthwise
            groups, o = c, c
        op = 0
        if transposed:
            op = rng.choice((0, s - 1)) if s > 1 else 0
            out_sp = tuple(_convt_out(n, k, s, p, d, op) for n in spatial)
        else:
            out_sp = tuple(_conv_out(n, k, s, p, d) for n in spatial)
        if min(out_sp) < 1:
            return None
        out = (shape[0], o) + out_sp
        macs = _numel(out[1:]) * (c // groups) * k ** nd
        if macs > _MAX_MACS:
            return None
        kw = [f"kernel_size={k}"]
        if s != 1:
            kw.append(f"stride={s}")
        if p:
            kw.append(f"padding={p}")
        if op:
            kw.append(f"output_padding={op}")
        if groups != 1:
            kw.append(f"groups={groups}")
        if d != 1:
            kw.append(f"dilation={d}")
        bias = rng.random() < 0.8
        cls = f"ConvTranspose{nd}d" if transposed else f"Conv{nd}d"
        if module:
            args = ", ".join([str(c), str(o)] + kw + ([] if bias else ["bias=False"]))
            return _mod(f"nn.{cls}({args})", out=out)(shape)
        wshape = (c, o // groups) + (k,) * nd if transposed else (o, c // groups) + (k,) * nd
        fan_in = (c // groups) * k ** nd
        init = [_randn_param("_weight", wshape, fan_in)]
        if bias:
            init.append(_randn_param("_bias", (o,), fan_in))
        fkw = ", ".join(x for x in kw[1:])
        fn = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
        b = "self.{name}_bias" if bias else "None"
        return _I(f"{{x}} = F.{fn}({{x}}, self.{{name}}_weight, {b}{', ' + fkw if fkw else ''})", out, init=init)
    return make


for _nd in (1, 2, 3):
    for _tr in (False, True):
        _cls = f"ConvTranspose{_nd}d" if _tr else f"Conv{_nd}d"
        _fn = f"conv_transpose{_nd}d" if _tr else f"conv{_nd}d"
        _reg(f"torch.nn.{_cls}", _NN, "conv", (_nd + 2,), _conv(_nd, _tr, True), _CONV_START[_nd])
        _reg(f"torch.nn.functional.{_fn}", _F, "conv", (_nd + 2,), _conv(_nd, _tr, False), _CONV_START[_nd])


def _conv_tbc(rng, shape):
    _, t, c = shape
    k = rng.choice([k for k in (1, 3, 5) if k <= t + 2] or [1])
    pad = k // 2
    o = rng.choice((16, 32, 64, 128))
    tout = t + 2 * pad - k + 1
    if c > 1024 or tout < 1 or tout * c * o * k > _MAX_MACS:
        return None
    init = (_randn_param("_weight", (k, c, o), k * c), _randn_param("_bias", (o,), k * c))
    return _I("{x} = F.conv_tbc({x}.transpose(0, 1).contiguous(), self.{name}_weight, self.{name}_bias, "
              f"pad={pad})"
              ".transpose(0, 1)", (shape[0], tout, o), init=init)


_reg("torch.nn.functional.conv_tbc", _F, "conv", (3,), _conv_tbc, _start_fixed((128, 64), (256, 32)))

# --------------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------------

_POOL_START = {
    1: _start_fixed((16, 256), (32, 128), (64, 512)),
    2: _start_fixed((16, 32, 32), (8, 64, 64), (32, 16, 16), (3, 64, 64)),
    3: _start_fixed((8, 16, 16, 16), (4, 16, 32, 32), (16, 8, 8, 8)),
}


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
            return _mod(f"nn.{cls}({', '.join(kw)})", out=out)(shape)
        fn = {"max": "max_pool", "avg": "avg_pool", "lp": "lp_pool"}[kind] + f"{nd}d"
        return _I(f"{{x}} = F.{fn}({{x}}, {', '.join(kw)})", out)
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
        size = str(out_sp[0]) if len(set(out_sp)) == 1 else _tuple(out_sp)
        cls = f"Adaptive{'Max' if kind == 'max' else 'Avg'}Pool{nd}d"
        out = shape[:2] + out_sp
        if module:
            return _mod(f"nn.{cls}({size})", out=out)(shape)
        return _I(f"{{x}} = F.adaptive_{kind}_pool{nd}d({{x}}, {size})", out)
    return make


for _nd in (1, 2, 3):
    for _kind in ("max", "avg", "lp"):
        _cls = {"max": "MaxPool", "avg": "AvgPool", "lp": "LPPool"}[_kind] + f"{_nd}d"
        _fn = {"max": "max_pool", "avg": "avg_pool", "lp": "lp_pool"}[_kind] + f"{_nd}d"
        _reg(f"torch.nn.{_cls}", _NN, "pool", (_nd + 2,), _pool(_kind, _nd, True), _POOL_START[_nd])
        _reg(f"torch.nn.functional.{_fn}", _F, "pool", (_nd + 2,), _pool(_kind, _nd, False), _POOL_START[_nd])
    for _kind in ("max", "avg"):
        _cls = f"Adaptive{'Max' if _kind == 'max' else 'Avg'}Pool{_nd}d"
        _reg(f"torch.nn.{_cls}", _NN, "pool", (_nd + 2,), _adaptive(_kind, _nd, True), _POOL_START[_nd])
        _reg(f"torch.nn.functional.adaptive_{_kind}_pool{_nd}d", _F, "pool", (_nd + 2,),
             _adaptive(_kind, _nd, False), _POOL_START[_nd])


def _unpool(nd: int, module: bool) -> MakeFn:
    """Max-unpooling fed by the indices of the max-pooling just before it (stride = kernel), back to the
    input's size: the maxima stay in place, everything else becomes zero."""
    def make(rng, shape):
        spatial = shape[2:]
        ks = [k for k in (2, 3) if k <= min(spatial)]
        if not ks:
            return None
        k = rng.choice(ks)
        size = _tuple(spatial)
        if module:
            init = (f"self.{{name}}_pool = nn.MaxPool{nd}d({k}, return_indices=True)",
                    f"self.{{name}} = nn.MaxUnpool{nd}d({k})")
            fwd = ("{x}, {name}_idx = self.{name}_pool({x})",
                   f"{{x}} = self.{{name}}({{x}}, {{name}}_idx, output_size={size})")
            return _I(fwd, shape, init=init)
        fwd = (f"{{x}}, {{name}}_idx = F.max_pool{nd}d({{x}}, {k}, return_indices=True)",
               f"{{x}} = F.max_unpool{nd}d({{x}}, {{name}}_idx, {k}, output_size={size})")
        return _I(fwd, shape)
    return make


for _nd in (1, 2, 3):
    _reg(f"torch.nn.MaxUnpool{_nd}d", _NN, "pool", (_nd + 2,), _unpool(_nd, True), _POOL_START[_nd])
    _reg(f"torch.nn.functional.max_unpool{_nd}d", _F, "pool", (_nd + 2,), _unpool(_nd, False), _POOL_START[_nd])

# --------------------------------------------------------------------------------------------------
# Normalisation (per-sample statistics only)
# --------------------------------------------------------------------------------------------------


def _eps(rng: random.Random) -> str:
    return rng.choice(("1e-5", "1e-6", "1e-3"))


def _trailing(rng: random.Random, shape: Shape) -> Shape | None:
    """Trailing non-batch dims to normalise over (>= 2 elements, <= 1M)."""
    options = []
    for k in range(1, min(2, len(shape) - 1) + 1):
        ns = shape[-k:]
        if 2 <= _numel(ns) <= 1 << 20:
            options.append(ns)
    return rng.choice(options) if options else None


def _layer_norm(module: bool) -> MakeFn:
    def make(rng, shape):
        ns = _trailing(rng, shape)
        if ns is None:
            return None
        nsl = str(ns[0]) if len(ns) == 1 else _tuple(ns)
        eps = _eps(rng)
        if module:
            affine = rng.choice(("", ", elementwise_affine=False", ", bias=False"))
            return _mod(f"nn.LayerNorm({nsl}, eps={eps}{affine})")(shape)
        init = (_param("_weight", f"1.0 + 0.1 * torch.randn({_args(ns)})"),
                _param("_bias", f"0.1 * torch.randn({_args(ns)})"))
        return _I(f"{{x}} = F.layer_norm({{x}}, {_tuple(ns)}, self.{{name}}_weight, self.{{name}}_bias, eps={eps})",
                  shape, init=init)
    return make


_reg("torch.nn.LayerNorm", _NN, "norm", _ND, _layer_norm(True))
_reg("torch.nn.functional.layer_norm", _F, "norm", _ND, _layer_norm(False))


def _rms_norm(module: bool) -> MakeFn:
    def make(rng, shape):
        ns = _trailing(rng, shape)
        if ns is None:
            return None
        nsl = str(ns[0]) if len(ns) == 1 else _tuple(ns)
        eps = _eps(rng)
        if module:
            affine = rng.choice(("", ", elementwise_affine=False"))
            return _mod(f"nn.RMSNorm({nsl}, eps={eps}{affine})")(shape)
        init = _param("_weight", f"1.0 + 0.1 * torch.randn({_args(ns)})")
        return _I(f"{{x}} = F.rms_norm({{x}}, {_tuple(ns)}, self.{{name}}_weight, eps={eps})", shape, init=init)
    return make


_reg("torch.nn.RMSNorm", _NN, "norm", _ND, _rms_norm(True))
_reg("torch.nn.functional.rms_norm", _F, "norm", _ND, _rms_norm(False))


def _group_norm(module: bool) -> MakeFn:
    def make(rng, shape):
        c, rest = shape[1], _numel(shape[2:])
        gs = [g for g in _divisors(c, (1, 2, 4, 8, 16, 32)) if (c // g) * rest >= 2]
        if not gs or c > 4096:
            return None
        g = rng.choice(gs)
        eps = _eps(rng)
        if module:
            affine = rng.choice(("", ", affine=False"))
            return _mod(f"nn.GroupNorm({g}, {c}, eps={eps}{affine})")(shape)
        init = (_param("_weight", f"1.0 + 0.1 * torch.randn({c})"), _param("_bias", f"0.1 * torch.randn({c})"))
        return _I(f"{{x}} = F.group_norm({{x}}, {g}, self.{{name}}_weight, self.{{name}}_bias, eps={eps})", shape,
                  init=init)
    return make


_reg("torch.nn.GroupNorm", _NN, "norm", _ND, _group_norm(True))
_reg("torch.nn.functional.group_norm", _F, "norm", _ND, _group_norm(False))


def _instance_norm(nd: int | None) -> MakeFn:
    def make(rng, shape):
        c = shape[1]
        if _numel(shape[2:]) < 2 or c > 4096:
            return None
        eps = _eps(rng)
        if nd is not None:
            affine = rng.choice(("", ", affine=True"))
            return _mod(f"nn.InstanceNorm{nd}d({c}, eps={eps}{affine})")(shape)
        init = (_param("_weight", f"1.0 + 0.1 * torch.randn({c})"), _param("_bias", f"0.1 * torch.randn({c})"))
        return _I(f"{{x}} = F.instance_norm({{x}}, weight=self.{{name}}_weight, bias=self.{{name}}_bias, eps={eps})",
                  shape, init=init)
    return make


for _nd in (1, 2, 3):
    _reg(f"torch.nn.InstanceNorm{_nd}d", _NN, "norm", (_nd + 2,), _instance_norm(_nd))
_reg("torch.nn.functional.instance_norm", _F, "norm", (3, 4, 5), _instance_norm(None))


def _lrn(kind: str) -> MakeFn:
    def make(rng, shape):
        if shape[1] < 2:
            return None
        size = rng.choice((2, 3, 5))
        args = f"{size}, alpha={_rnd_float(rng, (1e-4, 1e-3))}, beta=0.75, k={_rnd_float(rng, (1.0, 2.0))}"
        if kind == "module":
            return _mod(f"nn.LocalResponseNorm({args})")(shape)
        if kind == "crossmap":
            return _mod(f"nn.CrossMapLRN2d({args})")(shape)
        return _I(f"{{x}} = F.local_response_norm({{x}}, {args})", shape)
    return make


_reg("torch.nn.LocalResponseNorm", _NN, "norm", (3, 4, 5), _lrn("module"))
_reg("torch.nn.functional.local_response_norm", _F, "norm", (3, 4, 5), _lrn("functional"))
_reg("torch.nn.CrossMapLRN2d", _NN, "norm", (4,), _lrn("crossmap"))


def _normalize(rng, shape):
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = _dim_str(rng.choice(dims), len(shape))
    p = rng.choice(("2.0", "1.0"))
    return _I(f"{{x}} = F.normalize({{x}}, p={p}, dim={d})", shape)


_reg("torch.nn.functional.normalize", _F, "norm", _ND, _normalize)


def _batch_norm_inference(rng, shape):
    c = shape[1]
    if c > 4096:
        return None
    init = (f'self.register_buffer("{{name}}_mean", 0.1 * torch.randn({c}))',
            f'self.register_buffer("{{name}}_var", torch.rand({c}) + 0.5)',
            _param("_weight", f"1.0 + 0.1 * torch.randn({c})"),
            _param("_bias", f"0.1 * torch.randn({c})"))
    return _I("{x} = F.batch_norm({x}, self.{name}_mean, self.{name}_var, self.{name}_weight, self.{name}_bias, "
              f"training=False, eps={_eps(rng)})", shape, init=init)


_reg("torch.nn.functional.batch_norm", _F, "norm", _ND, _batch_norm_inference)


def _renorm(rng, shape):
    return _I(f"{{x}} = torch.renorm({{x}}, p=2, dim=0, maxnorm={_rnd_float(rng, (0.5, 1.0, 5.0))})", shape)


_reg("torch.renorm", _T, "norm", _ND, _renorm)

# --------------------------------------------------------------------------------------------------
# Distances and similarities (extra input)
# --------------------------------------------------------------------------------------------------


def _cosine(module: bool) -> MakeFn:
    def make(rng, shape):
        dims = _nonbatch(shape, 2)
        if not dims:
            return None
        d = rng.choice(dims)
        ds = _dim_str(d, len(shape))
        out = _reduced(shape, (d,), False)
        if module:
            return _mod(f"nn.CosineSimilarity(dim={ds})", "self.{name}({x}, {y0})", out=out, extra=(shape,))(shape)
        return _I(f"{{x}} = F.cosine_similarity({{x}}, {{y0}}, dim={ds})", out, extra=(shape,))
    return make


def _pairwise(module: bool) -> MakeFn:
    def make(rng, shape):
        p = rng.choice(("2.0", "1.0"))
        keep = rng.random() < 0.3
        out = shape[:-1] + ((1,) if keep else ())
        kd = ", keepdim=True" if keep else ""
        if module:
            return _mod(f"nn.PairwiseDistance(p={p}{kd})", "self.{name}({x}, {y0})", out=out, extra=(shape,))(shape)
        return _I(f"{{x}} = F.pairwise_distance({{x}}, {{y0}}, p={p}{kd})", out, extra=(shape,))
    return make


_reg("torch.nn.CosineSimilarity", _NN, "distance", _ND, _cosine(True))
_reg("torch.nn.functional.cosine_similarity", _F, "distance", _ND, _cosine(False))
_reg("torch.nn.PairwiseDistance", _NN, "distance", _ND, _pairwise(True))
_reg("torch.nn.functional.pairwise_distance", _F, "distance", _ND, _pairwise(False))

# --------------------------------------------------------------------------------------------------
# Losses with reduction='none' (targets are extra inputs, mapped into the valid target domain)
# --------------------------------------------------------------------------------------------------


def _loss(cls: str, fn: str, ctor_args: str, call: str, ranks: Iterable[int],
          out: Callable[[Shape], Shape] = lambda s: s,
          extras: Callable[[Shape], tuple[Shape, ...]] = lambda s: (s,),
          accepts: Callable[[Shape], bool] = lambda s: True) -> None:
    """`call` is the argument list, e.g. `torch.sigmoid({x}), {y0}`."""
    args = f"{ctor_args}, reduction='none'" if ctor_args else "reduction='none'"

    def module(rng, shape):
        if not accepts(shape):
            return None
        return _I(f"{{x}} = self.{{name}}({call})", out(shape), init=f"self.{{name}} = nn.{cls}({args})",
                  extra=extras(shape))

    def functional(rng, shape):
        if not accepts(shape):
            return None
        return _I(f"{{x}} = F.{fn}({call}, {args})", out(shape), extra=extras(shape))

    _reg(f"torch.nn.{cls}", _NN, "loss", ranks, module)
    _reg(f"torch.nn.functional.{fn}", _F, "loss", ranks, functional)


_loss("MSELoss", "mse_loss", "", "{x}, {y0}", _ANY)
_loss("L1Loss", "l1_loss", "", "{x}, {y0}", _ANY)
_loss("SmoothL1Loss", "smooth_l1_loss", "beta=0.5", "{x}, {y0}", _ANY)
_loss("HuberLoss", "huber_loss", "delta=1.0", "{x}, {y0}", _ANY)
_loss("SoftMarginLoss", "soft_margin_loss", "", "{x}, torch.sign({y0})", _ANY)
_loss("BCELoss", "binary_cross_entropy", "", "torch.sigmoid({x}), torch.sigmoid({y0})", _ANY)
_loss("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", "", "{x}, torch.sigmoid({y0})", _ANY)
_loss("KLDivLoss", "kl_div", "", "{x}, torch.sigmoid({y0})", _ANY)
_loss("PoissonNLLLoss", "poisson_nll_loss", "log_input=True", "{x}.clamp(max=20.0), {y0}.abs()", _ANY)
_loss("GaussianNLLLoss", "gaussian_nll_loss", "eps=1e-6", "{x}, {y0}, {y1}.abs() + 0.1", _ANY,
      extras=lambda s: (s, s))
_loss("HingeEmbeddingLoss", "hinge_embedding_loss", "margin=1.0", "{x}, torch.sign({y0})", _ANY)
_loss("MarginRankingLoss", "margin_ranking_loss", "margin=0.1", "{x}, {y0}, torch.sign({y1})", _ANY,
      extras=lambda s: (s, s))
_loss("CrossEntropyLoss", "cross_entropy", "label_smoothing=0.1", "{x}, F.softmax({y0}, dim=1)", _ND,
      out=lambda s: s[:1] + s[2:], accepts=lambda s: s[1] >= 2)
_loss("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", "", "{x}, torch.sigmoid({y0})", (2,),
      out=lambda s: s[:1])
_loss("CosineEmbeddingLoss", "cosine_embedding_loss", "margin=-0.5", "{x}, {y0}, torch.sign({y1})", (2,),
      out=lambda s: s[:1], extras=lambda s: (s, s[:1]))
_loss("TripletMarginLoss", "triplet_margin_loss", "margin=2.0, p=2.0", "{x}, {y0}, {y1}", (2,),
      out=lambda s: s[:1], extras=lambda s: (s, s))
_loss("TripletMarginWithDistanceLoss", "triplet_margin_with_distance_loss", "margin=2.0", "{x}, {y0}, {y1}", (2,),
      out=lambda s: s[:1], extras=lambda s: (s, s))

# --------------------------------------------------------------------------------------------------
# Shape ops (dim 0 kept)
# --------------------------------------------------------------------------------------------------


def _transpose(rng, shape):
    if len(shape) < 3:
        return None
    a, b = sorted(rng.sample(range(1, len(shape)), 2))
    out = list(shape)
    out[a], out[b] = out[b], out[a]
    return _I(f"{{x}} = torch.transpose({{x}}, {a}, {b})", tuple(out))


def _permute(rng, shape):
    if len(shape) < 3:
        return None
    rest = list(range(1, len(shape)))
    perm = rest[:]
    while perm == rest:
        rng.shuffle(perm)
    order = (0, *perm)
    return _I(f"{{x}} = {{x}}.permute{_tuple(order)}", tuple(shape[i] for i in order))


def _movedim(rng, shape):
    if len(shape) < 3:
        return None
    a, b = rng.sample(range(1, len(shape)), 2)
    dims = [d for d in range(len(shape)) if d != a]
    dims.insert(b, a)
    return _I(f"{{x}} = torch.movedim({{x}}, {a}, {b})", tuple(shape[d] for d in dims))


def _flatten(kind: str) -> MakeFn:
    def make(rng, shape):
        r = len(shape)
        if r < 3:
            return None
        s = rng.randint(1, r - 2)
        e = rng.randint(s + 1, r - 1)
        out = shape[:s] + (_numel(shape[s:e + 1]),) + shape[e + 1:]
        es = _dim_str(e, r)
        if kind == "module":
            return _mod(f"nn.Flatten(start_dim={s}, end_dim={es})", out=out)(shape)
        if kind == "tensor":
            return _I(f"{{x}} = {{x}}.flatten({s}, {es})", out)
        return _I(f"{{x}} = torch.flatten({{x}}, start_dim={s}, end_dim={es})", out)
    return make


def _factors(n: int) -> list[int]:
    return [f for f in range(2, math.isqrt(n) + 1) if n % f == 0]


def _split(rng: random.Random, n: int) -> tuple[int, int]:
    f = rng.choice(_factors(n))
    return (f, n // f) if rng.random() < 0.5 else (n // f, f)


def _regroup(rng: random.Random, shape: Shape) -> Shape | None:
    """A new per-sample shape with the same element count: split one dim or merge two adjacent ones."""
    rest = list(shape[1:])
    splittable = [i for i, n in enumerate(rest) if _factors(n)] if len(shape) < _MAX_RANK else []
    if splittable and (len(rest) < 2 or rng.random() < 0.5):
        i = rng.choice(splittable)
        return (shape[0], *rest[:i], *_split(rng, rest[i]), *rest[i + 1:])
    if len(rest) >= 2:
        i = rng.randrange(len(rest) - 1)
        return (shape[0], *rest[:i], rest[i] * rest[i + 1], *rest[i + 2:])
    return None


def _reshape(kind: str) -> MakeFn:
    def make(rng, shape):
        out = _regroup(rng, shape)
        if out is None:
            return None
        dims = _args(out[1:])
        if kind == "view":
            return _I(f"{{x}} = {{x}}.contiguous().view({{x}}.size(0), {dims})", out)
        if kind == "tensor":
            return _I(f"{{x}} = {{x}}.reshape({{x}}.size(0), {dims})", out)
        return _I(f"{{x}} = torch.reshape({{x}}, ({{x}}.size(0), {dims}))", out)
    return make


def _unflatten(rng, shape):
    if len(shape) >= _MAX_RANK:
        return None
    dims = [d for d in range(1, len(shape)) if _factors(shape[d])]
    if not dims:
        return None
    d = rng.choice(dims)
    sizes = _split(rng, shape[d])
    return _mod(f"nn.Unflatten({d}, {_tuple(sizes)})", out=shape[:d] + sizes + shape[d + 1:])(shape)


_reg("torch.transpose", _T, "shape", (3, 4, 5), _transpose)
_reg("torch.Tensor.permute", _TT, "shape", (3, 4, 5), _permute)
_reg("torch.movedim", _T, "shape", (3, 4, 5), _movedim)
_reg("torch.flatten", _T, "shape", (3, 4, 5), _flatten("torch"))
_reg("torch.Tensor.flatten", _TT, "shape", (3, 4, 5), _flatten("tensor"))
_reg("torch.nn.Flatten", _NN, "shape", (3, 4, 5), _flatten("module"))
_reg("torch.reshape", _T, "shape", _ND, _reshape("torch"))
_reg("torch.Tensor.reshape", _TT, "shape", _ND, _reshape("tensor"))
_reg("torch.Tensor.view", _TT, "shape", _ND, _reshape("view"))
_reg("torch.nn.Unflatten", _NN, "shape", (2, 3, 4), _unflatten)


def _unsqueeze(rng, shape):
    if len(shape) >= _MAX_RANK:
        return None
    d = rng.randint(1, len(shape))
    return _I(f"{{x}} = torch.unsqueeze({{x}}, {d})", shape[:d] + (1,) + shape[d:])


def _squeeze(rng, shape):
    dims = [d for d in range(1, len(shape)) if shape[d] == 1]
    if not dims:
        return None
    d = rng.choice(dims)
    return _I(f"{{x}} = torch.squeeze({{x}}, {d})", shape[:d] + shape[d + 1:])


def _squeeze_start(rng):
    b = rng.choice(_BATCHES)
    return rng.choice(((b, 64, 1, 256), (b, 1, 1024), (b, 16, 32, 1)))


_reg("torch.unsqueeze", _T, "shape", (1, 2, 3, 4), _unsqueeze)
_reg("torch.squeeze", _T, "shape", (3, 4, 5), _squeeze, _squeeze_start)


def _expand(rng, shape):
    if len(shape) >= _MAX_RANK:
        return None
    d = rng.randint(1, len(shape))
    n = rng.choice((2, 3, 4))
    out = shape[:d] + (n,) + shape[d:]
    sizes = ", ".join(str(n) if i == d else "-1" for i in range(len(out)))
    return _I(f"{{x}} = {{x}}.unsqueeze({d}).expand({sizes})", out)


_reg("torch.Tensor.expand", _TT, "shape", (1, 2, 3, 4), _expand)


def _roll(rng, shape):
    dims = _pick_dims(rng, shape, True, 2)
    if dims is None:
        return None
    shifts = tuple(rng.randint(1, shape[d] - 1) for d in dims)
    return _I(f"{{x}} = torch.roll({{x}}, shifts={_dims_arg(shifts)}, dims={_dims_arg(dims)})", shape)


def _flip(rng, shape):
    dims = _pick_dims(rng, shape, True, 2)
    if dims is None:
        return None
    return _I(f"{{x}} = torch.flip({{x}}, dims={_tuple(dims)})", shape)


def _rot90(rng, shape):
    if len(shape) < 3:
        return None
    a, b = sorted(rng.sample(range(1, len(shape)), 2))
    k = rng.choice((1, 2, 3))
    out = list(shape)
    if k % 2:
        out[a], out[b] = out[b], out[a]
    return _I(f"{{x}} = torch.rot90({{x}}, {k}, dims=({a}, {b}))", tuple(out))


def _tri(fn: str) -> MakeFn:
    def make(rng, shape):
        if min(shape[-2:]) < 2:
            return None
        return _I(f"{{x}} = torch.{fn}({{x}}, diagonal={rng.choice((0, 0, 1, -1))})", shape)
    return make


def _diagonal(rng, shape):
    off = rng.choice((0, 0, 1))
    n = min(shape[-2], shape[-1] - off)
    if n < 1:
        return None
    return _I(f"{{x}} = torch.diagonal({{x}}, offset={off}, dim1=-2, dim2=-1)", shape[:-2] + (n,))


def _diag_embed(rng, shape):
    n = shape[-1]
    if len(shape) >= _MAX_RANK or n > 256:
        return None
    return _I("{x} = torch.diag_embed({x})", shape + (n,))


_reg("torch.roll", _T, "shape", _ND, _roll)
_reg("torch.flip", _T, "shape", _ND, _flip)
_reg("torch.rot90", _T, "shape", (3, 4, 5), _rot90)
_reg("torch.tril", _T, "shape", (3, 4, 5), _tri("tril"))
_reg("torch.triu", _T, "shape", (3, 4, 5), _tri("triu"))
_reg("torch.diagonal", _T, "shape", (3, 4, 5), _diagonal)
_reg("torch.diag_embed", _T, "shape", (2, 3, 4), _diag_embed, _start_fixed((64,), (16, 32), (128,)))


def _repeat(kind: str) -> MakeFn:
    def make(rng, shape):
        d = rng.choice(range(1, len(shape)))
        n = rng.choice((2, 3))
        out = shape[:d] + (shape[d] * n,) + shape[d + 1:]
        reps = tuple(n if i == d else 1 for i in range(len(shape)))
        if kind == "repeat":
            return _I(f"{{x}} = {{x}}.repeat{_tuple(reps)}", out)
        if kind == "tile":
            return _I(f"{{x}} = torch.tile({{x}}, {_tuple(reps)})", out)
        return _I(f"{{x}} = torch.repeat_interleave({{x}}, {n}, dim={d})", out)
    return make


_reg("torch.Tensor.repeat", _TT, "shape", _ND, _repeat("repeat"))
_reg("torch.tile", _T, "shape", _ND, _repeat("tile"))
_reg("torch.repeat_interleave", _T, "shape", _ND, _repeat("interleave"))


def _narrow(rng, shape):
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    length = rng.randint(1, shape[d] - 1)
    start = rng.randint(0, shape[d] - length)
    return _I(f"{{x}} = torch.narrow({{x}}, {d}, {start}, {length})", shape[:d] + (length,) + shape[d + 1:])


def _chunk(rng, shape):
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    n = rng.choice((2, 3, 4))
    size = -(-shape[d] // n)
    count = -(-shape[d] // size)
    i = rng.randrange(count)
    length = min(size, shape[d] - i * size)
    return _I(f"{{x}} = torch.chunk({{x}}, {n}, dim={d})[{i}]", shape[:d] + (length,) + shape[d + 1:])


def _cat(rng, shape):
    d = rng.choice(range(1, len(shape)))
    m = rng.choice((shape[d], max(1, shape[d] // 2), 16))
    other = shape[:d] + (m,) + shape[d + 1:]
    order = "{x}, {y0}" if rng.random() < 0.5 else "{y0}, {x}"
    return _I(f"{{x}} = torch.cat([{order}], dim={d})", shape[:d] + (shape[d] + m,) + shape[d + 1:], extra=(other,))


def _stack(rng, shape):
    if len(shape) >= _MAX_RANK:
        return None
    d = rng.randint(1, len(shape))
    return _I(f"{{x}} = torch.stack([{{x}}, {{y0}}], dim={d})", shape[:d] + (2,) + shape[d:], extra=(shape,))


_reg("torch.narrow", _T, "shape", _ND, _narrow)
_reg("torch.chunk", _T, "shape", _ND, _chunk)
_reg("torch.cat", _T, "shape", _ND, _cat)
_reg("torch.stack", _T, "shape", (1, 2, 3, 4), _stack)


def _tensor_unfold(rng, shape):
    if len(shape) >= _MAX_RANK:
        return None
    dims = _nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    size = rng.choice([s for s in (2, 3, 4, 8) if s <= shape[d]])
    step = rng.choice((1, size))
    n = (shape[d] - size) // step + 1
    return _I(f"{{x}} = {{x}}.unfold({d}, {size}, {step})", shape[:d] + (n,) + shape[d + 1:] + (size,))


_reg("torch.Tensor.unfold", _TT, "shape", (2, 3, 4), _tensor_unfold)


def _pixel_shuffle(module: bool) -> MakeFn:
    def make(rng, shape):
        rs = [r for r in (2, 3, 4) if shape[1] % (r * r) == 0]
        if not rs:
            return None
        r = rng.choice(rs)
        out = (shape[0], shape[1] // (r * r), shape[2] * r, shape[3] * r)
        if module:
            return _mod(f"nn.PixelShuffle({r})", out=out)(shape)
        return _I(f"{{x}} = F.pixel_shuffle({{x}}, {r})", out)
    return make


def _pixel_unshuffle(module: bool) -> MakeFn:
    def make(rng, shape):
        rs = [r for r in (2, 3, 4) if shape[2] % r == 0 and shape[3] % r == 0]
        if not rs:
            return None
        r = rng.choice(rs)
        out = (shape[0], shape[1] * r * r, shape[2] // r, shape[3] // r)
        if module:
            return _mod(f"nn.PixelUnshuffle({r})", out=out)(shape)
        return _I(f"{{x}} = F.pixel_unshuffle({{x}}, {r})", out)
    return make


def _channel_shuffle(module: bool) -> MakeFn:
    def make(rng, shape):
        gs = [g for g in (2, 3, 4, 8) if shape[1] % g == 0 and g < shape[1]]
        if not gs:
            return None
        g = rng.choice(gs)
        if module:
            return _mod(f"nn.ChannelShuffle({g})")(shape)
        return _I(f"{{x}} = F.channel_shuffle({{x}}, {g})", shape)
    return make


_PS_START = _start_fixed((16, 16, 16), (32, 16, 16), (64, 8, 8), (36, 12, 12))
_reg("torch.nn.PixelShuffle", _NN, "shape", (4,), _pixel_shuffle(True), _PS_START)
_reg("torch.nn.functional.pixel_shuffle", _F, "shape", (4,), _pixel_shuffle(False), _PS_START)
_reg("torch.nn.PixelUnshuffle", _NN, "shape", (4,), _pixel_unshuffle(True))
_reg("torch.nn.functional.pixel_unshuffle", _F, "shape", (4,), _pixel_unshuffle(False))
_reg("torch.nn.ChannelShuffle", _NN, "shape", (3, 4, 5), _channel_shuffle(True))
_reg("torch.nn.functional.channel_shuffle", _F, "shape", (3, 4, 5), _channel_shuffle(False))


def _unfold(module: bool) -> MakeFn:
    def make(rng, shape):
        _, c, h, w = shape
        ks = [k for k in (2, 3) if k <= min(h, w)]
        if not ks:
            return None
        k = rng.choice(ks)
        s = rng.choice((1, k))
        p = rng.choice((0, k // 2)) if s == 1 else 0
        oh, ow = _conv_out(h, k, s, p, 1), _conv_out(w, k, s, p, 1)
        out = (shape[0], c * k * k, oh * ow)
        args = f"kernel_size={k}, stride={s}" + (f", padding={p}" if p else "")
        if module:
            return _mod(f"nn.Unfold({args})", out=out)(shape)
        return _I(f"{{x}} = F.unfold({{x}}, {args})", out)
    return make


def _fold(module: bool) -> MakeFn:
    """(B, C*k*k, L) -> (B, C, H, W) with non-overlapping k x k blocks and L = (H/k) * (W/k)."""
    def make(rng, shape):
        _, ckk, length = shape
        ks = [k for k in (2, 3, 4) if ckk % (k * k) == 0]
        if not ks:
            return None
        k = rng.choice(ks)
        hb = rng.choice([f for f in range(1, length + 1) if length % f == 0 and f * f <= length * 4][-3:])
        wb = length // hb
        size = (hb * k, wb * k)
        out = (shape[0], ckk // (k * k), *size)
        args = f"output_size={_tuple(size)}, kernel_size={k}, stride={k}"
        if module:
            return _mod(f"nn.Fold({args})", out=out)(shape)
        return _I(f"{{x}} = F.fold({{x}}, {args})", out)
    return make


_FOLD_START = _start_fixed((64, 256), (144, 64), (16, 1024), (256, 64))
_reg("torch.nn.Unfold", _NN, "shape", (4,), _unfold(True), _POOL_START[2])
_reg("torch.nn.functional.unfold", _F, "shape", (4,), _unfold(False), _POOL_START[2])
_reg("torch.nn.Fold", _NN, "shape", (3,), _fold(True), _FOLD_START)
_reg("torch.nn.functional.fold", _F, "shape", (3,), _fold(False), _FOLD_START)

# --- padding -----------------------------------------------------------------------------------------


def _pad_amounts(rng: random.Random, spatial: Shape, mode: str) -> list[int] | None:
    pads: list[int] = []
    for n in reversed(spatial):  # F.pad lists the last dim first
        limit = {"reflect": n - 1, "circular": n}.get(mode, 3)
        if limit < 1:
            return None
        pads += [rng.randint(0, min(3, limit)), rng.randint(1, min(3, limit))]
    return pads


def _padded(shape: Shape, pads: Sequence[int]) -> Shape:
    out = list(shape)
    for i in range(len(pads) // 2):
        out[len(shape) - 1 - i] += pads[2 * i] + pads[2 * i + 1]
    return tuple(out)


_PAD_MODULES = {"Constant": "constant", "Zero": "constant", "Reflection": "reflect",
                "Replication": "replicate", "Circular": "circular"}


def _pad_module(kind: str, nd: int) -> MakeFn:
    mode = _PAD_MODULES[kind]

    def make(rng, shape):
        pads = _pad_amounts(rng, shape[-nd:], mode)
        if pads is None:
            return None
        value = f", {_rnd_float(rng, (0.0, 0.5, -1.0))}" if kind == "Constant" else ""
        return _mod(f"nn.{kind}Pad{nd}d({_tuple(pads)}{value})", out=_padded(shape, pads))(shape)
    return make


for _kind in _PAD_MODULES:
    for _nd in (1, 2, 3):
        _reg(f"torch.nn.{_kind}Pad{_nd}d", _NN, "pad", (_nd + 1, _nd + 2), _pad_module(_kind, _nd),
             _POOL_START[_nd])


def _f_pad(rng, shape):
    mode = rng.choice(("constant", "reflect", "replicate", "circular"))
    if mode == "constant":
        nd = rng.randint(1, min(3, len(shape) - 1))
    else:
        nds = [nd for nd in (1, 2, 3) if len(shape) in (nd + 1, nd + 2)]
        if not nds:
            mode, nd = "constant", 1
        else:
            nd = rng.choice(nds)
    pads = _pad_amounts(rng, shape[-nd:], mode)
    if pads is None:
        return None
    extra = f", value={_rnd_float(rng, (0.0, 1.0))}" if mode == "constant" else ""
    return _I(f"{{x}} = F.pad({{x}}, {_tuple(pads)}, mode='{mode}'{extra})", _padded(shape, pads))


_reg("torch.nn.functional.pad", _F, "pad", _ND, _f_pad)

# --------------------------------------------------------------------------------------------------
# Interpolation and sampling
# --------------------------------------------------------------------------------------------------

_INTERP_MODES = {3: ("nearest", "linear", "area", "nearest-exact"),
                 4: ("nearest", "bilinear", "bicubic", "area", "nearest-exact"),
                 5: ("nearest", "trilinear", "area", "nearest-exact")}


def _interp_args(rng: random.Random, shape: Shape, mode: str) -> tuple[str, Shape]:
    spatial = shape[2:]
    if rng.random() < 0.6:
        f = rng.choice((2, 2, 3)) if mode != "area" else 2
        out_sp = tuple(n * f for n in spatial)
        arg = f"scale_factor={float(f)}"
    else:
        out_sp = tuple(max(1, n * rng.choice((1, 2, 3)) // 2) for n in spatial)
        arg = f"size={out_sp[0] if len(set(out_sp)) == 1 else _tuple(out_sp)}"
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        arg += f", align_corners={rng.choice((False, True))}"
    return arg, shape[:2] + out_sp


def _interpolate(rng, shape):
    mode = rng.choice(_INTERP_MODES[len(shape)])
    arg, out = _interp_args(rng, shape, mode)
    return _I(f"{{x}} = F.interpolate({{x}}, {arg}, mode='{mode}')", out)


def _upsample(rng, shape):
    mode = rng.choice([m for m in _INTERP_MODES[len(shape)] if m != "area"])
    arg, out = _interp_args(rng, shape, mode)
    return _mod(f"nn.Upsample({arg}, mode='{mode}')", out=out)(shape)


def _upsampling2d(cls: str) -> MakeFn:
    def make(rng, shape):
        f = rng.choice((2, 3))
        return _mod(f"nn.{cls}(scale_factor={f})", out=shape[:2] + (shape[2] * f, shape[3] * f))(shape)
    return make


_INTERP_START = _start_fixed((16, 32, 32), (8, 16, 16), (32, 128), (4, 8, 16, 16))
_reg("torch.nn.functional.interpolate", _F, "interpolate", (3, 4, 5), _interpolate, _INTERP_START)
_reg("torch.nn.Upsample", _NN, "interpolate", (3, 4, 5), _upsample, _INTERP_START)
_reg("torch.nn.UpsamplingNearest2d", _NN, "interpolate", (4,), _upsampling2d("UpsamplingNearest2d"))
_reg("torch.nn.UpsamplingBilinear2d", _NN, "interpolate", (4,), _upsampling2d("UpsamplingBilinear2d"))


def _grid_sample(rng, shape):
    ho, wo = rng.choice(((shape[2], shape[3]), (16, 16), (32, 32)))
    mode = rng.choice(("bilinear", "nearest"))
    pad = rng.choice(("zeros", "border", "reflection"))
    return _I(f"{{x}} = F.grid_sample({{x}}, torch.tanh({{y0}}), mode='{mode}', padding_mode='{pad}', "
              f"align_corners={rng.choice((False, True))})", (shape[0], shape[1], ho, wo),
              extra=((shape[0], ho, wo, 2),))


_reg("torch.nn.functional.grid_sample", _F, "interpolate", (4,), _grid_sample)


def _affine_grid(rng, shape):
    if _numel(shape[1:]) != 6:
        return None
    h, w = rng.choice(((16, 16), (32, 32), (64, 32)))
    return _I(f"{{x}} = F.affine_grid({{x}}.reshape({{x}}.size(0), 2, 3), ({{x}}.size(0), 1, {h}, {w}), "
              f"align_corners={rng.choice((False, True))})", (shape[0], h, w, 2))


_reg("torch.nn.functional.affine_grid", _F, "interpolate", (2, 3), _affine_grid, _start_fixed((6,), (2, 3)))

# --------------------------------------------------------------------------------------------------
# Spectral (complex results returned as magnitudes)
# --------------------------------------------------------------------------------------------------


def _rfft(rng, shape):
    d = rng.choice(_nonbatch(shape, 2) or [0])
    if not d:
        return None
    norm = rng.choice(("", ", norm='ortho'"))
    return _I(f"{{x}} = torch.fft.rfft({{x}}, dim={_dim_str(d, len(shape))}{norm}).abs()",
              shape[:d] + (shape[d] // 2 + 1,) + shape[d + 1:])


def _fft(rng, shape):
    d = rng.choice(_nonbatch(shape, 2) or [0])
    if not d:
        return None
    return _I(f"{{x}} = torch.fft.fft({{x}}, dim={_dim_str(d, len(shape))}, norm='ortho').abs()", shape)


def _rfft2(rng, shape):
    if min(shape[-2:]) < 2:
        return None
    return _I("{x} = torch.fft.rfft2({x}, norm='ortho').abs()", shape[:-1] + (shape[-1] // 2 + 1,))


_reg("torch.fft.rfft", _T, "spectral", _ND, _rfft)
_reg("torch.fft.fft", _T, "spectral", _ND, _fft)
_reg("torch.fft.rfft2", _T, "spectral", (3, 4, 5), _rfft2)

# --------------------------------------------------------------------------------------------------
# Attention and transformer layers
# --------------------------------------------------------------------------------------------------

_SEQ_START = _start_fixed((128, 256), (256, 128), (64, 512), (512, 64))
_HEADS_START = _start_fixed((8, 128, 64), (4, 256, 32), (16, 64, 64), (8, 256, 64))


def _sdpa(rng, shape):
    length, dim = shape[-2], shape[-1]
    if dim > 256 or length > 4096:
        return None
    heads = shape[1:-2]
    scale = rng.choice(("", f", scale={_scale(dim)}"))
    if rng.random() < 0.5:
        causal = rng.choice(("", ", is_causal=True"))
        return _I(f"{{x}} = F.scaled_dot_product_attention({{x}}, {{x}}, {{x}}{causal}{scale})", shape)
    s = rng.choice((64, 128, 256))
    dv = rng.choice((dim, 64))
    extra = ((shape[0], *heads, s, dim), (shape[0], *heads, s, dv))
    return _I(f"{{x}} = F.scaled_dot_product_attention({{x}}, {{y0}}, {{y1}}{scale})", shape[:-1] + (dv,), extra=extra)


_reg("torch.nn.functional.scaled_dot_product_attention", _F, "attention", (3, 4), _sdpa, _HEADS_START)


def _heads(rng: random.Random, e: int, min_dim: int = 8) -> int | None:
    hs = [h for h in (1, 2, 4, 8, 16) if e % h == 0 and e // h >= min_dim]
    return rng.choice(hs) if hs else None


def _mha(rng, shape):
    _, length, e = shape
    h = _heads(rng, e)
    if h is None or e > 1024 or length > 2048:
        return None
    bias = "" if rng.random() < 0.7 else ", bias=False"
    if rng.random() < 0.6:
        return _mod(f"nn.MultiheadAttention({e}, {h}{bias}, batch_first=True)",
                    "self.{name}({x}, {x}, {x}, need_weights=False)[0]")(shape)
    s, kd = rng.choice((64, 128, 256)), rng.choice((e, 64, 128))
    return _mod(f"nn.MultiheadAttention({e}, {h}{bias}, kdim={kd}, vdim={kd}, batch_first=True)",
                "self.{name}({x}, {y0}, {y0}, need_weights=False)[0]", extra=((shape[0], s, kd),))(shape)


_reg("torch.nn.MultiheadAttention", _NN, "attention", (3,), _mha, _SEQ_START)


def _transformer_layer(decoder: bool) -> MakeFn:
    def make(rng, shape):
        _, length, e = shape
        h = _heads(rng, e, 16)
        if h is None or e > 1024 or length > 2048:
            return None
        ff = rng.choice([f for f in (2 * e, 4 * e) if f <= 4096] or [e])
        act = rng.choice(("", ", activation='gelu'"))
        norm_first = rng.choice(("", ", norm_first=True"))
        cls = "TransformerDecoderLayer" if decoder else "TransformerEncoderLayer"
        ctor = f"nn.{cls}({e}, {h}, dim_feedforward={ff}, dropout=0.0{act}{norm_first}, batch_first=True)"
        if decoder:
            s = rng.choice((64, 128))
            return _mod(ctor, "self.{name}({x}, {y0})", extra=((shape[0], s, e),))(shape)
        return _mod(ctor)(shape)
    return make


_reg("torch.nn.TransformerEncoderLayer", _NN, "attention", (3,), _transformer_layer(False), _SEQ_START)
_reg("torch.nn.TransformerDecoderLayer", _NN, "attention", (3,), _transformer_layer(True), _SEQ_START)

# --------------------------------------------------------------------------------------------------
# Recurrent layers (batch_first; dropout 0)
# --------------------------------------------------------------------------------------------------

_RNN_START = _start_fixed((64, 128), (128, 64), (256, 32), (32, 256))


def _rnn(cls: str) -> MakeFn:
    def make(rng, shape):
        _, length, f = shape
        if f > 2048 or length > 1024:
            return None
        hdim = rng.choice((32, 64, 128, 256))
        layers = rng.choice((1, 1, 2))
        bi = rng.random() < 0.3
        kw = f", num_layers={layers}" if layers > 1 else ""
        kw += ", bidirectional=True" if bi else ""
        out = (shape[0], length, hdim * (2 if bi else 1))
        return _mod(f"nn.{cls}({f}, {hdim}{kw}, batch_first=True)", "self.{name}({x})[0]", out=out)(shape)
    return make


def _rnn_cell(cls: str) -> MakeFn:
    def make(rng, shape):
        f = shape[1]
        if f > 4096:
            return None
        hdim = rng.choice((64, 128, 256, 512))
        call = "self.{name}({x})[0]" if cls == "LSTMCell" else "self.{name}({x})"
        return _mod(f"nn.{cls}({f}, {hdim})", call, out=(shape[0], hdim))(shape)
    return make


for _cls in ("RNN", "LSTM", "GRU"):
    _reg(f"torch.nn.{_cls}", _NN, "recurrent", (3,), _rnn(_cls), _RNN_START)
for _cls in ("RNNCell", "LSTMCell", "GRUCell"):
    _reg(f"torch.nn.{_cls}", _NN, "recurrent", (2,), _rnn_cell(_cls))

# --------------------------------------------------------------------------------------------------
# transformers layers, written out as plain torch code (transformers itself is never imported)
# --------------------------------------------------------------------------------------------------

_HF_DEFS: dict[str, str] = {
    "LlamaRMSNorm": '''
class LlamaRMSNorm(nn.Module):
    """transformers.models.llama.modeling_llama.LlamaRMSNorm"""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
''',
    "T5LayerNorm": '''
class T5LayerNorm(nn.Module):
    """transformers.models.t5.modeling_t5.T5LayerNorm (RMS norm: no mean, no bias)"""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states
''',
    "GemmaRMSNorm": '''
class GemmaRMSNorm(nn.Module):
    """transformers.models.gemma.modeling_gemma.GemmaRMSNorm (scales by 1 + weight)"""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)
''',
    "ConvNextLayerNorm": '''
class ConvNextLayerNorm(nn.Module):
    """transformers.models.convnext.modeling_convnext.ConvNextLayerNorm in its channels_first format"""

    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps

    def forward(self, x):
        input_dtype = x.dtype
        x = x.float()
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        x = x.to(dtype=input_dtype)
        x = self.weight[:, None, None] * x + self.bias[:, None, None]
        return x
''',
    "NewGELUActivation": '''
class NewGELUActivation(nn.Module):
    """transformers.activations.NewGELUActivation (the GPT-2 / BERT tanh GELU)"""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))
''',
    "GELUTanh": '''
class GELUTanh(nn.Module):
    """transformers.activations.GELUTanh (gelu_pytorch_tanh)"""

    def forward(self, input):
        return F.gelu(input, approximate="tanh")
''',
    "FastGELUActivation": '''
class FastGELUActivation(nn.Module):
    """transformers.activations.FastGELUActivation"""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input)))
''',
    "QuickGELUActivation": '''
class QuickGELUActivation(nn.Module):
    """transformers.activations.QuickGELUActivation"""

    def forward(self, input):
        return input * torch.sigmoid(1.702 * input)
''',
    "ClippedGELUActivation": '''
class ClippedGELUActivation(nn.Module):
    """transformers.activations.ClippedGELUActivation"""

    def __init__(self, min, max):
        super().__init__()
        self.min = min
        self.max = max

    def forward(self, x):
        return torch.clip(F.gelu(x), self.min, self.max)
''',
    "AccurateGELUActivation": '''
class AccurateGELUActivation(nn.Module):
    """transformers.activations.AccurateGELUActivation"""

    def __init__(self):
        super().__init__()
        self.precomputed_constant = math.sqrt(2 / math.pi)

    def forward(self, input):
        return 0.5 * input * (1 + torch.tanh(self.precomputed_constant * (input + 0.044715 * torch.pow(input, 3))))
''',
    "LaplaceActivation": '''
class LaplaceActivation(nn.Module):
    """transformers.activations.LaplaceActivation"""

    def forward(self, input, mu=0.707107, sigma=0.282095):
        input = (input - mu).div(sigma * math.sqrt(2.0))
        return 0.5 * (1.0 + torch.erf(input))
''',
    "ReLUSquaredActivation": '''
class ReLUSquaredActivation(nn.Module):
    """transformers.activations.ReLUSquaredActivation"""

    def forward(self, input):
        relu_applied = F.relu(input)
        squared = torch.square(relu_applied)
        return squared
''',
    "LlamaMLP": '''
class LlamaMLP(nn.Module):
    """transformers.models.llama.modeling_llama.LlamaMLP (SiLU-gated)"""

    def __init__(self, hidden_size, intermediate_size, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
''',
    "GemmaMLP": '''
class GemmaMLP(nn.Module):
    """transformers.models.gemma.modeling_gemma.GemmaMLP (tanh-GELU-gated)"""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))
''',
    "Conv1D": '''
class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D (GPT-2's transposed linear; reshape where the original uses view)"""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return x.reshape(size_out)
''',
    "GPT2MLP": '''
class GPT2MLP(nn.Module):
    """transformers.models.gpt2.modeling_gpt2.GPT2MLP (without dropout)"""

    def __init__(self, intermediate_size, embed_dim):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        return hidden_states
''',
    "T5DenseGatedActDense": '''
class T5DenseGatedActDense(nn.Module):
    """transformers.models.t5.modeling_t5.T5DenseGatedActDense (gelu_new gate, without dropout)"""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.wi_0 = nn.Linear(d_model, d_ff, bias=False)
        self.wi_1 = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_gelu = self.act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        return self.wo(hidden_states)
''',
    "rotate_half": '''
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
''',
    "RotaryPositionEmbedding": '''
class RotaryPositionEmbedding(nn.Module):
    """LlamaRotaryEmbedding's cos/sin tables applied as transformers' apply_rotary_pos_emb does"""

    def __init__(self, head_dim, max_positions, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        cos = self.cos[:seq_len]
        sin = self.sin[:seq_len]
        return (x * cos) + (rotate_half(x) * sin)
''',
    "LlamaAttention": '''
class LlamaAttention(nn.Module):
    """transformers.models.llama.modeling_llama.LlamaAttention (RoPE, grouped KV heads, causal SDPA)"""

    def __init__(self, hidden_size, num_heads, num_key_value_heads, max_positions, rope_theta=10000.0):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.rotary = RotaryPositionEmbedding(self.head_dim, max_positions, rope_theta)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        q = self.rotary(q)
        k = self.rotary(k)
        k = k.repeat_interleave(self.num_key_value_groups, dim=1)
        v = v.repeat_interleave(self.num_key_value_groups, dim=1)
        attn_output = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)
''',
    "BertSelfOutput": '''
class BertSelfOutput(nn.Module):
    """transformers.models.bert.modeling_bert.BertSelfOutput (without dropout)"""

    def __init__(self, hidden_size, layer_norm_eps=1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states
''',
    "ViTPatchEmbeddings": '''
class ViTPatchEmbeddings(nn.Module):
    """transformers.models.vit.modeling_vit.ViTPatchEmbeddings"""

    def __init__(self, num_channels, hidden_size, patch_size):
        super().__init__()
        self.projection = nn.Conv2d(num_channels, hidden_size, kernel_size=patch_size, stride=patch_size)

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)
''',
}
_HF_DEFS = {k: v.strip() for k, v in _HF_DEFS.items()}


def _hf_defs(*names: str) -> tuple[str, ...]:
    return tuple(_HF_DEFS[n] for n in names)


def _hf_elementwise(cls: str, ctor_args: str = "") -> MakeFn:
    def make(rng, shape):
        return _mod(f"{cls}({ctor_args})", defs=_hf_defs(cls))(shape)
    return make


for _cls, _args_str in (("NewGELUActivation", ""), ("GELUTanh", ""), ("FastGELUActivation", ""),
                        ("QuickGELUActivation", ""), ("ClippedGELUActivation", "-10.0, 10.0"),
                        ("AccurateGELUActivation", ""), ("LaplaceActivation", ""), ("ReLUSquaredActivation", "")):
    _reg(f"transformers.activations.{_cls}", _HF, "activation", _ANY, _hf_elementwise(_cls, _args_str))


def _hf_rmsnorm(cls: str) -> MakeFn:
    def make(rng, shape):
        h = shape[-1]
        if h < 2 or h > 1 << 16:
            return None
        return _mod(f"{cls}({h}, eps={rng.choice(('1e-6', '1e-5'))})", defs=_hf_defs(cls))(shape)
    return make


_reg("transformers.models.llama.modeling_llama.LlamaRMSNorm", _HF, "norm", _ND, _hf_rmsnorm("LlamaRMSNorm"))
_reg("transformers.models.t5.modeling_t5.T5LayerNorm", _HF, "norm", _ND, _hf_rmsnorm("T5LayerNorm"))
_reg("transformers.models.gemma.modeling_gemma.GemmaRMSNorm", _HF, "norm", _ND, _hf_rmsnorm("GemmaRMSNorm"))
_reg("transformers.models.convnext.modeling_convnext.ConvNextLayerNorm", _HF, "norm", (4,),
     lambda rng, shape: _mod(f"ConvNextLayerNorm({shape[1]})", defs=_hf_defs("ConvNextLayerNorm"))(shape)
     if 2 <= shape[1] <= 4096 else None)


def _hf_mlp(cls: str, defs: tuple[str, ...], order: str) -> MakeFn:
    """order: 'hi' when the constructor takes (hidden, intermediate), 'ih' for (intermediate, hidden)."""
    def make(rng, shape):
        h = shape[-1]
        rows = _numel(shape[1:-1])
        inter = [i for i in (2 * h, 4 * h, 1024, 2048) if i <= 4 * 4096 and 3 * h * i <= 1 << 25
                 and 3 * rows * h * i <= _MAX_MACS]
        if not inter or h > 4096:
            return None
        i = rng.choice(inter)
        args = f"{h}, {i}" if order == "hi" else f"{i}, {h}"
        return _mod(f"{cls}({args})", defs=_hf_defs(*defs))(shape)
    return make


_MLP_START = _start_fixed((512,), (1024,), (64, 256), (128, 512))
_reg("transformers.models.llama.modeling_llama.LlamaMLP", _HF, "mlp", _ND,
     _hf_mlp("LlamaMLP", ("LlamaMLP",), "hi"), _MLP_START)
_reg("transformers.models.gemma.modeling_gemma.GemmaMLP", _HF, "mlp", _ND,
     _hf_mlp("GemmaMLP", ("GemmaMLP",), "hi"), _MLP_START)
_reg("transformers.models.gpt2.modeling_gpt2.GPT2MLP", _HF, "mlp", _ND,
     _hf_mlp("GPT2MLP", ("Conv1D", "NewGELUActivation", "GPT2MLP"), "ih"), _MLP_START)
_reg("transformers.models.t5.modeling_t5.T5DenseGatedActDense", _HF, "mlp", _ND,
     _hf_mlp("T5DenseGatedActDense", ("NewGELUActivation", "T5DenseGatedActDense"), "hi"), _MLP_START)


def _hf_conv1d(rng, shape):
    nx = shape[-1]
    nf = _out_features(rng, nx, _numel(shape[1:-1]))
    if nf is None:
        return None
    return _mod(f"Conv1D({nf}, {nx})", out=shape[:-1] + (nf,), defs=_hf_defs("Conv1D"))(shape)


_reg("transformers.pytorch_utils.Conv1D", _HF, "linear", _ND, _hf_conv1d)


def _hf_rotary(rng, shape):
    length, d = shape[-2], shape[-1]
    if d % 2 or d > 1024 or length > 1 << 16:
        return None
    return _mod(f"RotaryPositionEmbedding({d}, {length})",
                defs=_hf_defs("rotate_half", "RotaryPositionEmbedding"))(shape)


_reg("transformers.models.llama.modeling_llama.apply_rotary_pos_emb", _HF, "positional", (3, 4), _hf_rotary,
     _HEADS_START)


def _hf_attention(rng, shape):
    _, length, h = shape
    heads = [n for n in (2, 4, 8, 16) if h % n == 0 and (h // n) % 2 == 0 and h // n >= 16]
    if not heads or h > 2048 or length > 2048:
        return None
    n = rng.choice(heads)
    kv = rng.choice([k for k in (1, 2, n) if n % k == 0])
    return _mod(f"LlamaAttention({h}, {n}, {kv}, {length})",
                defs=_hf_defs("rotate_half", "RotaryPositionEmbedding", "LlamaAttention"))(shape)


_reg("transformers.models.llama.modeling_llama.LlamaAttention", _HF, "attention", (3,), _hf_attention, _SEQ_START)


def _hf_bert_self_output(rng, shape):
    h = shape[-1]
    if h < 2 or h > 4096 or _numel(shape[1:-1]) * h * h > _MAX_MACS:
        return None
    return _mod(f"BertSelfOutput({h})", "self.{name}({x}, {y0})", extra=(shape,),
                defs=_hf_defs("BertSelfOutput"))(shape)


_reg("transformers.models.bert.modeling_bert.BertSelfOutput", _HF, "norm", (3,), _hf_bert_self_output, _SEQ_START)


def _hf_patch(rng, shape):
    _, c, hgt, wid = shape
    ps = [p for p in (2, 4, 8, 16) if hgt % p == 0 and wid % p == 0]
    if not ps or c > 512:
        return None
    p = rng.choice(ps)
    hidden = rng.choice((64, 128, 256, 512))
    out = (shape[0], (hgt // p) * (wid // p), hidden)
    return _mod(f"ViTPatchEmbeddings({c}, {hidden}, {p})", out=out, defs=_hf_defs("ViTPatchEmbeddings"))(shape)


_reg("transformers.models.vit.modeling_vit.ViTPatchEmbeddings", _HF, "conv", (4,), _hf_patch,
     _start_fixed((3, 64, 64), (3, 32, 32), (8, 32, 32)))

# --------------------------------------------------------------------------------------------------
# The catalogue
# --------------------------------------------------------------------------------------------------

CATALOGUE: dict[str, Op] = {}
for _op in _OPS:
    assert _op.name not in CATALOGUE, f"duplicate catalogue entry {_op.name}"
    CATALOGUE[_op.name] = _op


def ops(families: Iterable[str] | None = None) -> list[Op]:
    """The catalogued ops (all, or those of `families`), sorted by name."""
    wanted = None if families is None else set(families)
    return [op for name, op in sorted(CATALOGUE.items()) if wanted is None or op.family in wanted]


# --------------------------------------------------------------------------------------------------
# The sweep: every public torch.nn module class and F function, and the torch/Tensor ops considered
# --------------------------------------------------------------------------------------------------

REASONS: dict[str, str] = {
    "stochastic": "output is random (dropout and its variants, RReLU, fractional max-pooling, sampling)",
    "inplace_only": "in-place variant (name ends in `_`); its out-of-place form is catalogued",
    "integer_input": "needs integer inputs (indices, class targets, token ids) that a float task cannot supply",
    "needs_targets": "a loss whose targets cannot be derived from a float extra input",
    "container": "a container or wrapper of other modules, not a computation of its own",
    "lazy": "lazy module: shapes inferred at the first call; its eager counterpart is catalogued",
    "batch_mixing": "mixes the batch dimension (batch statistics, reductions or products across samples)",
    "alias": "an alias, deprecated spelling or index-returning variant of a catalogued operator",
    "utility": "not a tensor computation (typing, dispatch helpers, identity, dtype or memory-layout changes)",
    "constant_output": "output does not depend on the input values",
    "dynamic_shape": "output shape depends on the input values",
    "non_float_output": "produces a boolean or integer tensor, not a float result",
    "nondeterministic": "uses atomics on CUDA (scatter/index accumulation, histograms): results vary run to run",
    "dtype_specific": "needs or produces a dtype other than float32 (fp8 scaled matmuls, float64, complex)",
    "unstable_numerics": "ill-conditioned on random inputs, or a decomposition whose signs/order are not unique",
    "size_limited": "fails above a fixed input size that rescaling the batch would exceed",
    "sparse": "operates on sparse tensors",
    "quantized": "operates on quantized tensors",
    "not_catalogued": "a valid candidate not yet given generators",
}


@dataclass(frozen=True)
class SweepEntry:
    """One public operator considered: in the catalogue, or excluded with a reason code and a note."""

    name: str
    source: str
    included: bool
    reason: str | None  # a key of REASONS when excluded
    note: str | None = None  # one line saying why, for a human reader


# nn module classes (torch.nn namespace) that are out, with a note where REASONS alone says too little.
_NN_EXCLUDED: dict[str, tuple[str, str | None]] = {
    "AlphaDropout": ("stochastic", None), "Dropout": ("stochastic", None), "Dropout1d": ("stochastic", None),
    "Dropout2d": ("stochastic", None), "Dropout3d": ("stochastic", None),
    "FeatureAlphaDropout": ("stochastic", None),
    "RReLU": ("stochastic", "random negative slope in training mode"),
    "FractionalMaxPool2d": ("stochastic", "random pooling regions"),
    "FractionalMaxPool3d": ("stochastic", "random pooling regions"),
    "BatchNorm1d": ("batch_mixing", "training-mode batch statistics; F.batch_norm is catalogued in inference form"),
    "BatchNorm2d": ("batch_mixing", "training-mode batch statistics; F.batch_norm is catalogued in inference form"),
    "BatchNorm3d": ("batch_mixing", "training-mode batch statistics; F.batch_norm is catalogued in inference form"),
    "SyncBatchNorm": ("batch_mixing", "batch statistics across processes; needs torch.distributed"),
    "Embedding": ("integer_input", "token ids"), "EmbeddingBag": ("integer_input", "token ids and offsets"),
    "NLLLoss": ("integer_input", "class-index targets"), "NLLLoss2d": ("integer_input", "class-index targets"),
    "MultiMarginLoss": ("integer_input", "class-index targets"),
    "MultiLabelMarginLoss": ("integer_input", "class-index targets"),
    "CTCLoss": ("integer_input", "label sequences and lengths"),
    "AdaptiveLogSoftmaxWithLoss": ("integer_input", "class-index targets"),
    "LinearCrossEntropyLoss": ("integer_input", "class-index targets"),
    "Container": ("container", None), "Module": ("container", "the base class"),
    "ModuleDict": ("container", None), "ModuleList": ("container", None), "ParameterDict": ("container", None),
    "ParameterList": ("container", None), "Sequential": ("container", None),
    "DataParallel": ("container", "multi-GPU wrapper"),
    "Transformer": ("container", "stacks of encoder/decoder layers; the layers themselves are catalogued"),
    "TransformerEncoder": ("container", "a stack of TransformerEncoderLayer, which is catalogued"),
    "TransformerDecoder": ("container", "a stack of TransformerDecoderLayer, which is catalogued"),
    "Identity": ("utility", "returns its input"),
    "RNNBase": ("utility", "abstract base of RNN/LSTM/GRU"), "RNNCellBase": ("utility", "abstract base of the cells"),
}

_F_EXCLUDED: dict[str, tuple[str, str | None]] = {
    "alpha_dropout": ("stochastic", None), "dropout": ("stochastic", None), "dropout1d": ("stochastic", None),
    "dropout2d": ("stochastic", None), "dropout3d": ("stochastic", None),
    "feature_alpha_dropout": ("stochastic", None), "gumbel_softmax": ("stochastic", "samples Gumbel noise"),
    "rrelu": ("stochastic", None), "rrelu_": ("stochastic", None),
    "fractional_max_pool2d": ("stochastic", None), "fractional_max_pool3d": ("stochastic", None),
    "fractional_max_pool2d_with_indices": ("stochastic", None),
    "fractional_max_pool3d_with_indices": ("stochastic", None),
    "embedding": ("integer_input", "token ids"), "embedding_bag": ("integer_input", "token ids and offsets"),
    "one_hot": ("integer_input", "class indices"), "nll_loss": ("integer_input", "class-index targets"),
    "multi_margin_loss": ("integer_input", "class-index targets"),
    "multilabel_margin_loss": ("integer_input", "class-index targets"),
    "ctc_loss": ("integer_input", "label sequences and lengths"),
    "linear_cross_entropy": ("integer_input", "class-index targets"),
    "max_pool1d_with_indices": ("alias", "max_pool1d returning indices"),
    "max_pool2d_with_indices": ("alias", "max_pool2d returning indices"),
    "max_pool3d_with_indices": ("alias", "max_pool3d returning indices"),
    "adaptive_max_pool1d_with_indices": ("alias", "adaptive_max_pool1d returning indices"),
    "adaptive_max_pool2d_with_indices": ("alias", "adaptive_max_pool2d returning indices"),
    "adaptive_max_pool3d_with_indices": ("alias", "adaptive_max_pool3d returning indices"),
    "upsample": ("alias", "deprecated spelling of interpolate"),
    "upsample_bilinear": ("alias", "deprecated spelling of interpolate(mode='bilinear')"),
    "upsample_nearest": ("alias", "deprecated spelling of interpolate(mode='nearest')"),
    "native_channel_shuffle": ("alias", "the kernel behind channel_shuffle"),
    "multi_head_attention_forward": ("alias", "the functional core of nn.MultiheadAttention, which is catalogued"),
    "pdist": ("batch_mixing", "distances between the rows of one 2-D input, i.e. between samples"),
    "grouped_mm": ("dtype_specific", "bf16 grouped GEMM for specific GPUs"),
    "scaled_grouped_mm": ("dtype_specific", "fp8 scaled grouped GEMM"),
    "scaled_mm": ("dtype_specific", "fp8 scaled GEMM"),
}
for _fn in ("celu_", "elu_", "hardtanh_", "leaky_relu_", "relu_", "selu_", "threshold_"):
    _F_EXCLUDED[_fn] = ("inplace_only", None)
for _fn in ("Callable", "DType", "Optional", "ScalingType", "SwizzleType", "Tensor"):
    _F_EXCLUDED[_fn] = ("utility", "a type imported into torch.nn.functional")
for _fn in ("assert_int_or_pair", "boolean_dispatch", "handle_torch_function", "has_torch_function",
            "has_torch_function_unary", "has_torch_function_variadic"):
    _F_EXCLUDED[_fn] = ("utility", "an argument-checking or dispatch helper")

# The torch / torch.Tensor operators considered beyond the catalogue, each with its reason code.
_CONSIDERED: dict[str, tuple[str, str | None]] = {
    "torch.rand_like": ("stochastic", None), "torch.randn_like": ("stochastic", None),
    "torch.randint_like": ("stochastic", None), "torch.bernoulli": ("stochastic", None),
    "torch.multinomial": ("stochastic", None), "torch.normal": ("stochastic", None),
    "torch.poisson": ("stochastic", None), "torch.dropout": ("stochastic", None),
    "torch.rrelu": ("stochastic", None),
    "torch.zeros_like": ("constant_output", None), "torch.ones_like": ("constant_output", None),
    "torch.full_like": ("constant_output", None), "torch.empty_like": ("constant_output", None),
    "torch.Tensor.new_zeros": ("constant_output", None), "torch.Tensor.new_ones": ("constant_output", None),
    "torch.nonzero": ("dynamic_shape", None), "torch.unique": ("dynamic_shape", None),
    "torch.unique_consecutive": ("dynamic_shape", None), "torch.masked_select": ("dynamic_shape", None),
    "torch.argsort": ("non_float_output", "indices"), "torch.eq": ("non_float_output", None),
    "torch.gt": ("non_float_output", None), "torch.lt": ("non_float_output", None),
    "torch.isclose": ("non_float_output", None), "torch.isnan": ("non_float_output", None),
    "torch.isfinite": ("non_float_output", None), "torch.logical_and": ("non_float_output", None),
    "torch.logical_not": ("non_float_output", None), "torch.all": ("non_float_output", None),
    "torch.any": ("non_float_output", None), "torch.count_nonzero": ("non_float_output", None),
    "torch.bucketize": ("non_float_output", None), "torch.searchsorted": ("non_float_output", None),
    "torch.bitwise_and": ("integer_input", None), "torch.bitwise_not": ("integer_input", None),
    "torch.gcd": ("integer_input", None), "torch.lcm": ("integer_input", None),
    "torch.bincount": ("integer_input", None), "torch.gather": ("integer_input", "an index tensor"),
    "torch.index_select": ("integer_input", "an index tensor"), "torch.take": ("integer_input", "an index tensor"),
    "torch.scatter": ("integer_input", "an index tensor"),
    "torch.index_add": ("nondeterministic", None), "torch.scatter_add": ("nondeterministic", None),
    "torch.scatter_reduce": ("nondeterministic", None), "torch.index_reduce": ("nondeterministic", None),
    "torch.histc": ("nondeterministic", None), "torch.Tensor.put_": ("nondeterministic", None),
    "torch.addbmm": ("batch_mixing", "sums the batched products over the batch"),
    "torch.dist": ("batch_mixing", "a norm over all elements"),
    "torch.outer": ("batch_mixing", "1-D operands: the batch would be the vector"),
    "torch.kron": ("batch_mixing", None), "torch.trace": ("batch_mixing", "2-D only"),
    "torch.Tensor.t": ("batch_mixing", "2-D transpose moves the batch"), "torch.cov": ("batch_mixing", None),
    "torch.corrcoef": ("batch_mixing", None), "torch.cartesian_prod": ("batch_mixing", None),
    "torch.quantile": ("size_limited", "input limited to 16M elements"),
    "torch.nanquantile": ("size_limited", "input limited to 16M elements"),
    "torch.relu": ("alias", "F.relu"), "torch.selu": ("alias", "F.selu"), "torch.celu": ("alias", "F.celu"),
    "torch.softmax": ("alias", "F.softmax"), "torch.log_softmax": ("alias", "F.log_softmax"),
    "torch.clip": ("alias", "torch.clamp"), "torch.true_divide": ("alias", "torch.div"),
    "torch.absolute": ("alias", "torch.abs"), "torch.negative": ("alias", "torch.neg"),
    "torch.multiply": ("alias", "torch.mul"), "torch.subtract": ("alias", "torch.sub"),
    "torch.divide": ("alias", "torch.div"), "torch.arctan2": ("alias", "torch.atan2"),
    "torch.special.expit": ("alias", "torch.sigmoid"), "torch.special.logit": ("alias", "torch.logit"),
    "torch.special.sinc": ("alias", "torch.sinc"), "torch.special.erfinv": ("alias", "torch.erfinv"),
    "torch.cross": ("alias", "torch.linalg.cross"), "torch.linalg.norm": ("alias", "vector_norm / matrix_norm"),
    "torch.Tensor.matmul": ("alias", "torch.matmul"), "torch.split": ("alias", "torch.chunk"),
    "torch.float_power": ("dtype_specific", "float64 result"),
    "torch.view_as_complex": ("dtype_specific", "complex"), "torch.polar": ("dtype_specific", "complex"),
    "torch.fft.ifft": ("dtype_specific", "complex input"),
    "torch.relu_": ("inplace_only", None), "torch.Tensor.add_": ("inplace_only", None),
    "torch.Tensor.mul_": ("inplace_only", None), "torch.Tensor.clamp_": ("inplace_only", None),
    "torch.Tensor.exp_": ("inplace_only", None), "torch.sigmoid_": ("inplace_only", None),
    "torch.nan_to_num": ("utility", "identity on finite inputs"), "torch.positive": ("utility", "identity"),
    "torch.Tensor.contiguous": ("utility", None), "torch.Tensor.clone": ("utility", None),
    "torch.Tensor.detach": ("utility", None), "torch.Tensor.to": ("utility", None),
    "torch.Tensor.float": ("utility", None),
    "torch.linalg.inv": ("unstable_numerics", None), "torch.linalg.det": ("unstable_numerics", None),
    "torch.linalg.slogdet": ("unstable_numerics", None), "torch.linalg.solve": ("unstable_numerics", None),
    "torch.linalg.svd": ("unstable_numerics", None), "torch.linalg.eigh": ("unstable_numerics", None),
    "torch.linalg.eig": ("unstable_numerics", None), "torch.linalg.qr": ("unstable_numerics", None),
    "torch.linalg.cholesky": ("unstable_numerics", None), "torch.linalg.pinv": ("unstable_numerics", None),
    "torch.linalg.matrix_exp": ("unstable_numerics", None), "torch.linalg.lstsq": ("unstable_numerics", None),
    "torch.sparse.mm": ("sparse", None), "torch.sparse.softmax": ("sparse", None),
    "torch.Tensor.to_sparse": ("sparse", None),
    "torch.quantize_per_tensor": ("quantized", None), "torch.dequantize": ("quantized", None),
    "torch.fake_quantize_per_tensor_affine": ("quantized", None),
}


def _resolve(dotted: str):
    """The object `torch.a.b` names in the installed torch, or None."""
    import importlib  # noqa: PLC0415

    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        nxt = getattr(obj, part, None)
        if nxt is None:
            try:
                nxt = importlib.import_module(".".join(parts[: i + 1]))
            except ImportError:
                return None
        obj = nxt
    return obj


def _nn_module_names() -> list[str]:
    import inspect  # noqa: PLC0415

    import torch.nn as nn  # noqa: PLC0415 - sweep only; importing the catalogue stays torch-free

    names = set()
    for ns in (nn, nn.modules):
        for n in dir(ns):
            obj = getattr(ns, n)
            if not n.startswith("_") and inspect.isclass(obj) and issubclass(obj, nn.Module):
                names.add(n)
    return sorted(names)


def _f_names() -> list[str]:
    import torch.nn.functional as F  # noqa: PLC0415, N812

    return sorted(n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n)))


def _auto_reason(short: str, functional: bool) -> tuple[str, str | None]:
    """A reason for a public name the tables above do not know (a newer torch): by its shape."""
    if short[:1].isupper() and functional:
        return "utility", "a type or helper imported into torch.nn.functional"
    if short.endswith("_"):
        return "inplace_only", None
    if "dropout" in short.lower():
        return "stochastic", None
    if short.startswith("Lazy"):
        return "lazy", None
    if short.endswith("Loss"):
        return "needs_targets", None
    return "not_catalogued", None


def sweep() -> list[SweepEntry]:
    """Every public torch.nn module class and torch.nn.functional function of the installed torch, the
    torch/Tensor operators considered, and the catalogued transformers layers: included, or excluded
    with a reason code (a key of `REASONS`) and a note. Sorted by name."""
    entries: dict[str, SweepEntry] = {}

    def add(name: str, source: str, table: dict[str, tuple[str, str | None]], short: str, functional: bool):
        if name in CATALOGUE:
            entries[name] = SweepEntry(name, source, True, None)
            return
        code, note = table.get(short) or _auto_reason(short, functional)
        entries[name] = SweepEntry(name, source, False, code, note or REASONS[code])

    for short in _nn_module_names():
        add(f"torch.nn.{short}", _NN, _NN_EXCLUDED, short, False)
    for short in _f_names():
        add(f"torch.nn.functional.{short}", _F, _F_EXCLUDED, short, True)
    for name, (code, note) in _CONSIDERED.items():
        if name not in CATALOGUE and _resolve(name) is not None:
            source = _TT if name.startswith("torch.Tensor.") else _T
            entries[name] = SweepEntry(name, source, False, code, note or REASONS[code])
    for name, op in CATALOGUE.items():
        if name not in entries:
            entries[name] = SweepEntry(name, op.source, True, None)
    return [entries[n] for n in sorted(entries)]
