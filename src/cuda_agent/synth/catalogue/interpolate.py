"""Interpolation and sampling (family `interpolate`): `F.interpolate`, `nn.Upsample` and its 2-D modules,
`F.grid_sample` and `F.affine_grid`.

`F.grid_sample`'s grid is an extra input put through tanh, so that it lies inside [-1, 1];
`F.affine_grid` reads a sample of 6 elements as its 2x3 matrix.
"""

from __future__ import annotations

import random

from cuda_agent.synth.catalogue.base import (SRC_F, SRC_NN, MakeFn, Shape, instance, module_call, numel, register,
                                             start_fixed, tuple_literal)

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
        arg = f"size={out_sp[0] if len(set(out_sp)) == 1 else tuple_literal(out_sp)}"
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        arg += f", align_corners={rng.choice((False, True))}"
    return arg, shape[:2] + out_sp


def _interpolate(rng, shape):
    mode = rng.choice(_INTERP_MODES[len(shape)])
    arg, out = _interp_args(rng, shape, mode)
    return instance(f"{{x}} = F.interpolate({{x}}, {arg}, mode='{mode}')", out)


def _upsample(rng, shape):
    mode = rng.choice([m for m in _INTERP_MODES[len(shape)] if m != "area"])
    arg, out = _interp_args(rng, shape, mode)
    return module_call(f"nn.Upsample({arg}, mode='{mode}')", out=out)(shape)


def _upsampling2d(cls: str) -> MakeFn:
    def make(rng, shape):
        f = rng.choice((2, 3))
        return module_call(f"nn.{cls}(scale_factor={f})", out=shape[:2] + (shape[2] * f, shape[3] * f))(shape)
    return make


_INTERP_START = start_fixed((16, 32, 32), (8, 16, 16), (32, 128), (4, 8, 16, 16))
register("torch.nn.functional.interpolate", SRC_F, "interpolate", (3, 4, 5), _interpolate, _INTERP_START)
register("torch.nn.Upsample", SRC_NN, "interpolate", (3, 4, 5), _upsample, _INTERP_START)
register("torch.nn.UpsamplingNearest2d", SRC_NN, "interpolate", (4,), _upsampling2d("UpsamplingNearest2d"))
register("torch.nn.UpsamplingBilinear2d", SRC_NN, "interpolate", (4,), _upsampling2d("UpsamplingBilinear2d"))


def _grid_sample(rng, shape):
    ho, wo = rng.choice(((shape[2], shape[3]), (16, 16), (32, 32)))
    mode = rng.choice(("bilinear", "nearest"))
    pad = rng.choice(("zeros", "border", "reflection"))
    return instance(f"{{x}} = F.grid_sample({{x}}, torch.tanh({{y0}}), mode='{mode}', padding_mode='{pad}', "
                    f"align_corners={rng.choice((False, True))})", (shape[0], shape[1], ho, wo),
                    extra=((shape[0], ho, wo, 2),))


register("torch.nn.functional.grid_sample", SRC_F, "interpolate", (4,), _grid_sample)


def _affine_grid(rng, shape):
    if numel(shape[1:]) != 6:
        return None
    h, w = rng.choice(((16, 16), (32, 32), (64, 32)))
    return instance(f"{{x}} = F.affine_grid({{x}}.reshape({{x}}.size(0), 2, 3), ({{x}}.size(0), 1, {h}, {w}), "
                    f"align_corners={rng.choice((False, True))})", (shape[0], h, w, 2))


register("torch.nn.functional.affine_grid", SRC_F, "interpolate", (2, 3), _affine_grid, start_fixed((6,), (2, 3)))
