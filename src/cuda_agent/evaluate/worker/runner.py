"""A runner: the worker that loads a `model_new.py` and runs it.

The candidate's runner loads the candidate (with its built extension); the baselines' runners load
the reference wrapped as a candidate (eager, or under torch.compile: baselines.py), so that all
three are timed through the same commands. A runner owns the buffers that cross the boundary; the
judge opens them (transport.py). Whatever the candidate's runner reports is a claim that the judge
or the harness checks: outputs are compared by the judge, inputs re-read by the judge, times
checked against the harness's clock.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from cuda_agent.evaluate.result import Code
from cuda_agent.evaluate.worker.common import (Failure, candidate_trace, classify, device_of, precision_switches,
                                               timed_call, timer_for)


def _from_cpp_extension(exc: BaseException) -> bool:
    """True when `exc` was raised while torch.utils.cpp_extension built an inline extension."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(os.path.join("utils", "cpp_extension.py")):
            return True
        tb = tb.tb_next
    return False


def claim_extension_dir() -> Any:
    """Mark this worker as a user of its torch extension folder (TORCH_EXTENSIONS_DIR, one per
    candidate, kept between its evaluations) for the rest of its life, and first clear the build
    locks that a killed build left there.

    torch's load_inline guards a build with a lock file that only the builder removes, and waits
    without end for it to go; a worker killed mid-build (a timeout, a stopped run) leaves it, and
    every later evaluation of that candidate would hang in its build. A shared flock on
    `.users.lock`, held until the process exits, tells the live users apart from the dead: when
    the exclusive lock is free, nobody alive builds here, so any lock file left is stale. Returns
    the open file (keep it: closing it ends the claim), or None where there is no such folder."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        return None
    try:
        os.makedirs(root, exist_ok=True)
        users = open(os.path.join(root, ".users.lock"), "a")
    except OSError:
        return None
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # another evaluation of this candidate is alive: its build lock may be live
    else:
        for entry in os.scandir(root):
            stale = os.path.join(entry.path, "lock")
            if entry.is_dir() and os.path.exists(stale):
                try:
                    os.remove(stale)
                except OSError:
                    pass
    fcntl.flock(users, fcntl.LOCK_SH)
    return users


def import_file(name: str, path: Path):
    """Import the module file `path` (source or extension) as `name`, registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module



def quiet_libraries() -> None:
    """No helper thread of a library the candidate calls outlives its call: tqdm, which torch's FX
    interpreter instantiates in every torch.compile (disabled or not), starts a monitor thread with
    its first bar unless its interval is 0. Inductor compiles in the calling thread: its config reads
    TORCHINDUCTOR_COMPILE_THREADS (isolate.candidate_env) when first imported, which for a worker
    forked from a zygote was before the fork (the op guard's warm-up imports it), so it is set here."""
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.compile_threads = 1
    try:
        import tqdm.std
    except ImportError:
        return
    tqdm.std.tqdm.monitor_interval = 0


