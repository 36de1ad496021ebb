"""Distances and losses (families `distance` and `loss`): the second operand is an extra input.

Losses use `reduction='none'`, so the output keeps the batch; targets are mapped into their valid domain
in the code (`torch.sigmoid({y0})` for probabilities, `torch.sign({y0})` for -1/+1 labels). `_loss`
registers a loss's module and its functional form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cuda_agent.synth.catalogue.base import (ANY, ND, SRC_F, SRC_NN, MakeFn, Shape, dim_str, instance, module_call,
                                             nonbatch, reduced, register)

# --- distances and similarities -------------------------------------------------------------------


def _cosine(module: bool) -> MakeFn:
    def make(rng, shape):
        dims = nonbatch(shape, 2)
        if not dims:
            return None
        d = rng.choice(dims)
        ds = dim_str(d, len(shape))
        out = reduced(shape, (d,), False)
        if module:
            return module_call(f"nn.CosineSimilarity(dim={ds})", "self.{name}({x}, {y0})", out=out,
                               extra=(shape,))(shape)
        return instance(f"{{x}} = F.cosine_similarity({{x}}, {{y0}}, dim={ds})", out, extra=(shape,))
    return make


def _pairwise(module: bool) -> MakeFn:
    def make(rng, shape):
        p = rng.choice(("2.0", "1.0"))
        keep = rng.random() < 0.3
        out = shape[:-1] + ((1,) if keep else ())
        kd = ", keepdim=True" if keep else ""
        if module:
            return module_call(f"nn.PairwiseDistance(p={p}{kd})", "self.{name}({x}, {y0})", out=out,
                               extra=(shape,))(shape)
        return instance(f"{{x}} = F.pairwise_distance({{x}}, {{y0}}, p={p}{kd})", out, extra=(shape,))
    return make


register("torch.nn.CosineSimilarity", SRC_NN, "distance", ND, _cosine(True))
register("torch.nn.functional.cosine_similarity", SRC_F, "distance", ND, _cosine(False))
register("torch.nn.PairwiseDistance", SRC_NN, "distance", ND, _pairwise(True))
register("torch.nn.functional.pairwise_distance", SRC_F, "distance", ND, _pairwise(False))

# --- losses ---------------------------------------------------------------------------------------


def _loss(cls: str, fn: str, ctor_args: str, call: str, ranks: Iterable[int],
          out: Callable[[Shape], Shape] = lambda s: s,
          extras: Callable[[Shape], tuple[Shape, ...]] = lambda s: (s,),
          accepts: Callable[[Shape], bool] = lambda s: True) -> None:
    """`call` is the argument list, e.g. `torch.sigmoid({x}), {y0}`."""
    args = f"{ctor_args}, reduction='none'" if ctor_args else "reduction='none'"

    def module(rng, shape):
        if not accepts(shape):
            return None
        return instance(f"{{x}} = self.{{name}}({call})", out(shape), init=f"self.{{name}} = nn.{cls}({args})",
                        extra=extras(shape))

    def functional(rng, shape):
        if not accepts(shape):
            return None
        return instance(f"{{x}} = F.{fn}({call}, {args})", out(shape), extra=extras(shape))

    register(f"torch.nn.{cls}", SRC_NN, "loss", ranks, module)
    register(f"torch.nn.functional.{fn}", SRC_F, "loss", ranks, functional)


_loss("MSELoss", "mse_loss", "", "{x}, {y0}", ANY)
_loss("L1Loss", "l1_loss", "", "{x}, {y0}", ANY)
_loss("SmoothL1Loss", "smooth_l1_loss", "beta=0.5", "{x}, {y0}", ANY)
_loss("HuberLoss", "huber_loss", "delta=1.0", "{x}, {y0}", ANY)
_loss("SoftMarginLoss", "soft_margin_loss", "", "{x}, torch.sign({y0})", ANY)
_loss("BCELoss", "binary_cross_entropy", "", "torch.sigmoid({x}), torch.sigmoid({y0})", ANY)
_loss("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", "", "{x}, torch.sigmoid({y0})", ANY)
_loss("KLDivLoss", "kl_div", "", "{x}, torch.sigmoid({y0})", ANY)
_loss("PoissonNLLLoss", "poisson_nll_loss", "log_input=True", "{x}.clamp(max=20.0), {y0}.abs()", ANY)
_loss("GaussianNLLLoss", "gaussian_nll_loss", "eps=1e-6", "{x}, {y0}, {y1}.abs() + 0.1", ANY,
      extras=lambda s: (s, s))
_loss("HingeEmbeddingLoss", "hinge_embedding_loss", "margin=1.0", "{x}, torch.sign({y0})", ANY)
_loss("MarginRankingLoss", "margin_ranking_loss", "margin=0.1", "{x}, {y0}, torch.sign({y1})", ANY,
      extras=lambda s: (s, s))
_loss("CrossEntropyLoss", "cross_entropy", "label_smoothing=0.1", "{x}, F.softmax({y0}, dim=1)", ND,
      out=lambda s: s[:1] + s[2:], accepts=lambda s: s[1] >= 2)
_loss("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", "", "{x}, torch.sigmoid({y0})", (2,),
      out=lambda s: s[:1])
_loss("CosineEmbeddingLoss", "cosine_embedding_loss", "margin=-0.5", "{x}, {y0}, torch.sign({y1})", (2,),
      out=lambda s: s[:1], extras=lambda s: (s, s[:1]))
_loss("TripletMarginLoss", "triplet_margin_loss", "margin=2.0, p=2.0", "{x}, {y0}, {y1}", (2,),
      out=lambda s: s[:1], extras=lambda s: (s, s))
_loss("TripletMarginWithDistanceLoss", "triplet_margin_with_distance_loss", "margin=2.0", "{x}, {y0}, {y1}", (2,),
      out=lambda s: s[:1], extras=lambda s: (s, s))
