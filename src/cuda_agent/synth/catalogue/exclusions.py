"""The sweep: every public `torch.nn` module class and `torch.nn.functional` function of the installed
torch, and the torch/Tensor operators considered (`_CONSIDERED`), each in `CATALOGUE` or excluded with a
code of `REASONS` and a one-line note.

torch is imported only when `sweep()` runs, so importing the catalogue stays torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_agent.synth.catalogue.base import CATALOGUE, SRC_F, SRC_NN, SRC_T, SRC_TT

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
        add(f"torch.nn.{short}", SRC_NN, _NN_EXCLUDED, short, False)
    for short in _f_names():
        add(f"torch.nn.functional.{short}", SRC_F, _F_EXCLUDED, short, True)
    for name, (code, note) in _CONSIDERED.items():
        if name not in CATALOGUE and _resolve(name) is not None:
            source = SRC_TT if name.startswith("torch.Tensor.") else SRC_T
            entries[name] = SweepEntry(name, source, False, code, note or REASONS[code])
    for name, op in CATALOGUE.items():
        if name not in entries:
            entries[name] = SweepEntry(name, op.source, True, None)
    return [entries[n] for n in sorted(entries)]