class Runner:
    def __init__(self, baseline: bool = False) -> None:
        self.code_root: str | None = None  # set by `load`: the folder of the code it runs
        self.values: dict[str, Any] = {}
        self.outs: dict[str, Any] = {}  # the last batch's outputs, by input slot
        self.calls = 0
        # A baseline runner (eager, torch.compile) runs the task's own reference: trusted code, and
        # torch.compile may start threads of its own (compile workers) in any call.
        self.baseline = baseline

    def cmd_load(self, stage_dir: str, extension: str | None, device: str, init_seed: int,
                 init_inputs: dict[str, Any], shm_dir: str, policy: str,
                 touch: str, ipc_segments: bool = True, stream_check: bool = False,
                 pch_dir: str | None = None, inline_builds: str | None = None,
                 light_headers: bool = False, tensor_header: bool = False,
                 remote_builds: bool = False) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate import guard, weights
        from cuda_agent.evaluate.transport import Exporter, describe, from_inline

        self.device = device_of(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.exporter = Exporter(self.device, Path(shm_dir), segments=ipc_segments)
        self.timer = timer_for(self.device, touch)
        self.policy = policy
        self.streams = StreamCheck(self.device) if stream_check and self.device.type == "cuda" else None
        os.chdir(stage_dir)
        sys.path.insert(0, stage_dir)
        self.code_root = stage_dir  # the candidate's files: the frames its error messages show
        if (pch_dir or inline_builds or light_headers or remote_builds) and "cpp_extension" in (
                Path(stage_dir) / "model_new.py").read_text(errors="replace"):
            from cuda_agent.evaluate.worker import inline_build, serve

            # its own load_inline builds: a precompiled torch/extension.h, a folder by their sources,
            # CUDA units through a light torch/extension.h first; in a sandbox, built by the harness
            inline_build.install(pch_dir, inline_builds, light_headers, tensor_header,
                                 remote=serve.request if remote_builds else None)
        if not self.baseline:
            quiet_libraries()
        self.integrity = guard.Integrity()  # before any candidate code runs
        self.extension_claim = claim_extension_dir()
        if extension:
            try:
                import_file("cuda_extension", Path(extension))
            except Exception as exc:
                raise Failure(Code.LOAD_ERROR, f"the built extension failed to load: {type(exc).__name__}: {exc}")
        try:
            mod = import_file("model_new", Path(stage_dir) / "model_new.py")
        except Exception as exc:
            code = Code.COMPILE_ERROR if _from_cpp_extension(exc) else Code.LOAD_ERROR
            raise Failure(code, f"importing model_new.py failed:\n{candidate_trace(exc, stage_dir)}")
        except SystemExit as exc:
            raise Failure(Code.EARLY_EXIT, f"model_new.py exited the process at import ({exc.code!r})")
        model_cls = getattr(mod, "ModelNew", None)
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise Failure(Code.NO_MODEL_NEW, "the candidate defines no class ModelNew (a torch.nn.Module)")
        try:
            torch.manual_seed(init_seed)
            self.model = model_cls(*from_inline(init_inputs, torch.device("cpu"))).to(self.device).eval()
        except Exception as exc:
            code, msg = classify(exc, stage_dir)
            raise Failure(code if code is not Code.RUNTIME_ERROR else Code.INIT_ERROR,
                          f"ModelNew(*get_init_inputs()) failed:\n{msg}")
        self.integrity.check()
        state, self.aliases = weights.distinct(self.model.state_dict())  # each tensor once
        self.state = {k: self.exporter.empty(describe(v)) for k, v in state.items()}
        return {"state": {k: self.exporter.export_allocated(v) for k, v in self.state.items()},
                "precision": precision_switches()}

    def cmd_load_weights(self, keys: list[str] | None = None) -> dict[str, Any]:
        """Load the state buffers the judge wrote (`keys`; all of them by default). An alias gets
        the buffer of the name it aliases: the same value into the same tensor."""
        import torch

        # A module moved or converted inside torch.inference_mode() (a warm-up in __init__) holds
        # inference tensors, which take an in-place copy only inside inference mode.
        inference = any(t.is_inference() for t in self.model.state_dict().values())
        with torch.inference_mode() if inference else contextlib.nullcontext():
            if keys is None or set(keys) == set(self.state):
                self.model.load_state_dict(self.state | {a: self.state[k] for a, k in self.aliases.items()},
                                           strict=True)
            else:
                self.model.load_state_dict({k: self.state[k] for k in keys if k in self.state}, strict=False)
        self.timer.sync(spin=False)
        del self.state
        self.exporter.release(everything=True)
        return {}

    def cmd_alloc(self, key: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Allocate the input buffers of slot `key` (the judge fills them before every call)."""
        from cuda_agent.evaluate.transport import build, describe

        self.values[key] = value = build(spec, self.exporter.empty)
        return {"spec": describe(value, self.exporter.export_allocated)}

    def cmd_run(self, keys: list[str], guarded: bool) -> dict[str, Any]:
        """Call ModelNew on each slot's inputs, back to back; keep the outputs for `export`. Guarded
        calls (the correctness trials) run under the op guard (strict) and wait for the device
        without spinning; the batch ends with the integrity and thread checks."""
        from cuda_agent.evaluate.guard import OpGuard

        self.outs = {}
        before = _threads()
        ms = []
        for key in keys:
            args = self.values[key]
            if guarded:
                og = OpGuard(self.integrity.modules, strict=True) if self.policy == "strict" else None
                fn = self.model if og is None else lambda *a: og.call(self.model, list(a))
                self.outs[key], t = self._guarded_call(fn, args)
                if og is not None:
                    self.integrity.check()
                    if failure := og.verdict():
                        raise failure
            else:  # only the calls between the harness's clock readings
                self.outs[key], t = timed_call(self.timer, self.model, args)
            ms.append(t)
        started = _threads() - before
        self.calls += 1
        if started and self.calls > 1 and not self.baseline:  # the first batch may start OpenMP's pool
            raise Failure(Code.HIDDEN_WORK, f"{len(started)} native thread(s) started during forward were "
                          "still running when it returned: work outside the call hides from the timer")
        return {"ms": ms}

    def _guarded_call(self, fn: Any, args: list[Any]) -> tuple[Any, float]:
        """A correctness trial's call. With `stream_check` (CUDA) it also checks that the output is
        complete on the caller's current stream when forward returns (`StreamCheck`): a kernel left
        running on a stream that was never joined back is a race, even though the timer waits for
        it."""
        if self.streams is None:
            return timed_call(self.timer, fn, args, spin=False)
        return self.streams.call(self.timer, fn, args)

    def cmd_export(self, key: str) -> dict[str, Any]:
        from cuda_agent.evaluate.transport import describe

        self.integrity.check()
        self.exporter.release()  # earlier exports were received (the judge cloned them)
        out = self.outs.pop(key)
        return {"out": describe(out, self.exporter.export), "plain": _plain(out)}

    def cmd_state(self) -> dict[str, Any]:
        from cuda_agent.evaluate import weights

        self.exporter.release()
        state = weights.distinct(self.model.state_dict())[0]
        return {"state": {k: self.exporter.export(v.detach()) for k, v in state.items()}, "precision": precision_switches()}


# Inline CUDA (jiterator, NVRTC) that keeps every thread slot of the GPU busy for `ns` nanoseconds
# per element; jiterator's kernels take HOLD_ELEMENTS_PER_THREAD elements per thread (as seen on a GPU:
# docs/measured/2026-12-07-figures-from-the-code.md).
_HOLD_CODE = r"""
template <typename T> T cuda_agent_hold(T x, T ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)ns);
  return x;
}
"""
STREAM_HOLD_MS = 5.0  # how long the SMs are held while forward queues its work
STREAM_SNAPSHOT_BYTES = 1 << 20  # bytes of each output's storage read at return (head and tail)
HOLD_ELEMENTS_PER_THREAD = 8


class StreamCheck:
    """Is a call's output complete on the caller's stream when forward returns?

    Right before the call, a kernel on a stream of its own fills every thread slot of the GPU for
    `STREAM_HOLD_MS`, so the kernels forward launches queue and none can run yet. Right after it
    returns, the head and tail of each output's storage are copied to pinned host memory, in order on
    the caller's current stream; a copy engine does it while the SMs are held. Work ordered before
    the copy on that stream (the caller's own kernels, or a side stream joined back) has to finish
    first, so it is in the snapshot. Work on a stream that was never joined runs only after the
    hold, so its output is missing from the snapshot and differs from the output after the
    device-wide synchronize: a race. Where the hold cannot be compiled (no NVRTC), the snapshot is
    taken all the same and catches what is still running."""

    def __init__(self, device: Any) -> None:
        import torch

        props = torch.cuda.get_device_properties(device)
        slots = props.multi_processor_count * getattr(props, "max_threads_per_multi_processor", 2048)
        self.stream = torch.cuda.Stream(device)
        self.hold_in = torch.zeros(slots * HOLD_ELEMENTS_PER_THREAD, device=device)
        self.staging = torch.empty(8 * STREAM_SNAPSHOT_BYTES, dtype=torch.uint8, pin_memory=True)
        try:
            self.hold_fn = torch.cuda.jiterator._create_jit_fn(_HOLD_CODE, ns=0.0)
            with torch.cuda.stream(self.stream):
                self.hold_fn(self.hold_in, ns=0.0)  # compiled here, not in the first trial
            torch.cuda.synchronize(device)
        except Exception:  # noqa: BLE001 - a best effort; the snapshot still runs
            self.hold_fn = None

    def call(self, timer: Any, fn: Any, args: list[Any]) -> tuple[Any, float]:
        """A correctness trial's `timed_call` of `fn`, with the hold before it and the snapshot
        right after it, before the synchronize."""
        import torch

        from cuda_agent.evaluate.compare import same_bits

        caller = torch.cuda.current_stream()
        snaps: list[tuple[int, Any, Any]] = []

        def held(*a: Any) -> Any:
            if self.hold_fn is not None:
                with torch.cuda.stream(self.stream):
                    self.hold_fn(self.hold_in, ns=STREAM_HOLD_MS * 1e6 / HOLD_ELEMENTS_PER_THREAD)
            out = fn(*a)
            snaps.extend(self._snapshot(out, caller))
            return out

        out, ms = timed_call(timer, held, args, spin=False)
        for i, region, early in snaps:
            if not same_bits(region.cpu(), early):
                raise Failure(Code.STREAM_RACE,
                              f"output tensor {i} was not complete on the caller's current stream when forward "
                              "returned: work on another stream was not joined back. Make the current stream wait "
                              "for it before returning (torch.cuda.current_stream().wait_stream(side), or "
                              "cudaStreamWaitEvent in C++)")
        return out, ms

    def _snapshot(self, out: Any, caller: Any) -> list[tuple[int, Any, Any]]:
        """(output index, device bytes, their copy made now on `caller`) for the head and tail of
        each output's storage, as far as the staging buffer goes. The copies go to pinned host
        memory, which copy engines serve while the SMs are held; the buffer is allocated once and
        never freed, so that no event is recorded for it after a kernel of the candidate's failed."""
        import torch

        from cuda_agent.evaluate.transport import tensors_of

        snaps = []
        used = 0
        with torch.cuda.stream(caller):
            for i, t in enumerate(tensors_of(out)):
                if type(t) is not torch.Tensor or not t.is_cuda or t.numel() == 0:
                    continue
                storage = t.untyped_storage()
                raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage, 0, (storage.nbytes(),))
                n = min(raw.numel(), STREAM_SNAPSHOT_BYTES)
                for lo in sorted({0, raw.numel() - n}):
                    if used + n > self.staging.numel():
                        return snaps
                    early = self.staging[used:used + n]
                    early.copy_(raw[lo:lo + n], non_blocking=True)
                    snaps.append((i, raw[lo:lo + n], early))
                    used += n
        return snaps


def _plain(value: Any) -> bool:
    """Only plain tensors (not subclasses), Python scalars and the containers of describe()."""
    import torch

    if isinstance(value, torch.Tensor):
        return type(value) is torch.Tensor
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(_plain(v) for v in value.values())
    return value is None or type(value) in (int, float, bool, str)


def _threads() -> set[str]:
    """Native threads of this process (OpenMP, std::thread, CUDA's), by id."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()

