"""Spectral ops (family `spectral`): FFTs over non-batch dims.

Complex results are returned as magnitudes (`.abs()`), so a task's output stays float32.
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import ND, SRC_T, dim_str, instance, nonbatch, register


def _rfft(rng, shape):
    d = rng.choice(nonbatch(shape, 2) or [0])
    if not d:
        return None
    norm = rng.choice(("", ", norm='ortho'"))
    return instance(f"{{x}} = torch.fft.rfft({{x}}, dim={dim_str(d, len(shape))}{norm}).abs()",
                    shape[:d] + (shape[d] // 2 + 1,) + shape[d + 1:])


def _fft(rng, shape):
    d = rng.choice(nonbatch(shape, 2) or [0])
    if not d:
        return None
    return instance(f"{{x}} = torch.fft.fft({{x}}, dim={dim_str(d, len(shape))}, norm='ortho').abs()", shape)


def _rfft2(rng, shape):
    if min(shape[-2:]) < 2:
        return None
    return instance("{x} = torch.fft.rfft2({x}, norm='ortho').abs()", shape[:-1] + (shape[-1] // 2 + 1,))


register("torch.fft.rfft", SRC_T, "spectral", ND, _rfft)
register("torch.fft.fft", SRC_T, "spectral", ND, _fft)
register("torch.fft.rfft2", SRC_T, "spectral", (3, 4, 5), _rfft2)
