"""Convolutions (family `conv`): Conv and ConvTranspose 1d-3d, as modules and as functional calls with
explicit weight parameters, and `F.conv_tbc`.

Kernel, stride, padding, dilation and groups are drawn together; a draw whose output would be empty or
cost more than `MAX_MACS` gives no instance. (ViTPatchEmbeddings, also `conv`, is in `hf_layers`.)
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import (MAX_MACS, SRC_F, SRC_NN, MakeFn, conv_out, instance, module_call, numel,
                                             randn_param, register, start_fixed)

_CONV_START = {
    1: start_fixed((16, 256), (32, 128), (64, 64), (3, 512)),
    2: start_fixed((3, 32, 32), (16, 32, 32), (32, 16, 16), (8, 64, 64)),
    3: start_fixed((3, 8, 16, 16), (8, 8, 16, 16), (16, 8, 8, 8)),
}


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
            out_sp = tuple(conv_out(n, k, s, p, d) for n in spatial)
        if min(out_sp) < 1:
            return None
        out = (shape[0], o) + out_sp
        macs = numel(out[1:]) * (c // groups) * k ** nd
        if macs > MAX_MACS:
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
            return module_call(f"nn.{cls}({args})", out=out)(shape)
        wshape = (c, o // groups) + (k,) * nd if transposed else (o, c // groups) + (k,) * nd
        fan_in = (c // groups) * k ** nd
        init = [randn_param("_weight", wshape, fan_in)]
        if bias:
            init.append(randn_param("_bias", (o,), fan_in))
        fkw = ", ".join(x for x in kw[1:])
        fn = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
        b = "self.{name}_bias" if bias else "None"
        return instance(f"{{x}} = F.{fn}({{x}}, self.{{name}}_weight, {b}{', ' + fkw if fkw else ''})", out, init=init)
    return make


for _nd in (1, 2, 3):
    for _tr in (False, True):
        _cls = f"ConvTranspose{_nd}d" if _tr else f"Conv{_nd}d"
        _fn = f"conv_transpose{_nd}d" if _tr else f"conv{_nd}d"
        register(f"torch.nn.{_cls}", SRC_NN, "conv", (_nd + 2,), _conv(_nd, _tr, True), _CONV_START[_nd])
        register(f"torch.nn.functional.{_fn}", SRC_F, "conv", (_nd + 2,), _conv(_nd, _tr, False), _CONV_START[_nd])


def _conv_tbc(rng, shape):
    _, t, c = shape
    k = rng.choice([k for k in (1, 3, 5) if k <= t + 2] or [1])
    pad = k // 2
    o = rng.choice((16, 32, 64, 128))
    tout = t + 2 * pad - k + 1
    if c > 1024 or tout < 1 or tout * c * o * k > MAX_MACS:
        return None
    init = (randn_param("_weight", (k, c, o), k * c), randn_param("_bias", (o,), k * c))
    return instance("{x} = F.conv_tbc({x}.transpose(0, 1).contiguous(), self.{name}_weight, self.{name}_bias, "
                    f"pad={pad})"
                    ".transpose(0, 1)", (shape[0], tout, o), init=init)


register("torch.nn.functional.conv_tbc", SRC_F, "conv", (3,), _conv_tbc, start_fixed((128, 64), (256, 32)))
