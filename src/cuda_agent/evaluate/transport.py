"""Moving tensors between the trusted judge and the candidate's process, as data only.

A value (a task's inputs, a model's outputs, a state_dict) crosses the process boundary as a *spec*:
JSON describing its structure (tensors, lists, tuples, dicts of str keys, Python scalars) in which
each tensor carries a *buffer descriptor* instead of its bytes:

- CPU: a file in the evaluation's shared-memory directory, mapped by both processes;
- CUDA: the CUDA IPC handle of the device allocation (segment) that holds the tensor, with the
  tensor's offset in it. The judge maps each segment once per evaluation and views every later
  tensor in it without another driver call; the host's driver serialises IPC opens and closes
  with every other process's context creation, on all GPUs, so a map per checked output was the
  evaluation's costliest driver traffic. Where a segment has no IPC handle (an allocator the
  candidate configured otherwise), torch's own sharing (`_share_cuda_`, as torch.multiprocessing
  uses it, without its pickles) carries the tensor instead; `segments=False` always uses it.

Direction matters for the trust boundary: buffers are always *owned by the candidate's process* and
opened by the judge, never the reverse, so the candidate never holds a mapping of the judge's memory
(where reference outputs live). The judge clones what it opens at once and validates every number in
a descriptor (dtype, bounds, path) before use; a segment's bounds come from the driver, not from the
descriptor. No event orders the judge's reads after the candidate's writes: the candidate's process
synchronises its device before it answers any command.
"""

from __future__ import annotations

import base64
import ctypes
import gc
import itertools
import os
import weakref
from pathlib import Path
from typing import Any, Callable

import torch

DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
        "uint8", "bool", "complex64", "complex128",
    )
}


class SpecError(ValueError):
    """A spec or descriptor that does not describe a valid value (from a buggy or hostile peer)."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: Any) -> torch.dtype:
    if not isinstance(name, str) or name not in DTYPES:
        raise SpecError(f"unsupported dtype {name!r}")
    return DTYPES[name]


def _ints(x: Any, what: str) -> list[int]:
    if not isinstance(x, list) or not all(type(v) is int and v >= 0 for v in x):
        raise SpecError(f"{what} must be a list of non-negative ints, got {x!r}")
    return x


# --- describing values (no data) -------------------------------------------------------------------

def tensor_spec(t: torch.Tensor) -> dict[str, Any]:
    """A tensor's spec without data: what the peer must allocate to receive it."""
    return {"t": "tensor", "dtype": dtype_name(t.dtype), "shape": list(t.shape), "stride": list(t.stride())}


def describe(value: Any, leaf: Callable[[torch.Tensor], dict[str, Any]] = tensor_spec) -> dict[str, Any]:
    """The spec of `value`, each tensor written by `leaf`: by default without buffers (what the peer
    must allocate); `Exporter.export` gives descriptors of the data, `inline_tensor` the bytes."""
    if isinstance(value, torch.Tensor):
        return leaf(value)
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": value}
    if isinstance(value, float):
        return {"t": "float", "v": value}
    if value is None:
        return {"t": "none"}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if type(value) in (list, tuple):  # exact types: a namedtuple would not rebuild as itself
        return {"t": type(value).__name__, "items": [describe(v, leaf) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"t": "dict", "items": {k: describe(v, leaf) for k, v in value.items()}}
    return {"t": "other", "type": type(value).__qualname__}


def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors in `value` in spec order (depth first)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_of(v)]
    return []


# --- buffers ---------------------------------------------------------------------------------------

class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]  # CU_IPC_HANDLE_SIZE


