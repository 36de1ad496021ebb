"""Linear maps and matrix products (families `linear` and `matmul`; `torch.linalg.cross` of `binary`).

Output widths come from `out_features`, which keeps a weight under 4M entries and the work per sample
under `MAX_MACS`; a second matrix is a parameter, or an extra input that carries the batch in dim 0.
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import (MAX_MACS, ND, SRC_F, SRC_NN, SRC_T, MakeFn, dim_str, instance,
                                             module_call, numel, out_features, randn_param, register, rnd_float,
                                             start_fixed)


def _linear(module: bool) -> MakeFn:
    def make(rng, shape):
        k = shape[-1]
        rows = numel(shape[1:-1])
        n = out_features(rng, k, rows)
        if n is None or k > 16384:
            return None
        bias = rng.random() < 0.75
        out = shape[:-1] + (n,)
        if module:
            return module_call(f"nn.Linear({k}, {n}{'' if bias else ', bias=False'})", out=out)(shape)
        init = [randn_param("_weight", (n, k), k)]
        if bias:
            init.append(randn_param("_bias", (n,), k))
        b = ", self.{name}_bias" if bias else ""
        return instance(f"{{x}} = F.linear({{x}}, self.{{name}}_weight{b})", out, init=init)
    return make


register("torch.nn.Linear", SRC_NN, "linear", ND, _linear(True))
register("torch.nn.functional.linear", SRC_F, "linear", ND, _linear(False))


def _bilinear(module: bool) -> MakeFn:
    def make(rng, shape):
        in1 = shape[-1]
        if in1 > 1024:
            return None
        in2 = rng.choice((16, 32, 64))
        rows = numel(shape[1:-1])
        outs = [o for o in (16, 32, 64, 128, 256) if in1 * in2 * o <= 1 << 20 and rows * in1 * in2 * o <= MAX_MACS]
        if not outs:
            return None
        o = rng.choice(outs)
        extra = (shape[:-1] + (in2,),)
        out = shape[:-1] + (o,)
        if module:
            return module_call(f"nn.Bilinear({in1}, {in2}, {o})", "self.{name}({x}, {y0})", out=out,
                               extra=extra)(shape)
        init = (randn_param("_weight", (o, in1, in2), in1 * in2), randn_param("_bias", (o,), in1))
        return instance("{x} = F.bilinear({x}, {y0}, self.{name}_weight, self.{name}_bias)", out, init=init,
                        extra=extra)
    return make


register("torch.nn.Bilinear", SRC_NN, "linear", ND, _bilinear(True), start_fixed((256,), (64, 128), (128,)))
register("torch.nn.functional.bilinear", SRC_F, "linear", ND, _bilinear(False), start_fixed((256,), (64, 128), (128,)))


def _matmul(rng, shape):
    k = shape[-1]
    rows = numel(shape[1:-1])
    if len(shape) >= 3 and rng.random() < 0.5:
        n = rng.choice((16, 32, 64, 128, 256))
        if rows * k * n > MAX_MACS:
            return None
        return instance("{x} = torch.matmul({x}, {y0})", shape[:-1] + (n,), extra=(shape[:-2] + (k, n),))
    n = out_features(rng, k, rows)
    if n is None:
        return None
    return instance("{x} = torch.matmul({x}, self.{name})", shape[:-1] + (n,), init=randn_param("", (k, n), k))


register("torch.matmul", SRC_T, "matmul", ND, _matmul)


def _mm(rng, shape):
    n = out_features(rng, shape[-1], 1)
    if n is None:
        return None
    return instance("{x} = torch.mm({x}, self.{name})", (shape[0], n), init=randn_param("", (shape[-1], n), shape[-1]))


register("torch.mm", SRC_T, "matmul", (2,), _mm)


def _addmm(rng, shape):
    k = shape[-1]
    n = out_features(rng, k, 1)
    if n is None:
        return None
    init = (randn_param("_bias", (n,), k), randn_param("_weight", (k, n), k))
    beta = rnd_float(rng, (0.5, 1.0))
    return instance(f"{{x}} = torch.addmm(self.{{name}}_bias, {{x}}, self.{{name}}_weight, beta={beta})",
                    (shape[0], n), init=init)


register("torch.addmm", SRC_T, "matmul", (2,), _addmm)


def _bmm(with_bias: bool) -> MakeFn:
    def make(rng, shape):
        _, m, k = shape
        n = rng.choice((16, 32, 64, 128, 256))
        if m * k * n > MAX_MACS:
            return None
        out = (shape[0], m, n)
        if not with_bias:
            return instance("{x} = torch.bmm({x}, {y0})", out, extra=((shape[0], k, n),))
        return instance(f"{{x}} = torch.baddbmm(self.{{name}}, {{x}}, {{y0}}, alpha={rnd_float(rng, (0.5, 1.0))})",
                        out, init=randn_param("", (n,)), extra=((shape[0], k, n),))
    return make


register("torch.bmm", SRC_T, "matmul", (3,), _bmm(False))
register("torch.baddbmm", SRC_T, "matmul", (3,), _bmm(True))


def _einsum(rng, shape):
    r = len(shape)
    if r == 2:
        k = shape[1]
        n = out_features(rng, k, 1)
        if n is None:
            return None
        return instance("{x} = torch.einsum('bi,ij->bj', {x}, self.{name})", (shape[0], n),
                        init=randn_param("", (k, n), k))
    if r in (3, 4) and rng.random() < 0.5:
        n = rng.choice((16, 32, 64, 128))
        if numel(shape[1:]) * n > MAX_MACS:
            return None
        if r == 3:
            eq, extra = "bij,bjk->bik", (shape[0], shape[2], n)
        else:
            eq, extra = "bhij,bhjk->bhik", (shape[0], shape[1], shape[3], n)
        return instance(f"{{x}} = torch.einsum('{eq}', {{x}}, {{y0}})", shape[:-1] + (n,), extra=(extra,))
    # contract the channel dim (dim 1) with a weight, like a 1x1 convolution
    c = shape[1]
    o = rng.choice((8, 16, 32, 64, 128))
    if c > 4096 or numel(shape[2:]) * c * o > MAX_MACS:
        return None
    rest = "xyz"[: r - 2]
    return instance(f"{{x}} = torch.einsum('bc{rest},oc->bo{rest}', {{x}}, self.{{name}})", (shape[0], o) + shape[2:],
                    init=randn_param("", (o, c), c))


register("torch.einsum", SRC_T, "matmul", ND, _einsum)


def _tensordot(rng, shape):
    k = shape[-1]
    n = out_features(rng, k, numel(shape[1:-1]))
    if n is None:
        return None
    return instance(f"{{x}} = torch.tensordot({{x}}, self.{{name}}, dims=([{len(shape) - 1}], [0]))",
                    shape[:-1] + (n,), init=randn_param("", (k, n), k))


register("torch.tensordot", SRC_T, "matmul", ND, _tensordot)


def _cdist(rng, shape):
    _, p, m = shape
    r = rng.choice((16, 32, 64, 128))
    if p * r * m > MAX_MACS:
        return None
    norm = rng.choice(("2.0", "1.0"))
    return instance(f"{{x}} = torch.cdist({{x}}, {{y0}}, p={norm})", (shape[0], p, r), extra=((shape[0], r, m),))


register("torch.cdist", SRC_T, "matmul", (3,), _cdist)


def _cross(rng, shape):
    dims = [d for d in range(1, len(shape)) if shape[d] == 3]
    if not dims:
        return None
    d = rng.choice(dims)
    return instance(f"{{x}} = torch.linalg.cross({{x}}, {{y0}}, dim={dim_str(d, len(shape))})", shape, extra=(shape,))


register("torch.linalg.cross", SRC_T, "binary", ND, _cross, start_fixed((4096, 3), (3, 32, 32), (64, 3)))
