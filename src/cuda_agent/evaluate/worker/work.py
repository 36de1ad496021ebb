"""The reference's work, counted in the judge while it runs the reference once, and the device's
peaks measured where no table has them: what the speed of light (evaluate/sol.py) is made from.

Counted at the dispatcher (a `TorchDispatchMode`), so every aten operator the reference's forward
reaches is seen once, whatever Python built it:
- FLOPs of matrix products, convolutions and attention by torch's own formulas
  (`torch.utils.flop_counter.flop_registry`), in the class of their inputs' dtype: `tensor_tf32`
  (float32, which the tensor cores take as TF32), `tensor_16` (float16, bfloat16), `tensor_8` (float8),
  `fp64`;
- FLOPs of elementwise operators (the `pointwise` tag) as one per output element, and of reductions,
  normalisations, pooling and scans as one per input element: the `vector` class (`fp64` for float64);
- views, copies, indexing and tensor creation: no FLOPs;
- anything else (custom operators, sorting, data-dependent operators) is not counted and is named
  in `uncounted`: the FLOPs are then a lower bound, and said to be.

Bytes: the least a kernel must move: the inputs, the outputs and the module's parameters and
buffers, each storage once.
"""

from __future__ import annotations

import time
from typing import Any, Callable

# Reductions, normalisations, pooling and scans: one FLOP per element of the first input.
_PER_INPUT = {
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "aminmax", "logsumexp",
    "var", "std", "var_mean", "std_mean", "norm", "linalg_vector_norm", "cumsum", "cumprod", "cummax",
    "cummin", "logcumsumexp", "_softmax", "_log_softmax", "softmax", "log_softmax", "native_layer_norm",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "native_group_norm", "_fused_rms_norm", "rms_norm", "max_pool1d", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d", "max_pool2d", "all", "any",
    "count_nonzero", "dist", "_cdist_forward", "mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss",
    "nll_loss_forward", "nll_loss2d_forward", "binary_cross_entropy", "kl_div", "_weight_norm_interface",
    "cosine_similarity", "_euclidean_dist", "upsample_nearest1d", "upsample_nearest2d", "upsample_bilinear2d",
    "upsample_nearest3d", "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bilinear2d_aa",
    "_prelu_kernel", "glu", "_safe_softmax",
    # activations some builds dispatch without the pointwise tag: one FLOP per element, as elementwise
    "hardswish", "hardsigmoid", "hardtanh", "gelu", "silu", "mish", "elu", "selu", "celu", "leaky_relu",
    "softplus", "softshrink", "hardshrink", "threshold", "logit", "rrelu_with_noise", "log_sigmoid_forward",
}
# No arithmetic: creation, views, copies, layout and indexing.
_NO_FLOPS = {
    "empty", "empty_strided", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange",
    "linspace", "eye", "rand", "randn", "rand_like", "randn_like", "randint", "normal", "bernoulli",
    "uniform", "clone", "copy", "copy_", "_to_copy", "contiguous", "detach", "alias", "lift_fresh",
    "cat", "stack", "split", "split_with_sizes", "chunk", "unbind", "unsafe_split", "unsafe_split_with_sizes",
    "unsafe_chunk", "index", "index_select", "gather",
    "scatter", "scatter_add", "index_put", "index_add", "index_copy", "slice_scatter", "select_scatter",
    "masked_scatter", "take", "flip", "roll", "repeat", "tile", "constant_pad_nd", "reflection_pad1d",
    "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
    "tril", "triu", "fill", "fill_", "zero_", "set_", "_unsafe_view", "unfold", "im2col", "col2im",
    "embedding", "one_hot", "diag", "diag_embed", "diagonal_copy", "_reshape_alias", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "tensor_split", "narrow_copy",
    "_local_scalar_dense", "item", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dropout",
    "native_dropout", "feature_dropout", "lift", "resize_", "_unsafe_index",
}
# Sizes or work that depend on the data: what a count cannot say in advance.
_DATA_DEPENDENT = {"nonzero", "unique", "_unique", "_unique2", "unique_dim", "unique_consecutive",
                   "masked_select", "sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode",
                   "searchsorted", "bucketize", "histc", "bincount", "multinomial"}


def _dtype_class(dtype: Any, tensor_op: bool) -> str:
    import torch

    if dtype == torch.float64:
        return "fp64"
    if not tensor_op:
        return "vector"
    if dtype in (torch.float16, torch.bfloat16):
        return "tensor_16"
    if "float8" in str(dtype):
        return "tensor_8"
    return "tensor_tf32"


def _tensors(tree: Any) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def storage_bytes(tensors: list[Any]) -> int:
    """Bytes of the distinct storages the tensors view (each counted once, at the size the tensor
    views: a view of a larger buffer moves only what it shows)."""
    seen: dict[tuple[int, int], int] = {}
    for t in tensors:
        if t.device.type == "meta":
            key = (id(t), 0)
        else:
            key = (t.untyped_storage().data_ptr(), t.storage_offset())
        seen[key] = max(seen.get(key, 0), t.numel() * t.element_size())
    return sum(seen.values())


