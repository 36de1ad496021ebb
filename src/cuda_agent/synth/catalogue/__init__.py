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
- Float32 only; deterministic ops only; sizes bounded (`MAX_SAMPLE` elements per sample for outputs and
  extra inputs, `MAX_PARAMS` parameters and `MAX_MACS` multiply-adds per sample for one op).

Layout: `base` holds `Instance`, `Op`, the limits, the helpers shared by the families and the registry;
one module per operator family registers its ops when imported; `exclusions` holds `sweep()`. The
families are imported below in a fixed order, and that order is `CATALOGUE`'s order, on which every
seeded draw of the composer depends: a new family goes at the end.

`sweep()` lists every public `torch.nn` module class and `torch.nn.functional` function of the installed
torch, plus the documented list of torch/Tensor operators considered (`_CONSIDERED`), each either in
`CATALOGUE` or excluded with a code of `REASONS` and a one-line note. torch is imported only by `sweep`.
"""

from __future__ import annotations

from collections.abc import Iterable

from cuda_agent.synth.catalogue.base import CATALOGUE, Instance, MakeFn, Op, Shape, StartFn
from cuda_agent.synth.catalogue.exclusions import REASONS, SweepEntry, sweep

# isort: off
from cuda_agent.synth.catalogue import (  # noqa: F401  (imported to register their ops, in this order)
    activations,
    elementwise,
    binary,
    reductions,
    linalg,
    conv,
    pooling,
    norm,
    losses,
    shape,
    interpolate,
    spectral,
    attention,
    recurrent,
    hf_layers,
)
# isort: on

__all__ = ["CATALOGUE", "REASONS", "Instance", "MakeFn", "Op", "Shape", "StartFn", "SweepEntry", "ops", "sweep"]


def ops(families: Iterable[str] | None = None) -> list[Op]:
    """The catalogued ops (all, or those of `families`), sorted by name."""
    wanted = None if families is None else set(families)
    return [op for name, op in sorted(CATALOGUE.items()) if wanted is None or op.family in wanted]
