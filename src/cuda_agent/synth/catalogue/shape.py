"""Shape ops (families `shape` and `pad`): transpose and permute, reshape, flatten and squeeze, slices,
repeats, concatenation, pixel and channel shuffles, fold and unfold, and padding.

Dim 0, the batch, stays where it is and is never merged with another dim or split.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from cuda_agent.synth.catalogue.base import (BATCHES, MAX_RANK, ND, POOL_START, SRC_F, SRC_NN, SRC_T, SRC_TT, MakeFn,
                                             Shape, conv_out, dim_str, dims_arg, instance, module_call, nonbatch,
                                             numel, pick_dims, register, rnd_float, shape_args, start_fixed,
                                             tuple_literal)


def _transpose(rng, shape):
    if len(shape) < 3:
        return None
    a, b = sorted(rng.sample(range(1, len(shape)), 2))
    out = list(shape)
    out[a], out[b] = out[b], out[a]
    return instance(f"{{x}} = torch.transpose({{x}}, {a}, {b})", tuple(out))


def _permute(rng, shape):
    if len(shape) < 3:
        return None
    rest = list(range(1, len(shape)))
    perm = rest[:]
    while perm == rest:
        rng.shuffle(perm)
    order = (0, *perm)
    return instance(f"{{x}} = {{x}}.permute{tuple_literal(order)}", tuple(shape[i] for i in order))


def _movedim(rng, shape):
    if len(shape) < 3:
        return None
    a, b = rng.sample(range(1, len(shape)), 2)
    dims = [d for d in range(len(shape)) if d != a]
    dims.insert(b, a)
    return instance(f"{{x}} = torch.movedim({{x}}, {a}, {b})", tuple(shape[d] for d in dims))


def _flatten(kind: str) -> MakeFn:
    def make(rng, shape):
        r = len(shape)
        if r < 3:
            return None
        s = rng.randint(1, r - 2)
        e = rng.randint(s + 1, r - 1)
        out = shape[:s] + (numel(shape[s:e + 1]),) + shape[e + 1:]
        es = dim_str(e, r)
        if kind == "module":
            return module_call(f"nn.Flatten(start_dim={s}, end_dim={es})", out=out)(shape)
        if kind == "tensor":
            return instance(f"{{x}} = {{x}}.flatten({s}, {es})", out)
        return instance(f"{{x}} = torch.flatten({{x}}, start_dim={s}, end_dim={es})", out)
    return make


def _factors(n: int) -> list[int]:
    return [f for f in range(2, math.isqrt(n) + 1) if n % f == 0]


def _split(rng: random.Random, n: int) -> tuple[int, int]:
    f = rng.choice(_factors(n))
    return (f, n // f) if rng.random() < 0.5 else (n // f, f)


def _regroup(rng: random.Random, shape: Shape) -> Shape | None:
    """A new per-sample shape with the same element count: split one dim or merge two adjacent ones."""
    rest = list(shape[1:])
    splittable = [i for i, n in enumerate(rest) if _factors(n)] if len(shape) < MAX_RANK else []
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
        dims = shape_args(out[1:])
        if kind == "view":
            return instance(f"{{x}} = {{x}}.contiguous().view({{x}}.size(0), {dims})", out)
        if kind == "tensor":
            return instance(f"{{x}} = {{x}}.reshape({{x}}.size(0), {dims})", out)
        return instance(f"{{x}} = torch.reshape({{x}}, ({{x}}.size(0), {dims}))", out)
    return make


def _unflatten(rng, shape):
    if len(shape) >= MAX_RANK:
        return None
    dims = [d for d in range(1, len(shape)) if _factors(shape[d])]
    if not dims:
        return None
    d = rng.choice(dims)
    sizes = _split(rng, shape[d])
    return module_call(f"nn.Unflatten({d}, {tuple_literal(sizes)})", out=shape[:d] + sizes + shape[d + 1:])(shape)


register("torch.transpose", SRC_T, "shape", (3, 4, 5), _transpose)
register("torch.Tensor.permute", SRC_TT, "shape", (3, 4, 5), _permute)
register("torch.movedim", SRC_T, "shape", (3, 4, 5), _movedim)
register("torch.flatten", SRC_T, "shape", (3, 4, 5), _flatten("torch"))
register("torch.Tensor.flatten", SRC_TT, "shape", (3, 4, 5), _flatten("tensor"))
register("torch.nn.Flatten", SRC_NN, "shape", (3, 4, 5), _flatten("module"))
register("torch.reshape", SRC_T, "shape", ND, _reshape("torch"))
register("torch.Tensor.reshape", SRC_TT, "shape", ND, _reshape("tensor"))
register("torch.Tensor.view", SRC_TT, "shape", ND, _reshape("view"))
register("torch.nn.Unflatten", SRC_NN, "shape", (2, 3, 4), _unflatten)


def _unsqueeze(rng, shape):
    if len(shape) >= MAX_RANK:
        return None
    d = rng.randint(1, len(shape))
    return instance(f"{{x}} = torch.unsqueeze({{x}}, {d})", shape[:d] + (1,) + shape[d:])


def _squeeze(rng, shape):
    dims = [d for d in range(1, len(shape)) if shape[d] == 1]
    if not dims:
        return None
    d = rng.choice(dims)
    return instance(f"{{x}} = torch.squeeze({{x}}, {d})", shape[:d] + shape[d + 1:])


def _squeeze_start(rng):
    b = rng.choice(BATCHES)
    return rng.choice(((b, 64, 1, 256), (b, 1, 1024), (b, 16, 32, 1)))


register("torch.unsqueeze", SRC_T, "shape", (1, 2, 3, 4), _unsqueeze)
register("torch.squeeze", SRC_T, "shape", (3, 4, 5), _squeeze, _squeeze_start)


def _expand(rng, shape):
    if len(shape) >= MAX_RANK:
        return None
    d = rng.randint(1, len(shape))
    n = rng.choice((2, 3, 4))
    out = shape[:d] + (n,) + shape[d:]
    sizes = ", ".join(str(n) if i == d else "-1" for i in range(len(out)))
    return instance(f"{{x}} = {{x}}.unsqueeze({d}).expand({sizes})", out)


register("torch.Tensor.expand", SRC_TT, "shape", (1, 2, 3, 4), _expand)


def _roll(rng, shape):
    dims = pick_dims(rng, shape, True, 2)
    if dims is None:
        return None
    shifts = tuple(rng.randint(1, shape[d] - 1) for d in dims)
    return instance(f"{{x}} = torch.roll({{x}}, shifts={dims_arg(shifts)}, dims={dims_arg(dims)})", shape)


def _flip(rng, shape):
    dims = pick_dims(rng, shape, True, 2)
    if dims is None:
        return None
    return instance(f"{{x}} = torch.flip({{x}}, dims={tuple_literal(dims)})", shape)


def _rot90(rng, shape):
    if len(shape) < 3:
        return None
    a, b = sorted(rng.sample(range(1, len(shape)), 2))
    k = rng.choice((1, 2, 3))
    out = list(shape)
    if k % 2:
        out[a], out[b] = out[b], out[a]
    return instance(f"{{x}} = torch.rot90({{x}}, {k}, dims=({a}, {b}))", tuple(out))


def _tri(fn: str) -> MakeFn:
    def make(rng, shape):
        if min(shape[-2:]) < 2:
            return None
        return instance(f"{{x}} = torch.{fn}({{x}}, diagonal={rng.choice((0, 0, 1, -1))})", shape)
    return make


def _diagonal(rng, shape):
    off = rng.choice((0, 0, 1))
    n = min(shape[-2], shape[-1] - off)
    if n < 1:
        return None
    return instance(f"{{x}} = torch.diagonal({{x}}, offset={off}, dim1=-2, dim2=-1)", shape[:-2] + (n,))


def _diag_embed(rng, shape):
    n = shape[-1]
    if len(shape) >= MAX_RANK or n > 256:
        return None
    return instance("{x} = torch.diag_embed({x})", shape + (n,))


register("torch.roll", SRC_T, "shape", ND, _roll)
register("torch.flip", SRC_T, "shape", ND, _flip)
register("torch.rot90", SRC_T, "shape", (3, 4, 5), _rot90)
register("torch.tril", SRC_T, "shape", (3, 4, 5), _tri("tril"))
register("torch.triu", SRC_T, "shape", (3, 4, 5), _tri("triu"))
register("torch.diagonal", SRC_T, "shape", (3, 4, 5), _diagonal)
register("torch.diag_embed", SRC_T, "shape", (2, 3, 4), _diag_embed, start_fixed((64,), (16, 32), (128,)))


def _repeat(kind: str) -> MakeFn:
    def make(rng, shape):
        d = rng.choice(range(1, len(shape)))
        n = rng.choice((2, 3))
        out = shape[:d] + (shape[d] * n,) + shape[d + 1:]
        reps = tuple(n if i == d else 1 for i in range(len(shape)))
        if kind == "repeat":
            return instance(f"{{x}} = {{x}}.repeat{tuple_literal(reps)}", out)
        if kind == "tile":
            return instance(f"{{x}} = torch.tile({{x}}, {tuple_literal(reps)})", out)
        return instance(f"{{x}} = torch.repeat_interleave({{x}}, {n}, dim={d})", out)
    return make


register("torch.Tensor.repeat", SRC_TT, "shape", ND, _repeat("repeat"))
register("torch.tile", SRC_T, "shape", ND, _repeat("tile"))
register("torch.repeat_interleave", SRC_T, "shape", ND, _repeat("interleave"))


def _narrow(rng, shape):
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    length = rng.randint(1, shape[d] - 1)
    start = rng.randint(0, shape[d] - length)
    return instance(f"{{x}} = torch.narrow({{x}}, {d}, {start}, {length})", shape[:d] + (length,) + shape[d + 1:])


def _chunk(rng, shape):
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    n = rng.choice((2, 3, 4))
    size = -(-shape[d] // n)
    count = -(-shape[d] // size)
    i = rng.randrange(count)
    length = min(size, shape[d] - i * size)
    return instance(f"{{x}} = torch.chunk({{x}}, {n}, dim={d})[{i}]", shape[:d] + (length,) + shape[d + 1:])


def _cat(rng, shape):
    d = rng.choice(range(1, len(shape)))
    m = rng.choice((shape[d], max(1, shape[d] // 2), 16))
    other = shape[:d] + (m,) + shape[d + 1:]
    order = "{x}, {y0}" if rng.random() < 0.5 else "{y0}, {x}"
    return instance(f"{{x}} = torch.cat([{order}], dim={d})", shape[:d] + (shape[d] + m,) + shape[d + 1:],
                    extra=(other,))


def _stack(rng, shape):
    if len(shape) >= MAX_RANK:
        return None
    d = rng.randint(1, len(shape))
    return instance(f"{{x}} = torch.stack([{{x}}, {{y0}}], dim={d})", shape[:d] + (2,) + shape[d:], extra=(shape,))


register("torch.narrow", SRC_T, "shape", ND, _narrow)
register("torch.chunk", SRC_T, "shape", ND, _chunk)
register("torch.cat", SRC_T, "shape", ND, _cat)
register("torch.stack", SRC_T, "shape", (1, 2, 3, 4), _stack)


def _tensor_unfold(rng, shape):
    if len(shape) >= MAX_RANK:
        return None
    dims = nonbatch(shape, 2)
    if not dims:
        return None
    d = rng.choice(dims)
    size = rng.choice([s for s in (2, 3, 4, 8) if s <= shape[d]])
    step = rng.choice((1, size))
    n = (shape[d] - size) // step + 1
    return instance(f"{{x}} = {{x}}.unfold({d}, {size}, {step})", shape[:d] + (n,) + shape[d + 1:] + (size,))


register("torch.Tensor.unfold", SRC_TT, "shape", (2, 3, 4), _tensor_unfold)


def _pixel_shuffle(module: bool) -> MakeFn:
    def make(rng, shape):
        rs = [r for r in (2, 3, 4) if shape[1] % (r * r) == 0]
        if not rs:
            return None
        r = rng.choice(rs)
        out = (shape[0], shape[1] // (r * r), shape[2] * r, shape[3] * r)
        if module:
            return module_call(f"nn.PixelShuffle({r})", out=out)(shape)
        return instance(f"{{x}} = F.pixel_shuffle({{x}}, {r})", out)
    return make


def _pixel_unshuffle(module: bool) -> MakeFn:
    def make(rng, shape):
        rs = [r for r in (2, 3, 4) if shape[2] % r == 0 and shape[3] % r == 0]
        if not rs:
            return None
        r = rng.choice(rs)
        out = (shape[0], shape[1] * r * r, shape[2] // r, shape[3] // r)
        if module:
            return module_call(f"nn.PixelUnshuffle({r})", out=out)(shape)
        return instance(f"{{x}} = F.pixel_unshuffle({{x}}, {r})", out)
    return make


def _channel_shuffle(module: bool) -> MakeFn:
    def make(rng, shape):
        gs = [g for g in (2, 3, 4, 8) if shape[1] % g == 0 and g < shape[1]]
        if not gs:
            return None
        g = rng.choice(gs)
        if module:
            return module_call(f"nn.ChannelShuffle({g})")(shape)
        return instance(f"{{x}} = F.channel_shuffle({{x}}, {g})", shape)
    return make


_PS_START = start_fixed((16, 16, 16), (32, 16, 16), (64, 8, 8), (36, 12, 12))
register("torch.nn.PixelShuffle", SRC_NN, "shape", (4,), _pixel_shuffle(True), _PS_START)
register("torch.nn.functional.pixel_shuffle", SRC_F, "shape", (4,), _pixel_shuffle(False), _PS_START)
register("torch.nn.PixelUnshuffle", SRC_NN, "shape", (4,), _pixel_unshuffle(True))
register("torch.nn.functional.pixel_unshuffle", SRC_F, "shape", (4,), _pixel_unshuffle(False))
register("torch.nn.ChannelShuffle", SRC_NN, "shape", (3, 4, 5), _channel_shuffle(True))
register("torch.nn.functional.channel_shuffle", SRC_F, "shape", (3, 4, 5), _channel_shuffle(False))


def _unfold(module: bool) -> MakeFn:
    def make(rng, shape):
        _, c, h, w = shape
        ks = [k for k in (2, 3) if k <= min(h, w)]
        if not ks:
            return None
        k = rng.choice(ks)
        s = rng.choice((1, k))
        p = rng.choice((0, k // 2)) if s == 1 else 0
        oh, ow = conv_out(h, k, s, p, 1), conv_out(w, k, s, p, 1)
        out = (shape[0], c * k * k, oh * ow)
        args = f"kernel_size={k}, stride={s}" + (f", padding={p}" if p else "")
        if module:
            return module_call(f"nn.Unfold({args})", out=out)(shape)
        return instance(f"{{x}} = F.unfold({{x}}, {args})", out)
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
        args = f"output_size={tuple_literal(size)}, kernel_size={k}, stride={k}"
        if module:
            return module_call(f"nn.Fold({args})", out=out)(shape)
        return instance(f"{{x}} = F.fold({{x}}, {args})", out)
    return make


_FOLD_START = start_fixed((64, 256), (144, 64), (16, 1024), (256, 64))
register("torch.nn.Unfold", SRC_NN, "shape", (4,), _unfold(True), POOL_START[2])
register("torch.nn.functional.unfold", SRC_F, "shape", (4,), _unfold(False), POOL_START[2])
register("torch.nn.Fold", SRC_NN, "shape", (3,), _fold(True), _FOLD_START)
register("torch.nn.functional.fold", SRC_F, "shape", (3,), _fold(False), _FOLD_START)

# --- padding --------------------------------------------------------------------------------------


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
        value = f", {rnd_float(rng, (0.0, 0.5, -1.0))}" if kind == "Constant" else ""
        return module_call(f"nn.{kind}Pad{nd}d({tuple_literal(pads)}{value})", out=_padded(shape, pads))(shape)
    return make


for _kind in _PAD_MODULES:
    for _nd in (1, 2, 3):
        register(f"torch.nn.{_kind}Pad{_nd}d", SRC_NN, "pad", (_nd + 1, _nd + 2), _pad_module(_kind, _nd),
                 POOL_START[_nd])


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
    extra = f", value={rnd_float(rng, (0.0, 1.0))}" if mode == "constant" else ""
    return instance(f"{{x}} = F.pad({{x}}, {tuple_literal(pads)}, mode='{mode}'{extra})", _padded(shape, pads))


register("torch.nn.functional.pad", SRC_F, "pad", ND, _f_pad)