class WorkCounter:
    """A dispatch mode counting the FLOPs of every aten operator run inside it (the module's
    docstring says how); `result(...)` adds the bytes and says what was not counted."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.flop_counter import flop_registry

        counter = self
        self.flops: dict[str, int] = {}
        self.uncounted: dict[str, int] = {}
        self.ops = 0

        class _Mode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # Else torch wraps this mode's dispatch in `torch._disable_dynamo`, whose first call
                # imports torch._dynamo, which replaces `torch.manual_seed`: the judge would then find
                # its process changed and not serve another evaluation (judge.py, `cmd_reset`).
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                try:
                    counter._count(func, args, kwargs or {}, out, flop_registry)
                except Exception:  # a formula that does not take these arguments: not counted, said so
                    counter.uncounted[str(func.overloadpacket)] = counter.uncounted.get(str(func.overloadpacket), 0) + 1
                return out

        self._mode = _Mode()

    def __enter__(self) -> "WorkCounter":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)

    def _add(self, cls: str, n: int) -> None:
        self.flops[cls] = self.flops.get(cls, 0) + int(n)

    def _count(self, func: Any, args: tuple, kwargs: dict, out: Any, registry: dict) -> None:
        import torch

        self.ops += 1
        packet = func.overloadpacket
        ins = _tensors(args)
        outs = _tensors(out)
        first = ins[0] if ins else (outs[0] if outs else None)
        if packet in registry:
            dtype = first.dtype if first is not None else torch.float32
            self._add(_dtype_class(dtype, True), registry[packet](*args, **kwargs, out_val=out))
            return
        name = packet.__name__ if hasattr(packet, "__name__") else str(packet).split(".")[-1]
        namespace = getattr(packet, "_qualified_op_name", str(packet)).split("::")[0]
        if namespace not in ("aten", "prims"):
            self.uncounted[str(packet)] = self.uncounted.get(str(packet), 0) + 1
            return
        if "scaled_dot_product" in name and len(ins) >= 3:  # a backend's attention torch has no formula for
            from torch.utils.flop_counter import sdpa_flop_count

            q, k, v = ins[:3]
            self._add(_dtype_class(q.dtype, True), sdpa_flop_count(q.shape, k.shape, v.shape))
            return
        base = name.rstrip("_")
        if name in _DATA_DEPENDENT or base in _DATA_DEPENDENT:
            self.uncounted[str(packet)] = self.uncounted.get(str(packet), 0) + 1
            return
        if func.is_view or name in _NO_FLOPS or base in _NO_FLOPS or not (ins or outs):
            return
        if torch.Tag.pointwise in func.tags:
            dtype = outs[0].dtype if outs else first.dtype
            self._add(_dtype_class(dtype, False), sum(t.numel() for t in outs[:1]))
            return
        if name in _PER_INPUT or base in _PER_INPUT:
            self._add(_dtype_class(first.dtype, False), first.numel())
            return
        self.uncounted[str(packet)] = self.uncounted.get(str(packet), 0) + 1

    def result(self, inputs: list[Any], output: Any, module: Any) -> dict[str, Any]:
        """The work of the call counted: {flops: {class: n}, bytes, bytes_by: {...}, uncounted, ops}."""
        state = list(module.state_dict(keep_vars=True).values()) if hasattr(module, "state_dict") else []
        by = {"inputs": storage_bytes(_tensors(inputs)), "outputs": storage_bytes(_tensors(output)),
              "parameters": storage_bytes([t for t in state if hasattr(t, "untyped_storage")])}
        return {"flops": {k: v for k, v in sorted(self.flops.items()) if v}, "bytes": sum(by.values()),
                "bytes_by": by, "uncounted": sorted(self.uncounted), "ops": self.ops}


def counted(run: Callable[[], Any], inputs: list[Any], module: Any) -> tuple[Any, dict[str, Any]]:
    """`run()`'s output, and the work it did (`WorkCounter.result`); a count that fails to add up
    leaves the work unknown (`{"error": ...}`), not the call. `run`'s own exceptions propagate."""
    counter = WorkCounter()
    with counter:  # (the operators' counts never raise: what fails to count is named)
        out = run()
    try:
        return out, counter.result(inputs, out, module)
    except Exception as exc:
        return out, {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _best_s(fn, repeat: int, sync) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_peaks(device: Any) -> dict[str, Any]:
    """The device's DRAM bandwidth (a copy of a buffer larger than its caches: read and write) and
    its matrix-product FLOP/s per class, measured here (each the best of a few runs). On a CPU every
    class is its FP32 matrix product (it has no tensor cores) and FP64 is half of it."""
    import torch

    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    n_bytes = (1 << 30) if cuda else (128 << 20)
    a = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    b = torch.empty_like(a)
    dram = 2 * n_bytes / _best_s(lambda: b.copy_(a), 5, sync)
    del a, b

    def mm_rate(dtype: Any, n: int, tf32: bool = False) -> float:
        x = torch.randn(n, n, device=device).to(dtype)
        y = torch.randn(n, n, device=device).to(dtype)
        if not cuda:
            return 2 * n ** 3 / _best_s(lambda: torch.mm(x, y), 5, sync)
        # cuBLAS's float32 precision for this measure, then written back as it was, through torch's
        # newer switch only (the older one would rewrite the newer's state: timing.tf32_matmul)
        m = torch.backends.cuda.matmul
        old = m.fp32_precision
        m.fp32_precision = "tf32" if tf32 else "ieee"
        try:
            return 2 * n ** 3 / _best_s(lambda: torch.mm(x, y), 5, sync)
        finally:
            m.fp32_precision = old

    if cuda:
        fp32 = mm_rate(torch.float32, 8192)
        peaks = {"dram_bytes_s": dram, "vector": fp32, "tensor_tf32": mm_rate(torch.float32, 8192, tf32=True),
                 "tensor_16": mm_rate(torch.bfloat16, 8192), "fp64": mm_rate(torch.float64, 4096)}
        peaks["tensor_8"] = 2 * peaks["tensor_16"]
    else:
        fp32 = mm_rate(torch.float32, 1024)
        peaks = {"dram_bytes_s": dram, "vector": fp32, "tensor_tf32": fp32, "tensor_16": fp32,
                 "tensor_8": fp32, "fp64": fp32 / 2}
    return {k: float(f"{v:.4g}") for k, v in peaks.items()}