class _Driver:
    """The CUDA driver's IPC calls, through ctypes on libcuda (which torch has loaded already). They
    act on the calling thread's current context: torch's primary context of the device set with
    `torch.cuda.set_device`."""

    _lib: Any = None

    def __init__(self) -> None:
        if _Driver._lib is None:
            lib = ctypes.CDLL("libcuda.so.1")
            u64, p_u64 = ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)
            lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), u64]
            lib.cuIpcOpenMemHandle_v2.argtypes = [p_u64, _IpcHandle, ctypes.c_uint]
            lib.cuIpcCloseMemHandle.argtypes = [u64]
            lib.cuMemGetAddressRange_v2.argtypes = [p_u64, ctypes.POINTER(ctypes.c_size_t), u64]
            lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            _Driver._lib = lib
        self.lib = _Driver._lib

    def _check(self, rc: int, what: str) -> None:
        if rc:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what}: {(name.value or b'CUDA error').decode()} ({rc})")

    def address_range(self, ptr: int) -> tuple[int, int]:
        """(base, bytes) of the allocation that holds device address `ptr`."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._check(self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr),
                    "cuMemGetAddressRange")
        return base.value, size.value

    def handle(self, base: int) -> bytes:
        h = _IpcHandle()
        self._check(self.lib.cuIpcGetMemHandle(ctypes.byref(h), base), "cuIpcGetMemHandle")
        return ctypes.string_at(ctypes.addressof(h), ctypes.sizeof(h))  # .reserved would stop at a NUL

    def open(self, handle: bytes) -> int:
        h = _IpcHandle.from_buffer_copy(handle)
        ptr = ctypes.c_uint64()
        self._check(self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1),  # lazy peer access
                    "cuIpcOpenMemHandle")
        return ptr.value

    def close(self, ptr: int) -> None:
        self._check(self.lib.cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle")


class _Mapped:
    """A mapped segment as torch sees it (`__cuda_array_interface__`): bytes, without ownership.
    Every tensor viewing the segment keeps this object alive, so a dead weak reference to it says
    that no view is left and the mapping may close."""

    def __init__(self, ptr: int, size: int) -> None:
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


class Exporter:
    """Candidate side: allocates exportable tensors and exports existing ones."""

    def __init__(self, device: torch.device, shm_dir: Path, segments: bool = True):
        self.device = device
        self.shm_dir = Path(shm_dir)
        self._driver = _Driver() if segments and device.type == "cuda" else None
        self._torch_shared = False  # something went through `_share_cuda_` since the last release
        self._ids = itertools.count()
        self._keep: list[Any] = []  # exported storages stay alive until release()
        self._owned: list[torch.Tensor] = []  # buffers from empty(): alive until release(everything=True)

    def empty(self, spec: dict[str, Any]) -> torch.Tensor:
        dtype = _dtype(spec["dtype"])
        shape, stride = _ints(spec["shape"], "shape"), _ints(spec["stride"], "stride")
        if self.device.type == "cuda":
            return torch.empty_strided(shape, stride, dtype=dtype, device=self.device)
        nbytes = _storage_nbytes(shape, stride, dtype)
        if nbytes == 0:
            return torch.empty_strided(shape, stride, dtype=dtype)
        return self._shm_tensor(nbytes, owned=True)[:nbytes].view(dtype).as_strided(shape, stride)

    def _shm_tensor(self, nbytes: int, owned: bool = False) -> torch.Tensor:
        path = self.shm_dir / f"{'own' if owned else 'out'}{os.getpid()}_{next(self._ids)}"
        with open(path, "wb") as f:
            f.truncate(nbytes)
        t = torch.from_file(str(path), shared=True, size=nbytes, dtype=torch.uint8)
        t.cuda_agent_path = str(path)  # type: ignore[attr-defined]
        (self._owned if owned else self._keep).append(t)
        return t

    def export(self, t: torch.Tensor) -> dict[str, Any]:
        """Descriptor of tensor `t`. CPU tensors not already in shared memory are copied into it."""
        spec = tensor_spec(t)
        if t.device.type == "cuda":
            storage = t.untyped_storage()
            if self._driver is not None and (buf := self._segment(storage)) is not None:
                self._keep.append(storage)
                spec["buf"] = {**buf, "size_bytes": storage.nbytes(), "storage_offset": t.storage_offset()}
                return spec
            self._torch_shared = True
            (device, handle, size_bytes, offset_bytes, ref_handle, ref_offset,
             event_handle, event_sync) = storage._share_cuda_()
            self._keep.append(storage)
            spec["buf"] = {
                "kind": "cuda_ipc", "device": device, "handle": _b64(handle),
                "size_bytes": size_bytes, "offset_bytes": offset_bytes,
                "ref_handle": _b64(ref_handle), "ref_offset": ref_offset,
                "event_handle": _b64(event_handle), "event_sync": bool(event_sync),
                "storage_offset": t.storage_offset(),
            }
            return spec
        # CPU: copy into a fresh shared file, laid out contiguously.
        src = t.detach()
        nbytes = src.numel() * src.element_size()
        flat = self._shm_tensor(max(nbytes, 1))
        if nbytes:
            flat[:nbytes].view(src.dtype).view(src.shape).copy_(src)
        spec["stride"] = list(_contiguous_strides(list(src.shape)))
        spec["buf"] = {"kind": "shm", "path": flat.cuda_agent_path, "size_bytes": nbytes,
                       "storage_offset": 0}
        return spec

    def _segment(self, storage: Any) -> dict[str, Any] | None:
        """The storage's allocation as an IPC handle and an offset, or None where the driver has no
        handle for it (then torch's sharing carries it)."""
        ptr = storage.data_ptr()
        if not ptr:
            return None
        try:
            base, _ = self._driver.address_range(ptr)
            handle = self._driver.handle(base)
        except RuntimeError:
            return None
        return {"kind": "cuda_seg", "handle": _b64(handle), "offset_bytes": ptr - base}

    def export_allocated(self, t: torch.Tensor) -> dict[str, Any]:
        """Descriptor of a tensor made by `empty()`, without copying (so writes reach it)."""
        if t.device.type == "cuda":
            return self.export(t)
        spec = tensor_spec(t)
        base = next((k for k in self._owned if k.data_ptr() == t.untyped_storage().data_ptr()), None)
        if base is None:  # zero-sized tensor: nothing to share
            spec["buf"] = {"kind": "none"}
            return spec
        spec["buf"] = {"kind": "shm", "path": base.cuda_agent_path,
                       "size_bytes": base.numel(), "storage_offset": t.storage_offset()}
        return spec

    def release(self, everything: bool = False) -> None:
        """Drop the exports (the judge has received them); with `everything`, the buffers from
        `empty()` too."""
        self._keep.clear()
        prefixes = ("out", "own") if everything else ("out",)
        if everything:
            self._owned.clear()
        for prefix in prefixes:
            for p in self.shm_dir.glob(f"{prefix}{os.getpid()}_*"):
                p.unlink(missing_ok=True)
        if self._torch_shared:
            self._torch_shared = False
            torch.cuda.ipc_collect()


class Importer:
    """Judge side: opens descriptors from the candidate's process, after validating them."""

    def __init__(self, device: torch.device, shm_dir: Path):
        self.device = device
        self.shm_dir = Path(shm_dir).resolve()
        self._open: list[Any] = []
        self._pinned: list[Any] = []  # buffers kept open across close() (the candidate's input slots)
        self._segments: dict[bytes, tuple[torch.Tensor, Any, int]] = {}  # handle: (bytes, ref, address)
        self._torch_opened = False

    @property
    def segment_bytes(self) -> list[int]:
        """The size of each IPC segment mapped now, as the driver reports it (one per allocation)."""
        return [seg[0].numel() for seg in self._segments.values()]

    def open_pinned(self, spec: dict[str, Any]) -> torch.Tensor:
        """`open`, kept mapped until `close(everything=True)`."""
        t = self.open(spec)
        self._pinned.append(self._open.pop())
        return t

    def open(self, spec: dict[str, Any]) -> torch.Tensor:
        """A tensor *aliasing* the candidate's buffer (writes reach the candidate)."""
        if not isinstance(spec, dict) or spec.get("t") != "tensor":
            raise SpecError("expected a tensor spec")
        dtype = _dtype(spec.get("dtype"))
        shape, stride = _ints(spec.get("shape"), "shape"), _ints(spec.get("stride"), "stride")
        if len(shape) != len(stride):
            raise SpecError("shape and stride differ in length")
        buf = spec.get("buf")
        if not isinstance(buf, dict):
            raise SpecError("tensor spec without a buffer")
        offset = buf.get("storage_offset", 0)
        if type(offset) is not int or offset < 0:
            raise SpecError("bad storage_offset")
        need = _storage_nbytes(shape, stride, dtype, offset)
        kind = buf.get("kind")
        if kind == "none":
            if need:
                raise SpecError("empty buffer for a non-empty tensor")
            return torch.empty_strided(shape, stride, dtype=dtype, device=self.device)
        size = buf.get("size_bytes")
        if type(size) is not int or size < need:
            raise SpecError(f"buffer of {size} bytes cannot hold a tensor needing {need}")
        if kind == "shm":
            path = Path(str(buf.get("path"))).resolve()
            if path.parent != self.shm_dir or not path.is_file() or path.stat().st_size < size:
                raise SpecError(f"buffer path {buf.get('path')!r} is not in this evaluation's directory")
            raw = torch.from_file(str(path), shared=True, size=max(size, 1), dtype=torch.uint8)
            self._open.append(raw)
            return raw[: (size // dtype.itemsize) * dtype.itemsize].view(dtype).as_strided(
                shape, stride, offset)
        if kind == "cuda_ipc":
            if self.device.type != "cuda":
                raise SpecError("CUDA buffer offered to a CPU evaluation")
            try:
                storage = torch.UntypedStorage._new_shared_cuda(
                    self.device.index or 0, _unb64(buf["handle"]), size, int(buf["offset_bytes"]),
                    _unb64(buf["ref_handle"]), int(buf["ref_offset"]),
                    _unb64(buf.get("event_handle")), bool(buf.get("event_sync")),
                )
            except (KeyError, TypeError, ValueError, RuntimeError) as exc:
                raise SpecError(f"cannot open CUDA IPC buffer: {exc}") from None
            self._open.append(storage)
            self._torch_opened = True
            t = torch.empty(0, dtype=dtype, device=self.device)
            t.set_(storage, offset, shape, stride)
            return t
        if kind == "cuda_seg":
            t = self._segment_view(buf, dtype, shape, stride, offset)
            self._open.append(t)
            return t
        raise SpecError(f"unknown buffer kind {kind!r}")

    def _segment_view(self, buf: dict[str, Any], dtype: torch.dtype, shape: list[int], stride: list[int],
                      offset: int) -> torch.Tensor:
        """A view into a segment of the candidate's, mapped on first sight for the evaluation. The
        bounds are the allocation's as the driver reports it in this process."""
        if self.device.type != "cuda":
            raise SpecError("CUDA buffer offered to a CPU evaluation")
        handle, at = _unb64(buf.get("handle")), buf.get("offset_bytes")
        if handle is None or len(handle) != ctypes.sizeof(_IpcHandle):
            raise SpecError("bad IPC handle")
        if type(at) is not int or at < 0 or at % dtype.itemsize:
            raise SpecError(f"bad offset_bytes {at!r} for {dtype_name(dtype)}")
        if handle not in self._segments:
            if not self._segments:  # the driver's calls need this thread's context: torch's, made now
                torch.cuda.synchronize(self.device)
            driver = _Driver()
            try:
                ptr = driver.open(handle)
            except RuntimeError as exc:
                raise SpecError(f"cannot open CUDA IPC buffer: {exc}") from None
            try:
                _, size = driver.address_range(ptr)
                mapped = _Mapped(ptr, size)
                raw = torch.as_tensor(mapped, device=self.device)
                if raw.data_ptr() != ptr:  # a copy (another device), not a view
                    raise RuntimeError(f"the segment is not on {self.device}")
            except Exception as exc:
                driver.close(ptr)
                raise SpecError(f"cannot view CUDA IPC buffer: {exc}") from None
            self._segments[handle] = (raw, weakref.ref(mapped), ptr)
        raw = self._segments[handle][0]
        whole = raw[: raw.numel() // dtype.itemsize * dtype.itemsize].view(dtype)
        first = at // dtype.itemsize + offset
        if _storage_nbytes(shape, stride, dtype, first) > whole.numel() * dtype.itemsize:
            raise SpecError(f"tensor at byte {at} (+{offset} elements) with shape {shape} and stride "
                            f"{stride} runs past its segment of {raw.numel()} bytes")
        return whole.as_strided(shape, stride, first)

    def close(self, everything: bool = False) -> int:
        """Drop the views of the last command (`everything`: also the pinned input slots, and unmap
        every segment: the evaluation's end). Returns how many segments stay mapped because a view
        of them is still referenced somewhere (the process must not judge again)."""
        self._open.clear()
        if self._torch_opened:
            self._torch_opened = False
            torch.cuda.ipc_collect()
        if not everything:
            return 0
        self._pinned.clear()
        if not self._segments:
            return 0
        torch.cuda.synchronize(self.device)  # no kernel still reads a mapping
        segments, self._segments = self._segments, {}
        refs = [(ref, ptr) for _, ref, ptr in segments.values()]
        del segments
        if any(ref() is not None for ref, _ in refs):
            gc.collect()  # a view held only by a reference cycle
        held, driver = 0, _Driver()
        for ref, ptr in refs:
            if ref() is None:
                driver.close(ptr)
            else:
                held += 1
        return held


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s: Any) -> bytes | None:
    if s is None:
        return None
    if not isinstance(s, str):
        raise SpecError("bad handle")
    return base64.b64decode(s)


def _contiguous_strides(shape: list[int]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return list(reversed(strides))


def _storage_nbytes(shape: list[int], stride: list[int], dtype: torch.dtype, offset: int = 0) -> int:
    if any(n == 0 for n in shape):
        return 0
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride))
    return (last + 1) * dtype.itemsize


# --- whole values ----------------------------------------------------------------------------------

def build(spec: Any, make_tensor) -> Any:
    """Rebuild a value from its spec; `make_tensor(tensor_spec)` supplies each tensor."""
    if not isinstance(spec, dict):
        raise SpecError("spec must be an object")
    t = spec.get("t")
    if t == "tensor":
        return make_tensor(spec)
    if t in ("int", "float", "bool", "str"):
        v = spec.get("v")
        if type(v) is not {"int": int, "float": float, "bool": bool, "str": str}[t]:
            if not (t == "float" and type(v) is int):
                raise SpecError(f"bad {t} literal {v!r}")
        return v
    if t == "none":
        return None
    if t in ("list", "tuple"):
        items = spec.get("items")
        if not isinstance(items, list):
            raise SpecError("list spec without items")
        out = [build(s, make_tensor) for s in items]
        return out if t == "list" else tuple(out)
    if t == "dict":
        items = spec.get("items")
        if not isinstance(items, dict):
            raise SpecError("dict spec without items")
        return {k: build(s, make_tensor) for k, s in items.items()}
    raise SpecError(f"value of kind {t!r} ({spec.get('type', '?')}) cannot cross the boundary")


# --- small values carried inside the message itself ------------------------------------------------

INLINE_LIMIT = 16 * 1024 * 1024


def inline_tensor(t: torch.Tensor) -> dict[str, Any]:
    """A tensor's spec with its bytes inside the message (a task's init inputs)."""
    t = t.detach().cpu().contiguous()
    if t.numel() * t.element_size() > INLINE_LIMIT:
        raise SpecError(f"tensor of {t.numel() * t.element_size()} bytes is too large to inline")
    spec = tensor_spec(t)
    spec["data"] = base64.b64encode(t.reshape(-1).view(torch.uint8).numpy().tobytes()).decode() \
        if t.numel() else ""
    return spec


def from_inline(spec: Any, device: torch.device) -> Any:
    def make(s: dict[str, Any]) -> torch.Tensor:
        dtype = _dtype(s.get("dtype"))
        shape = _ints(s.get("shape"), "shape")
        raw = base64.b64decode(s.get("data") or "")
        n = 1
        for d in shape:
            n *= d
        if len(raw) != n * dtype.itemsize:
            raise SpecError("inline tensor data does not match its shape")
        if n == 0:
            return torch.empty(shape, dtype=dtype, device=device)
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype)
        return flat.reshape(shape).to(device)

    return build(spec, make)
