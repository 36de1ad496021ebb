"""Attention and transformer layers (family `attention`): `F.scaled_dot_product_attention`,
`nn.MultiheadAttention` and the transformer encoder and decoder layers.

All are batch-first with dropout 0; keys and values are the running tensor (self-attention) or an extra
input.
"""

from __future__ import annotations

import random

from cuda_agent.synth.catalogue.base import (HEADS_START, SEQ_START, SRC_F, SRC_NN, MakeFn, fan_in_scale, instance,
                                             module_call, register)


def _sdpa(rng, shape):
    length, dim = shape[-2], shape[-1]
    if dim > 256 or length > 4096:
        return None
    heads = shape[1:-2]
    scale = rng.choice(("", f", scale={fan_in_scale(dim)}"))
    if rng.random() < 0.5:
        causal = rng.choice(("", ", is_causal=True"))
        return instance(f"{{x}} = F.scaled_dot_product_attention({{x}}, {{x}}, {{x}}{causal}{scale})", shape)
    s = rng.choice((64, 128, 256))
    dv = rng.choice((dim, 64))
    extra = ((shape[0], *heads, s, dim), (shape[0], *heads, s, dv))
    return instance(f"{{x}} = F.scaled_dot_product_attention({{x}}, {{y0}}, {{y1}}{scale})", shape[:-1] + (dv,),
                    extra=extra)


register("torch.nn.functional.scaled_dot_product_attention", SRC_F, "attention", (3, 4), _sdpa, HEADS_START)


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
        return module_call(f"nn.MultiheadAttention({e}, {h}{bias}, batch_first=True)",
                           "self.{name}({x}, {x}, {x}, need_weights=False)[0]")(shape)
    s, kd = rng.choice((64, 128, 256)), rng.choice((e, 64, 128))
    return module_call(f"nn.MultiheadAttention({e}, {h}{bias}, kdim={kd}, vdim={kd}, batch_first=True)",
                       "self.{name}({x}, {y0}, {y0}, need_weights=False)[0]", extra=((shape[0], s, kd),))(shape)


register("torch.nn.MultiheadAttention", SRC_NN, "attention", (3,), _mha, SEQ_START)


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
            return module_call(ctor, "self.{name}({x}, {y0})", extra=((shape[0], s, e),))(shape)
        return module_call(ctor)(shape)
    return make


register("torch.nn.TransformerEncoderLayer", SRC_NN, "attention", (3,), _transformer_layer(False), SEQ_START)
register("torch.nn.TransformerDecoderLayer", SRC_NN, "attention", (3,), _transformer_layer(True), SEQ_START)
