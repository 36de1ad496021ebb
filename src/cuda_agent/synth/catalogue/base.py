"""What every family module builds on: `Instance`, `Op`, the size limits, the code-writing helpers, the
start shapes shared by several families, and the registry (`register` fills `CATALOGUE`).

A family module registers its ops when it is imported; the package imports the families in a fixed
order, and that order is `CATALOGUE`'s order, which every seeded draw of the composer depends on.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

Shape = tuple[int, ...]  # dim 0 is always the batch dimension

MAX_SAMPLE = 1 << 24  # elements per sample of an output or extra input
MAX_PARAMS = 1 << 25  # parameters of one op
MAX_MACS = 1 << 31  # multiply-adds per sample of one op
MAX_RANK = 5
BATCHES = (8, 16, 32)


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
        if not 1 <= len(out) <= MAX_RANK or out[0] != shape[0] or min(out) < 1:
            return None
        if numel(out[1:]) > MAX_SAMPLE or any(numel(e[1:]) > MAX_SAMPLE for e in inst.extra_inputs):
            return None
        assert all(e[0] == shape[0] for e in inst.extra_inputs), (self.name, inst.extra_inputs)
        return replace(inst, op=self.name, in_shape=shape)

    def start_shape(self, rng: random.Random) -> Shape:
        """A typical input shape for this op opening a chain (batch included, moderate sizes)."""
        return self._start(rng)


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def numel(shape: Sequence[int]) -> int:
    """The number of elements of `shape`."""
    return math.prod(shape)


def shape_args(shape: Sequence[int]) -> str:
    """`(2, 3)` -> `2, 3`, for `torch.randn(2, 3)`."""
    return ", ".join(str(d) for d in shape)


def tuple_literal(values: Sequence[int]) -> str:
    """A Python tuple literal: `(2,)`, `(2, 3)`."""
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def dims_arg(dims: Sequence[int]) -> str:
    """A `dim=` argument: `2` for one dim, `(1, 2)` for several."""
    return str(dims[0]) if len(dims) == 1 else tuple_literal(dims)


def fan_in_scale(fan_in: int) -> str:
    """`1/sqrt(fan_in)` as a literal: the scale that keeps a random weight's outputs near unit variance."""
    return f"{1.0 / math.sqrt(max(fan_in, 1)):.4g}"


def instance(forward: str | Sequence[str], out: Shape, init: str | Sequence[str] = (),
             extra: Sequence[Shape] = (), defs: Sequence[str] = ()) -> Instance:
    """An `Instance` of one statement or several (`Op.make` sets `op` and `in_shape`)."""
    as_tuple = (lambda v: (v,) if isinstance(v, str) else tuple(v))
    return Instance(op="", init=as_tuple(init), forward=as_tuple(forward), out_shape=tuple(out),
                    extra_inputs=tuple(tuple(e) for e in extra), defs=tuple(defs))


def module_call(ctor: str, call: str = "self.{name}({x})", out: Shape | None = None,
                **kw) -> Callable[[Shape], Instance]:
    """Instance for a module call: `self.{name} = <ctor>` and `{x} = <call>`."""
    def build(shape: Shape) -> Instance:
        return instance(f"{{x}} = {call}", out if out is not None else shape, init=f"self.{{name}} = {ctor}",
                        **kw)
    return build


def param(suffix: str, ctor: str) -> str:
    """The init statement of a parameter `self.{name}<suffix>` built by the expression `ctor`."""
    return f"self.{{name}}{suffix} = nn.Parameter({ctor})"


def randn_param(suffix: str, shape: Sequence[int], fan_in: int | None = None) -> str:
    """A normal random parameter of `shape`, scaled by `fan_in_scale(fan_in)` when `fan_in` is given."""
    scale = f" * {fan_in_scale(fan_in)}" if fan_in else ""
    return param(suffix, f"torch.randn({shape_args(shape)}){scale}")


def nonbatch(shape: Shape, min_size: int = 1) -> list[int]:
    """The dims other than the batch (dim 0) with at least `min_size` elements."""
    return [d for d in range(1, len(shape)) if shape[d] >= min_size]


def dim_str(d: int, rank: int) -> str:
    """A dim as written in the code: `-1` for the last one."""
    return "-1" if d == rank - 1 else str(d)


def rnd_float(rng: random.Random, choices: Sequence[float]) -> str:
    """One of `choices`, as a float literal."""
    return repr(float(rng.choice(list(choices))))


# --- start shapes ---------------------------------------------------------------------------------


def _shape_of_rank(rng: random.Random, rank: int) -> Shape:
    b = rng.choice(BATCHES)
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


def start_fixed(*choices: Sequence[int]) -> StartFn:
    """Start shapes drawn from per-sample shapes (batch prepended)."""
    def start(rng: random.Random) -> Shape:
        return (rng.choice(BATCHES), *rng.choice(choices))
    return start


ANY = (1, 2, 3, 4, 5)
ND = (2, 3, 4, 5)
POOL_START = {  # pooling, and the shape ops that unfold or pad images
    1: start_fixed((16, 256), (32, 128), (64, 512)),
    2: start_fixed((16, 32, 32), (8, 64, 64), (32, 16, 16), (3, 64, 64)),
    3: start_fixed((8, 16, 16, 16), (4, 16, 32, 32), (16, 8, 8, 8)),
}
SEQ_START = start_fixed((128, 256), (256, 128), (64, 512), (512, 64))  # (B, L, E) sequences
HEADS_START = start_fixed((8, 128, 64), (4, 256, 32), (16, 64, 64), (8, 256, 64))  # (B, H, L, D) heads

# --- helpers of several families ------------------------------------------------------------------

_FEATURES = (64, 128, 256, 512, 1024, 2048, 4096)


def out_features(rng: random.Random, in_f: int, rows: int) -> int | None:
    """An output width for a linear map of `in_f` features applied to `rows` rows per sample, in the limits."""
    ok = [f for f in _FEATURES if in_f * f <= 1 << 22 and rows * in_f * f <= MAX_MACS and rows * f <= MAX_SAMPLE]
    return rng.choice(ok) if ok else None


def pick_dims(rng: random.Random, shape: Shape, multi: bool, min_size: int = 1, max_size: int | None = None
              ) -> tuple[int, ...] | None:
    """One non-batch dim (sometimes two when `multi`) of size `min_size`..`max_size`, sorted; None if none."""
    dims = [d for d in nonbatch(shape, min_size) if max_size is None or shape[d] <= max_size]
    if not dims:
        return None
    k = 2 if multi and len(dims) >= 2 and rng.random() < 0.35 else 1
    return tuple(sorted(rng.sample(dims, k)))


def reduced(shape: Shape, dims: Sequence[int], keepdim: bool) -> Shape:
    """`shape` after reducing `dims`: kept as size 1 with `keepdim`, dropped without."""
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    """The output length of a convolution (or unfold) window: kernel k, stride s, padding p, dilation d."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

SRC_NN, SRC_F, SRC_T, SRC_TT, SRC_HF = "torch.nn", "torch.nn.functional", "torch", "torch.Tensor", "transformers"

CATALOGUE: dict[str, Op] = {}  # name -> op, in registration order


def register(name: str, source: str, family: str, ranks: Iterable[int], make: MakeFn,
             start: StartFn | None = None) -> None:
    """Add an op to `CATALOGUE`; without `start`, its start shapes are typical ones of its ranks."""
    assert name not in CATALOGUE, f"duplicate catalogue entry {name}"
    ranks = frozenset(ranks)
    CATALOGUE[name] = Op(name, source, family, ranks, make, start or _start(*ranks))
