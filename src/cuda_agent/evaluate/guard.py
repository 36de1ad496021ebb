"""Runtime guards in the candidate's process: the second layer, between the static checks and the
process boundary.

They run inside the process the candidate controls, so a determined candidate can disarm them; they
exist to turn what the static checks could not see (names built at run time, ATen called from C++)
into a verdict with a reason. What they cannot guarantee, the judge and the harness check from
outside (docs/threat-model.md).

- `OpGuard`: a dispatcher-level mode active during guarded calls of `forward` (profile strict). It
  sees every ATen op, from Python or from the candidate's C++ (the mode is thread-local state that
  C++ dispatcher calls honour), and rejects compute ops: only allocation, views, metadata and
  dtype/layout conversions are allowed. It also counts calls into the candidate's own extensions
  (pybind functions and custom ops), so that a forward that never calls them is a decoy.
- `Integrity`: identities of the functions the evaluation relies on in this process (timers,
  synchronisation, comparisons, our own worker code), taken before candidate code is imported and
  compared after every call.
- Thread audit: Python threads alive after a call are work hidden from the timer.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

from cuda_agent.evaluate.result import Code

# ATen ops allowed inside forward in strict: allocation, initialisation of fresh buffers, views,
# metadata, dtype/layout/device conversion. Anything else at the dispatcher is PyTorch compute.
ALLOWED_ATEN = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "zero_", "fill_",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "_to_copy", "to", "copy_", "clone", "contiguous",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute",
    "expand", "expand_as", "squeeze", "unsqueeze", "slice", "select", "split", "split_with_sizes",
    "unbind", "narrow", "alias", "detach", "view_as", "view_as_real", "view_as_complex", "unflatten",
    "flatten", "movedim", "diagonal", "unfold", "chunk", "record_stream", "is_contiguous",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "dim", "numel",
    "is_same_size", "_local_scalar_dense", "item", "set_", "resize_", "_has_compatible_shallow_copy_type",
}
CORE_NAMESPACES = {"aten", "prims"}
_STDLIB = set(sys.stdlib_module_names) | {"builtins"}


class OpGuard:
    """Records forbidden ops and extension calls during one guarded call."""

    def __init__(self, known_modules: set[str], strict: bool):
        # Calls of builtins from any module the process did not know before candidate code ran (and
        # not from the standard library or torch) are calls into the candidate's extensions: torch's
        # load_inline does not even register its modules in sys.modules.
        self.known = known_modules
        self.strict = strict
        self.forbidden: list[str] = []
        self.ext_calls = 0

    def _on_profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            mod = getattr(arg, "__module__", None)
            if (isinstance(mod, str) and mod not in self.known and mod.split(".")[0] not in _STDLIB
                    and not mod.startswith("torch") and not _installed(mod)):
                self.ext_calls += 1

    def call(self, fn: Callable[..., Any], args: list[Any]) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode

        guard = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                ns = getattr(func, "namespace", "aten")
                name = func.overloadpacket.__name__
                if ns not in CORE_NAMESPACES:
                    guard.ext_calls += 1  # the candidate's own op (TORCH_LIBRARY)
                elif guard.strict and name not in ALLOWED_ATEN:
                    guard.forbidden.append(f"{ns}.{name}")
                return func(*args, **(kwargs or {}))

        previous = sys.getprofile()
        hook = self._on_profile  # one bound-method object, to compare by identity
        sys.setprofile(hook)
        try:
            with _Mode():
                out = fn(*args)
        finally:
            hooked = sys.getprofile()
            sys.setprofile(previous)
        if hooked is not hook:
            raise GuardFailure(Code.HARNESS_PATCH, "the candidate replaced the evaluator's profile hook")
        return out

    def verdict(self) -> "GuardFailure | None":
        if self.forbidden:
            ops = sorted(set(self.forbidden))
            return GuardFailure(Code.TORCH_FALLBACK,
                                f"forward called PyTorch compute ops: {', '.join(ops[:12])}"
                                f"{' ...' if len(ops) > 12 else ''}. In the strict policy forward may only "
                                "call your extension, allocate (torch.empty*), take views and read metadata; "
                                "the extension may not call ATen compute either. Move that work into your "
                                "kernels (or re-score with --policy kernelbench)")
        if self.strict and self.ext_calls == 0:
            return GuardFailure(Code.DECOY_KERNEL,
                                "forward never called into the candidate's compiled extension: its kernels "
                                "are a decoy. Call your extension's ops from forward")
        return None


def _installed(name: str) -> bool:
    """A module of an installed package (numpy, ...), not an extension the candidate built."""
    mod = sys.modules.get(name) or sys.modules.get(name.split(".")[0])
    path = str(getattr(mod, "__file__", "") or "")
    return bool(path) and any(path.startswith(p) for p in _SITE)


_SITE = tuple({sys.prefix, sys.base_prefix, *(p for p in sys.path if "-packages" in p)})


class GuardFailure(Exception):
    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code, self.message = code, message


# Functions this process relies on, by dotted path: timers, synchronisation, tensor export, the
# protocol. Looked up again after every call; any replacement is a harness patch. (Comparisons and
# input generation happen in the judge: patching them here changes nothing. torch itself rebinds a
# few functions when its submodules load, e.g. torch._dynamo wraps torch.manual_seed: not watched.)
WATCHED = (
    "time.perf_counter", "time.monotonic", "time.time",
    "torch.cuda.synchronize", "torch.cuda.current_stream", "torch.cuda.Event",
    "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time", "torch.cuda.Event.synchronize",
    "torch.cuda.Stream.synchronize",
    "torch.Tensor.copy_", "torch.Tensor.clone", "torch.Tensor.__eq__", "torch.Tensor.data_ptr",
    "torch.Tensor.untyped_storage", "torch.Tensor.__class__", "torch.Tensor.storage_offset",
    "torch.UntypedStorage._share_cuda_", "torch.UntypedStorage.data_ptr", "torch.UntypedStorage.nbytes",
    "torch.nn.Module.__call__", "torch.nn.Module._call_impl", "torch.nn.Module.load_state_dict",
    "torch.nn.Module.state_dict", "builtins.isinstance", "builtins.type", "builtins.len",
    "builtins.print", "json.dumps", "json.loads", "sys.getprofile", "sys.setprofile",
    "threading.active_count", "os._exit",
    "cuda_agent.evaluate.channel.Channel.send", "cuda_agent.evaluate.channel.Channel.recv",
    "cuda_agent.evaluate.transport.Exporter.export", "cuda_agent.evaluate.transport.Exporter.empty",
    "cuda_agent.evaluate.transport.Exporter._segment", "cuda_agent.evaluate.transport._Driver.handle",
    "cuda_agent.evaluate.transport._Driver.address_range", "cuda_agent.evaluate.transport.describe",
    "cuda_agent.evaluate.timing.Timer.sync", "cuda_agent.evaluate.timing.Timer.flush",
    "cuda_agent.evaluate.timing.Timer.touch",
    "cuda_agent.evaluate.guard.OpGuard.call", "cuda_agent.evaluate.guard.Integrity.check",
    "cuda_agent.evaluate.worker.Runner.cmd_run", "cuda_agent.evaluate.worker.timed_call",
    "cuda_agent.evaluate.worker.serve",
)


def resolve(path: str) -> Any:
    """The object at dotted `path` (a module's attribute, at any depth) among the modules already
    imported, or None; never imports anything."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        mod = sys.modules.get(".".join(parts[:i]))
        if mod is not None:
            obj = mod
            for p in parts[i:]:
                obj = getattr(obj, p, None)
            return obj
    return None


# torch's public namespaces: replacing one of their functions or classes with code of the
# candidate's is a harness patch (the judge and the baselines run elsewhere, so it could only
# mislead this process; the verdict says so plainly). torch rebinds a few names itself as its
# submodules load (torch._dynamo wraps torch.manual_seed): replacements from torch's own modules
# are not flagged.
NAMESPACES = ("torch", "torch.Tensor", "torch._C.TensorBase", "torch.nn.Module", "torch.nn.functional",
              "torch.nn.init", "torch.linalg", "torch.fft", "torch.special", "torch.cuda", "torch.backends")
_SCALARS = (bool, int, float, str, bytes, type(None))


def namespace_objects(name: str) -> dict[str, Any]:
    """The functions, classes and descriptors of one of torch's namespaces (not its flags)."""
    ns = resolve(name)
    return {a: v for a, v in vars(ns).items() if not isinstance(v, _SCALARS)} if ns is not None else {}


def _from_torch(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None) or getattr(getattr(obj, "__func__", None), "__module__", None)
    return isinstance(mod, str) and (mod == "torch" or mod.startswith("torch."))


class Integrity:
    def __init__(self) -> None:
        self.objects = {p: resolve(p) for p in WATCHED}
        self.namespaces = {n: namespace_objects(n) for n in NAMESPACES}
        self.modules = set(sys.modules)
        self.threads = threading.active_count()

    def check(self) -> None:
        changed = [p for p, obj in self.objects.items() if resolve(p) is not obj]
        for name, before in self.namespaces.items():
            now = namespace_objects(name)
            changed += [f"{name}.{a}" for a, v in before.items()
                        if now.get(a) is not v and not _from_torch(now.get(a))]
        if changed:
            raise GuardFailure(Code.HARNESS_PATCH,
                               f"the candidate replaced {', '.join(changed[:8])}: patching torch, the timer, "
                               "synchronisation or the evaluator's code is not allowed; call your own "
                               "functions instead")
        if threading.active_count() > self.threads:
            names = [t.name for t in threading.enumerate()][self.threads:]
            raise GuardFailure(Code.HIDDEN_WORK,
                               f"threads left running after forward returned ({', '.join(names[:4])}): "
                               "work outside the call hides from the timer; do all work inside forward")
        if kids := children():
            raise GuardFailure(Code.HIDDEN_WORK,
                               f"child process(es) {', '.join(kids[:4])} left running by the candidate: work "
                               "outside the call hides from the timer; wait for every process you start")


def children() -> list[str]:
    """Live child processes of this process (every thread's), by pid."""
    import os

    kids: list[str] = []
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return kids
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                kids += f.read().split()
        except OSError:
            continue
    return kids
