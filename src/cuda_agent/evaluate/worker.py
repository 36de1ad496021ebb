"""Worker processes of one evaluation: the judge and the runners (the candidate's, and the
baselines').

    python -m cuda_agent.evaluate.worker judge|candidate|eager|compile

Each serves commands from the harness over a private socket (`channel.Channel`, fd given in
`CUDA_AGENT_CHANNEL_FD`); its stdout and stderr are the harness's to read, never the protocol.

- The *judge* never loads candidate code. It owns the task module, the reference model, the inputs
  (generated on the device from seeds the harness chooses), the reference outputs and the comparison.
- A *runner* (`Runner`) loads a `model_new.py` and runs it: the candidate's (with its built extension),
  or, in runners of their own, the reference wrapped as a candidate for the eager and torch.compile
  baselines (baselines.py), so that all three are timed through the same commands. A runner owns the
  buffers that cross the boundary; the judge opens them (transport.py). Whatever the candidate's
  runner reports is a claim the judge or the harness checks: outputs are compared by the judge,
  inputs re-read by the judge.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from cuda_agent.evaluate.channel import Channel, ChannelClosed
from cuda_agent.evaluate.guard import NAMESPACES, _resolve, namespace_objects  # (guard imports nothing heavy)
from cuda_agent.evaluate.result import Code

ILLEGAL_ADDRESS_ERRORS = {700, 716, 717, 718, 719}  # cudaErrorIllegalAddress ... cudaErrorLaunchFailure
CUDA_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation: the runtime's own out of memory (not the caching allocator's)


class Failure(Exception):
    """A verdict-bearing failure raised inside a worker command."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _trace(exc: BaseException, limit: int = 6000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def classify(exc: BaseException) -> tuple[Code, str]:
    """Reason code for an exception escaping candidate (or task) code."""
    import torch

    from cuda_agent.evaluate.guard import GuardFailure

    if isinstance(exc, (Failure, GuardFailure)):
        return exc.code, exc.message
    if isinstance(exc, SystemExit):
        return Code.EARLY_EXIT, f"candidate code tried to exit the process (SystemExit({exc.code!r})) instead of returning"
    if isinstance(exc, torch.OutOfMemoryError) or (
            isinstance(exc, RuntimeError) and "DefaultCPUAllocator: can't allocate memory" in str(exc)):
        return Code.OUT_OF_MEMORY, _trace(exc)
    accel = getattr(torch, "AcceleratorError", None)
    if accel is not None and isinstance(exc, accel):
        if getattr(exc, "error_code", None) in ILLEGAL_ADDRESS_ERRORS:
            return Code.ILLEGAL_MEMORY_ACCESS, _trace(exc)
        if getattr(exc, "error_code", None) == CUDA_OUT_OF_MEMORY:  # a neighbour may have caused it
            return Code.OUT_OF_MEMORY, _trace(exc)
    return Code.RUNTIME_ERROR, _trace(exc)


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


def _import_file(name: str, path: Path):
    """Import the module file `path` (source or extension) as `name`, registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _device(name: str):
    import torch

    if name == "cuda":
        if not torch.cuda.is_available():
            raise Failure(Code.DEVICE_UNAVAILABLE,
                          "--device cuda was asked for, but torch sees no CUDA device here "
                          f"(torch {torch.__version__}); use --device cpu")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def timed_call(timer: Any, fn: Any, args: list[Any], spin: bool = True) -> tuple[Any, float]:
    """The one timed call, for eager, torch.compile and the candidate alike: caches flushed, then the
    host clock around the call and a device-wide synchronize (every stream of the process), in
    milliseconds. `spin=False` (correctness trials, whose times nobody uses): the waits sleep
    instead of holding a core (`Timer.sync`)."""
    import torch

    timer.flush()
    timer.touch(spin)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = fn(*args)
        timer.sync(spin)
        ms = (time.perf_counter() - t0) * 1e3
    return out, ms


def _nothing() -> None:
    return None


# --- the judge -------------------------------------------------------------------------------------

class Judge:
    def __init__(self) -> None:
        self.trials: dict[str, dict[str, Any]] = {}
        self.slots: dict[str, Any] = {}  # the candidate's input buffers, by spec
        self.ref_ms: float | None = None
        self.served = 0  # evaluations judged (a judge may serve several: cmd_reset)
        self.state0 = _process_state()  # before any task code ran

    def cmd_become(self, role: str, cwd: str, env: dict[str, str]) -> dict[str, Any]:
        """A judge kept from an earlier evaluation (cmd_reset) takes the next one's directory and
        environment, as a spare does (`_become`)."""
        if role != "judge":
            raise Failure(Code.INFRA_ERROR, f"a judge cannot become a {role!r}")
        _enter(cwd, env)
        return {}

    def cmd_reset(self) -> dict[str, Any]:
        """Forget the evaluation: the task, its model, inputs and outputs, and every mapping of the
        candidate's buffers. Then say whether this process may judge another evaluation: the device
        is healthy, and nothing the task's code could have changed for the next task's reference
        differs from before the first task ran (`_process_state`). Reuse spares the machine a CUDA
        context made and destroyed per evaluation, which the host's driver serialises across GPUs."""
        import gc

        import torch

        importer = self.__dict__.pop("importer", None)
        for name in ("model", "task", "timer", "default_state", "learned", "expected", "weights"):
            self.__dict__.pop(name, None)
        self.trials, self.slots, self.ref_ms = {}, {}, None
        sys.modules.pop("cuda_agent_task", None)
        why: list[str] = []
        try:
            if importer is not None and (held := importer.close(everything=True)):
                why.append(f"{held} segment(s) of the candidate's device memory are still viewed")
            gc.collect()
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
                torch.cuda.ipc_collect()
                if torch.cuda.memory_reserved() > JUDGE_RESERVED_MAX:
                    torch.cuda.empty_cache()
        except Exception as exc:  # a device error is sticky: this context is done
            why.append(f"the device failed: {type(exc).__name__}: {str(exc)[:200]}")
        self.served += 1
        if self.served >= JUDGE_MAX_SERVED:
            why.append(f"served {self.served} evaluations")
        why += _state_changes(self.state0, _process_state())
        return {"reusable": not why, "why": why[:8]}

    def cmd_setup(self, task_source: str, origin: str, device: str, init_seed: int, weights_seed: int,
                  shm_dir: str, touch: str) -> dict[str, Any]:
        """Build the task's Model under `init_seed` (ModelNew is built under the same seed), then
        re-draw its learned state from `weights_seed` (weights.py)."""
        import torch

        from cuda_agent.evaluate import weights
        from cuda_agent.evaluate.device import device_info
        from cuda_agent.evaluate.transport import Importer, describe, inline_tensor

        self.device = _device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.importer = Importer(self.device, Path(shm_dir))
        module = type(sys)("cuda_agent_task")
        module.__file__ = origin
        sys.modules["cuda_agent_task"] = module
        try:
            exec(compile(task_source, origin, "exec"), module.__dict__)
            torch.manual_seed(init_seed)
            init_inputs = module.get_init_inputs()
            self.model = module.Model(*init_inputs).to(self.device).eval()
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the task's Model could not be built:\n{_trace(exc)}")
        self.task = module
        self.timer = _timer(self.device, touch)
        self.default_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.learned = weights.learned(self.model)
        self.weights = {"rule": "redrawn", "redrawn": len(weights.redraw(self.learned, weights_seed)),
                        "learned": len(self.learned), "matched_by": None, "note": None}
        try:
            self._keep_judgeable(weights_seed)
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the reference Model failed on its inputs:\n{_trace(exc)}")
        return {
            "device": device_info(self.device.type),
            "init_inputs": describe(list(init_inputs), inline_tensor),
            "state": {k: describe(v) for k, v in weights.distinct(self.model.state_dict())[0].items()},
            "weights": dict(self.weights),
        }

    def _keep_judgeable(self, seed: int) -> None:
        """Go back to the default init when the re-drawn weights make the reference's output
        non-finite or constant and the default init's is not (then it cannot tell kernels apart)."""
        from cuda_agent.evaluate import weights

        inputs = self._inputs(seed)
        bad = weights.degenerate(self._reference(inputs))
        if bad is None:
            return
        redrawn = {k: t.detach().clone() for k, t in self.learned.items()}
        self._restore(self.learned)
        if weights.degenerate(self._reference(inputs)) is not None:  # the task is like that: keep them
            self._restore(self.learned, redrawn)
            return
        self.weights.update(rule="default_init", redrawn=0,
                            note=f"with re-drawn weights the reference's {bad}; the default init was kept")

    def _restore(self, names: Any, source: dict[str, Any] | None = None) -> None:
        """Put the default init (or `source`) back into the reference's learned tensors `names`."""
        import torch

        with torch.no_grad():
            for k in names:
                self.learned[k].copy_((source or self.default_state)[k])

    def cmd_weights(self, state: dict[str, Any], owner: str = "candidate", policy: str = "strict",
                    values: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write the reference's state into a runner's state buffers (`state`: its state_dict's
        specs, from `load`): by name, or where the names differ (kernelbench) by the value each of
        its tensors has at default init (`values`, from its `state`, asked for by replying
        `need_values`). Returns the runner's names that were written (`filled`) and how (`weights`)."""
        from cuda_agent.evaluate import weights
        from cuda_agent.evaluate.transport import SpecError

        ref = weights.distinct(self.model.state_dict())[0]  # ModelNew's `state` has no aliases either
        if not isinstance(state, dict) or not all(isinstance(s, dict) for s in state.values()):
            raise Failure(Code.PROTOCOL_VIOLATION, "state_dict spec is not an object of tensor specs")
        own: dict[str, Any] = {}
        try:
            m = weights.match_by_name(ref, state)
            if m is None:
                if values is None:
                    return {"need_values": True}
                if not isinstance(values, dict) or set(values) != set(state):
                    raise Failure(Code.PROTOCOL_VIOLATION, "the state's values do not match its specs")
                own = {k: self.importer.open(v).clone() for k, v in values.items()}
                m = weights.match_by_value({k: self.default_state[k] for k in ref}, own)
                if policy == "strict" or owner != "candidate":
                    raise Failure(Code.STATE_DICT_MISMATCH, weights.mismatch_hint(ref, state, m))
                self._same_seed_where_fused(m, own)
            for mine, theirs in m.pairs.items():
                target = self.importer.open(state[mine])
                target.copy_(weights.fit(ref[theirs], target.shape))
        except (SpecError, RuntimeError) as exc:
            raise Failure(Code.PROTOCOL_VIOLATION, f"the candidate's state cannot be received: {exc}")
        finally:
            self.timer.sync(spin=False)
            self.importer.close()
        if owner == "candidate":  # what its state must still be after timing (cmd_check_state)
            self.expected = {mine: weights.fit(ref[theirs], state[mine]["shape"]) for mine, theirs in m.pairs.items()
                             } | {k: own[k] for k in m.extra}
            self.weights["matched_by"] = m.by
            if m.by == "value":
                self.weights.update(copied=len(m.pairs), kept_own=m.extra[:8], unmatched=m.missing[:8])
        return {"filled": list(m.pairs), "weights": dict(self.weights)}

    def _same_seed_where_fused(self, m: Any, own: dict[str, Any]) -> None:
        """A learned tensor with a random default init that ModelNew holds nowhere was fused or
        reshaped in its __init__, and one that an unmatched tensor of ModelNew holds in another
        order was copied into another layout there (`weights.copies`; a copy made at init keeps the
        default init whatever is loaded later). Either way every random-init tensor goes back to its
        default init, the value ModelNew was built with (KernelBench's same-seed rule); constant-init
        ones stay re-drawn."""
        from cuda_agent.evaluate import weights

        if self.weights["rule"] != "redrawn":
            return
        random_init = weights.random_init_names(self.learned, self.default_state)
        fused, copied = weights.fused_or_copied(m, own, self.default_state, random_init)
        if not fused and not copied:
            return
        self._restore(random_init)
        why = []
        if fused:
            why.append(f"holds none of {', '.join(fused[:4])}{' ...' if len(fused) > 4 else ''} as Model built it "
                       "(fused or reshaped)")
        if copied:
            why.append("keeps " + ", ".join(f"{c} (a copy of {r} in another layout)" for c, r in list(copied.items())[:4]))
        self.weights.update(
            rule="same_seed", redrawn=len(self.learned) - len(random_init),
            note=f"ModelNew {'; and '.join(why)}: {len(random_init)} tensor(s) with a random default init "
                 "kept it (same-seed rule); constant-init ones were re-drawn")

    def _inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = list(self.task.get_inputs())
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def cmd_prepare(self, items: list[dict[str, Any]], reference: bool = True,
                    forget: list[str] | None = None) -> dict[str, Any]:
        """Fresh inputs for each item {trial, seed, stress, fill}, written into the runner's input
        slot `fill` when it has the right layout (then the caches are flushed once). Returns per item
        {skip, spec, filled}, and the bytes of one call's inputs and reference output."""
        from cuda_agent.evaluate.transport import tensors_of

        for key in forget or ():  # timed calls that were not picked for checking
            self.trials.pop(key, None)
        done = [self._prepare(it["trial"], it["seed"], it.get("stress"), it.get("fill"), reference)
                for it in items]
        if any(d["filled"] for d in done):
            self.timer.flush()
            self.timer.sync(spin=False)
        last = self.trials.get(items[-1]["trial"]) if items else None
        nbytes = lambda v: sum(t.numel() * t.element_size() for t in tensors_of(v))  # noqa: E731
        return {"items": done, "in_bytes": nbytes(last["inputs"]) if last else 0,
                "out_bytes": nbytes(last["ref"]) if last and last["ref"] is not None else 0,
                "ref_ms": self.ref_ms}

    def _reference(self, inputs: list[Any]) -> Any:
        import torch

        with torch.no_grad():
            ref = self.model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        self.timer.sync(spin=False)
        return ref

    def _prepare(self, trial: str, seed: int, stress: int | None, fill: dict[str, Any] | None,
                 reference: bool) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate.transport import describe, tensors_of

        try:
            inputs = self._inputs(seed)
            if stress is not None:
                inputs = [_stress(x, stress) for x in inputs]
            ref = None
            if reference:
                ref = self._reference(inputs)
                if self.ref_ms is None:  # once: how long one call takes, warm (sizes the batches)
                    t0 = time.perf_counter()
                    ref = self._reference(inputs)
                    self.ref_ms = (time.perf_counter() - t0) * 1e3
            self.timer.sync(spin=False)
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the reference Model failed on its inputs:\n{_trace(exc)}")
        if stress is not None and not all(bool(torch.isfinite(t).all()) for t in tensors_of(ref)
                                           if t.is_floating_point()):
            return {"skip": True}
        self.trials[trial] = {"inputs": inputs, "ref": ref}
        spec = describe(inputs)
        filled = fill is not None and _same_layout(spec, fill)
        if filled:
            self._fill(trial, fill)
        return {"skip": False, "spec": spec, "filled": filled}

    def cmd_fill(self, trial: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Write the trial's inputs into the candidate's newly allocated input buffers."""
        self._fill(trial, spec)
        self.timer.flush()
        self.timer.sync(spin=False)
        return {}

    def _fill(self, trial: str, spec: dict[str, Any]) -> None:
        """Write the trial's inputs into the candidate's input buffers (the caller flushes the caches
        afterwards: the data must not sit dirty in the judge's caches when the candidate reads it)."""
        from cuda_agent.evaluate.transport import build, tensors_of

        t = self.trials[trial]
        key = json.dumps(spec, sort_keys=True)
        if key not in self.slots:  # a slot's buffers stay mapped for the whole evaluation
            self.slots[key] = build(spec, self.importer.open_pinned)
        aliases = self.slots[key]
        mine, theirs = tensors_of(t["inputs"]), tensors_of(aliases)
        if len(mine) != len(theirs) or any(a.shape != b.shape or a.dtype != b.dtype
                                           for a, b in zip(mine, theirs)):
            raise Failure(Code.PROTOCOL_VIOLATION, "the candidate allocated inputs unlike the spec")
        for a, b in zip(mine, theirs):
            b.copy_(a)
        t["aliases"] = theirs

    def _received(self, out: Any) -> Any:
        from cuda_agent.evaluate.transport import build

        return build(out, lambda s: self.importer.open(s).clone())

    def cmd_check(self, trial: str, out: dict[str, Any], plain: bool, atol: float, rtol: float,
                  norm_tol: float) -> dict[str, Any]:
        """Compare the candidate's output of `trial` with the reference, and its input buffers with
        the judge's own copy of the inputs; the trial is forgotten afterwards."""
        import torch

        from cuda_agent.evaluate.compare import compare, same_bits
        from cuda_agent.evaluate.transport import SpecError, tensors_of

        t = self.trials.pop(trial)
        if not plain:  # claimed by the candidate's process; only bytes cross either way
            return {"code": Code.NOT_PLAIN_TENSOR.value,
                    "message": "outputs must be plain torch.Tensor objects, not subclasses, proxies or "
                               "other objects"}
        if t["ref"] is None:  # a timed call picked for checking after it ran
            with torch.no_grad():
                t["ref"] = self.model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in t["inputs"]])
        try:
            got = self._received(out)
        except (SpecError, RuntimeError) as exc:  # a descriptor torch refuses is a bad one too
            return {"code": Code.STRUCTURE_MISMATCH.value,
                    "message": f"the candidate's output cannot be received: {exc}"}
        self.timer.sync(spin=False)
        result: dict[str, Any] = {"code": None, "message": ""}
        for i, (a, b) in enumerate(zip(tensors_of(t["inputs"]), t.get("aliases", []))):
            if not same_bits(a, b):
                result = {"code": Code.INPUT_MODIFIED.value,
                          "message": f"input {i} was modified by the candidate; inputs are read-only"}
                break
        else:
            stats: dict[str, float] = {"max_abs": 0.0, "rel_norm": 0.0}
            if m := compare(t["ref"], got, atol=atol, rtol=rtol, norm_tol=norm_tol, stats=stats):
                result = {"code": m.code.value, "message": m.message}
            else:
                result["error"] = stats
        del got, t
        self.importer.close()
        return result

    def cmd_probe(self, n: int) -> dict[str, Any]:
        """`n` timed calls of nothing: what the timing protocol itself costs a command, in a trusted
        process, right now (the reference for the candidate's timing check)."""
        return {"ms": [timed_call(self.timer, _nothing, [])[1] for _ in range(n)]}

    def cmd_check_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Are ModelNew's parameters and buffers still what `weights` left them, bit for bit?

        Only the state that was loaded is checked: a tensor removed or changed is a modification.
        Entries that appear during calls (a buffer registered as None and filled at the first call,
        e.g. BatchNorm folded into a scale and shift) are state derived from the weights; ModelNew
        may keep such state in any plain attribute as well, so their appearance proves nothing."""
        from cuda_agent.evaluate.compare import same_bits
        from cuda_agent.evaluate.transport import SpecError

        expected = getattr(self, "expected", {})
        if not isinstance(state, dict):
            raise Failure(Code.PROTOCOL_VIOLATION, "state_dict spec is not an object")
        changed = sorted(f"{k} removed" for k in set(expected) - set(state))
        try:
            for k, v in expected.items():
                if k in state and not same_bits(v, self.importer.open(state[k])):
                    changed.append(k)
        except (SpecError, RuntimeError) as exc:
            raise Failure(Code.PROTOCOL_VIOLATION, f"the candidate's state cannot be received: {exc}")
        finally:
            self.timer.sync(spin=False)
            self.importer.close()
        if changed:
            return {"code": Code.WEIGHTS_MODIFIED.value,
                    "message": f"forward modified ModelNew's parameters or buffers ({', '.join(changed[:6])}); "
                               "weights are read-only during calls (derive tensors from them in a "
                               "load_state_dict post-hook, or in __init__ from what it was given)"}
        return {"code": None}


JUDGE_MAX_SERVED = 64  # evaluations per judge process, a bound on whatever slowly accumulates
JUDGE_RESERVED_MAX = 4 << 30  # device memory a kept judge may hold in torch's cache (bytes)


def _process_state() -> dict[str, Any]:
    """What task code can change in the judge's process that would change a later task's
    reference or inputs: torch's global switches, the functions of its public namespaces (a patch),
    Python threads left running."""
    import threading
    import warnings

    import torch

    with warnings.catch_warnings():  # some switches have newer spellings and warn when read
        warnings.simplefilter("ignore")
        state: dict[str, Any] = {
            "default dtype": torch.get_default_dtype(),
            "grad mode": torch.is_grad_enabled(),
            "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
            "CPU threads": torch.get_num_threads(),
            "Python threads": threading.active_count(),
            "cudnn": (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
                      torch.backends.cudnn.deterministic, _read_switch(lambda: torch.backends.cudnn.allow_tf32),
                      getattr(torch.backends.cudnn, "fp32_precision", None)),
            "matmul": (torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
                       torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
            **_precision(),
        }
        get_default_device = getattr(torch, "get_default_device", None)
        if get_default_device is not None:
            state["default device"] = str(get_default_device())
    for name in NAMESPACES:  # functions, classes, descriptors: not flags (torch.cuda._initialized)
        state[name] = namespace_objects(name)
    return state


def _state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two `_process_state`s: changed switches, and attributes of torch's
    namespaces replaced or removed, or added to a class (a method shadowing its base's; a module
    gains attributes as torch loads its submodules lazily)."""
    changes = []
    for key, old in before.items():
        new = after.get(key)
        if key in NAMESPACES:
            replaced = [a for a, v in old.items() if a not in new or new[a] is not v]
            if isinstance(_resolve(key), type):
                replaced += [a for a in new if a not in old]
            if replaced:
                changes.append(f"{key}: {', '.join(sorted(replaced)[:4])} replaced")
        elif new != old:
            changes.append(f"{key}: {old!r} -> {new!r}")
    return changes


def _same_layout(a: Any, b: Any) -> bool:
    """Do two transport specs describe the same structure, shapes and dtypes (buffers aside)?"""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("t") == "tensor" or b.get("t") == "tensor":
            return all(a.get(k) == b.get(k) for k in ("t", "shape", "dtype", "stride"))
        return a.keys() == b.keys() and all(_same_layout(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_layout(x, y) for x, y in zip(a, b))
    return a == b


def _stress(x: Any, variant: int) -> Any:
    """An input beyond the task's distribution that keeps the structure `get_inputs()` gave it, so
    that a kernel may rely on every property the task guarantees (DESIGN section 3, "Correctness"):

    - tensors that are not floating, empty, hold NaN/Inf or only integral values (labels, counts,
      masks) stay as they are;
    - tensors within [-1, 1] are pushed towards the ends of their range, x -> sign(x) |x|^p with
      p = 1/4 or 4: they stay in range, keep their zeros, signs and order; non-negative ones whose
      slices along a dimension all sum to 1 (probabilities: a softmax's output) are divided by
      their new sums, so they stay distributions, flatter or sharper;
    - other tensors are scaled by 4 or 8, and shifted by 0.5 or -1 only when they have both signs
      and no exact zero: zeros stay zero (triangular, masked, sparse inputs) and non-negative
      inputs stay non-negative.
    """
    import torch

    if (not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0
            or not bool(torch.isfinite(x).all()) or bool((x == x.round()).all())):
        return x
    lo, hi = float(x.min()), float(x.max())
    if -1.0 <= lo and hi <= 1.0:
        y = x.sign() * x.abs().pow((0.25, 4.0)[variant % 2])
        if lo >= 0.0 and (dim := _simplex_dim(x)) is not None:
            y = y / y.sum(dim, keepdim=True)
        return y
    scale, shift = [(4.0, 0.5), (8.0, -1.0)][variant % 2]
    if not (lo < 0 < hi) or bool((x == 0).any()):
        shift = 0.0
    return x * scale + shift


def _simplex_dim(x: Any) -> int | None:
    """The last dimension (of more than one element) along which every slice of non-negative `x`
    sums to 1, or None."""
    import torch

    for dim in range(x.dim() - 1, -1, -1):
        if x.shape[dim] > 1 and bool(((x.sum(dim, dtype=torch.float64) - 1.0).abs() <= SIMPLEX_TOL).all()):
            return dim
    return None


SIMPLEX_TOL = 1e-3  # how far from 1 a slice's sum may be, for float32 sums of many elements


# --- the candidate's runner ------------------------------------------------------------------------

class Runner:
    def __init__(self, baseline: bool = False) -> None:
        self.values: dict[str, Any] = {}
        self.outs: dict[str, Any] = {}  # the last batch's outputs, by input slot
        self.calls = 0
        # A baseline runner (eager, torch.compile) runs the task's own reference: trusted code, and
        # torch.compile may start threads of its own (compile workers) in any call.
        self.baseline = baseline

    def cmd_load(self, stage_dir: str, extension: str | None, device: str, init_seed: int,
                 init_inputs: dict[str, Any], shm_dir: str, policy: str,
                 touch: str, ipc_segments: bool = True, stream_check: bool = False) -> dict[str, Any]:
        import torch

        from cuda_agent.evaluate import guard, weights
        from cuda_agent.evaluate.transport import Exporter, describe, from_inline

        self.device = _device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.exporter = Exporter(self.device, Path(shm_dir), segments=ipc_segments)
        self.timer = _timer(self.device, touch)
        self.policy = policy
        self.streams = StreamCheck(self.device) if stream_check and self.device.type == "cuda" else None
        os.chdir(stage_dir)
        sys.path.insert(0, stage_dir)
        self.integrity = guard.Integrity()  # before any candidate code runs
        self.extension_claim = claim_extension_dir()
        if extension:
            try:
                _import_file("cuda_extension", Path(extension))
            except Exception as exc:
                raise Failure(Code.LOAD_ERROR, f"the built extension failed to load:\n{_trace(exc)}")
        try:
            mod = _import_file("model_new", Path(stage_dir) / "model_new.py")
        except Exception as exc:
            code = Code.COMPILE_ERROR if _from_cpp_extension(exc) else Code.LOAD_ERROR
            raise Failure(code, f"importing model_new.py failed:\n{_trace(exc)}")
        except SystemExit as exc:
            raise Failure(Code.EARLY_EXIT, f"model_new.py exited the process at import ({exc.code!r})")
        model_cls = getattr(mod, "ModelNew", None)
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise Failure(Code.NO_MODEL_NEW, "the candidate defines no class ModelNew (a torch.nn.Module)")
        try:
            torch.manual_seed(init_seed)
            self.model = model_cls(*from_inline(init_inputs, torch.device("cpu"))).to(self.device).eval()
        except Exception as exc:
            code, msg = classify(exc)
            raise Failure(code if code is not Code.RUNTIME_ERROR else Code.INIT_ERROR,
                          f"ModelNew(*get_init_inputs()) failed:\n{msg}")
        self.integrity.check()
        state, self.aliases = weights.distinct(self.model.state_dict())  # each tensor once
        self.state = {k: self.exporter.empty(describe(v)) for k, v in state.items()}
        return {"state": {k: self.exporter.export_allocated(v) for k, v in self.state.items()},
                "precision": _precision()}

    def cmd_load_weights(self, keys: list[str] | None = None) -> dict[str, Any]:
        """Load the state buffers the judge wrote (`keys`; all of them by default). An alias gets
        the buffer of the name it aliases: the same value into the same tensor."""
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
        return {"state": {k: self.exporter.export(v.detach()) for k, v in state.items()}, "precision": _precision()}


# Inline CUDA (jiterator, NVRTC) that keeps every thread slot of the GPU busy for `ns` nanoseconds
# per element; jiterator's kernels take eight elements per thread (measured on an H200).
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


def _read_switch(get: Any) -> Any:
    """A precision switch's value, or "refused" where torch will not read it: a process that set
    its precision through both torch's older API (allow_tf32, set_float32_matmul_precision) and
    the newer one (fp32_precision) makes the older getters raise."""
    try:
        return get()
    except RuntimeError:
        return "refused"


def _precision() -> dict[str, Any]:
    """Precision switches that change results (recorded in the result, allowed within tolerance).
    Whether cuBLAS float32 matmuls use TF32 comes from the older switch, or where torch refuses
    to read it, from the newer one (`none` there inherits the global `torch.backends` setting)."""
    import torch

    m = torch.backends.cuda.matmul
    new = getattr(m, "fp32_precision", None)
    tf32 = _read_switch(lambda: bool(m.allow_tf32))
    if tf32 == "refused":
        tf32 = new == "tf32" or (new == "none" and getattr(torch.backends, "fp32_precision", None) == "tf32")
    return {"matmul_allow_tf32": tf32, "matmul_fp32_precision": new,
            "float32_matmul_precision": _read_switch(torch.get_float32_matmul_precision)}


# --- main loop -------------------------------------------------------------------------------------

def serve(handler: Any, chan: Channel) -> None:
    while True:
        try:
            msg = chan.recv()
        except ChannelClosed:
            return
        cmd = msg.get("cmd")
        if cmd == "exit":
            return
        if cmd == "ping":  # wakes the process: a timed command then finds it as hot as the judge's
            chan.send({"ok": True, "seq": msg.get("seq")})
            continue
        fn = getattr(handler, f"cmd_{cmd}", None)
        try:
            if fn is None:
                raise Failure(Code.INFRA_ERROR, f"unknown command {cmd!r}")
            reply = {"ok": True, **fn(**msg.get("args", {}))}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from candidate code too
            code, message = classify(exc)
            reply = {"ok": False, "code": code.value, "message": message}
        reply["seq"] = msg.get("seq")
        chan.send(reply)


def _become(chan: Channel) -> str:
    """A spare (a worker started ahead of need, torch already imported) learns its role, directory
    and the evaluation's environment from its first command."""
    msg = chan.recv()
    args = msg.get("args", {}) if msg.get("cmd") == "become" else {}
    role = args.get("role")
    if role not in ROLES or not isinstance(args.get("env"), dict):
        chan.send({"ok": False, "code": Code.INFRA_ERROR.value, "message": "a spare needs `become` first",
                   "seq": msg.get("seq")})
        os._exit(1)
    _enter(args["cwd"], args["env"])
    chan.send({"ok": True, "seq": msg.get("seq")})
    return role


def _enter(cwd: str, env: dict[str, Any]) -> None:
    """Move into an evaluation's directory and environment."""
    import tempfile

    os.chdir(cwd)
    os.environ.update({str(k): str(v) for k, v in env.items()})
    tempfile.tempdir = None  # TMPDIR may have changed


ROLES = ("judge", "candidate", "eager", "compile")


def _warm_guard() -> None:
    """The first call under the op guard imports much of torch (dispatch modes, dynamo, sympy:
    ~2.5 s on two cores); a runner pays it before it says ready, a spare before it is needed."""
    import torch

    from cuda_agent.evaluate.guard import OpGuard

    OpGuard(set(sys.modules), strict=True).call(torch.nn.Linear(2, 2), [torch.zeros(1, 2)])


WARM_SEGMENT_BYTES = 256 << 20  # device memory a fully warmed spare leaves in torch's cache
_warm_timer: Any = None  # the Timer a fully warmed spare made, for the role it becomes


def _warm_cuda(lock: str | None, full: bool = False) -> None:
    """Create the CUDA context (~0.3 s) before it is needed; not while an evaluation times on the
    device, but ahead of timed rounds that wait (locks.py). `full`: also do what a worker's first
    command would otherwise do on the evaluation's path, each a call into the host's driver, which
    serialises it with every other process's context creation: the Timer's buffers and its first
    flush and tensor-core work (cuBLAS's handle and kernels), and a segment of each of the caching
    allocator's pools, left cached for the task's inputs and outputs."""
    import contextlib

    import torch

    from cuda_agent.evaluate.locks import DeviceLock

    held = (DeviceLock(lock).shared(600, required=False, poll=0.01, queue=False) if lock is not None
            else contextlib.nullcontext())
    with held:
        torch.empty(1, device="cuda")
        if full:
            global _warm_timer
            from cuda_agent.evaluate.timing import Timer

            timer = Timer(torch.device("cuda", torch.cuda.current_device()))
            timer.flush()
            timer.touch(spin=False)
            large = torch.empty(WARM_SEGMENT_BYTES, dtype=torch.uint8, device="cuda")
            small = torch.empty(1 << 16, dtype=torch.uint8, device="cuda")
            del large, small  # freed into torch's cache, not to the driver
            _warm_timer = timer
        torch.cuda.synchronize()


def _timer(device: Any, touch: str) -> Any:
    """A Timer for `device` with `touch`: the one this process warmed as a spare, if it is that,
    else a new one."""
    global _warm_timer
    from cuda_agent.evaluate.timing import Timer

    timer, _warm_timer = _warm_timer, None
    if timer is not None and timer.device == device and timer.touch_kind == touch:
        return timer
    return Timer(device, touch)


HARNESS_WATCH_S = 1.0  # how often a worker looks whether the process that started it is alive


def exit_with_harness() -> None:
    """End this worker, and the processes of its session (what the candidate started), as soon as
    the process that started it is gone. A worker that waits for a command sees its channel close,
    but one busy in a command (a large reference built, a candidate that hangs) would run on,
    holding memory and a GPU, after its harness was killed (SIGKILL, the OOM killer, a deadline)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(HARNESS_WATCH_S)
            if os.getppid() != parent:
                try:
                    if os.getpgid(0) == os.getpid():  # a worker leads its own group (engine, zygote)
                        os.killpg(0, signal.SIGKILL)
                finally:
                    os._exit(1)

    threading.Thread(target=watch, name="cuda-agent-harness-watch", daemon=True).start()


def main() -> None:
    exit_with_harness()  # first: the guard's thread count is taken after it
    role = sys.argv[1]
    fd = int(os.environ.pop("CUDA_AGENT_CHANNEL_FD"))
    chan = Channel(socket.socket(fileno=fd))
    if "--cpus" in sys.argv:  # a spare of a GPU's pool: run on that GPU's NUMA node
        from cuda_agent.evaluate.device import parse_cpulist

        try:
            os.sched_setaffinity(0, parse_cpulist(sys.argv[sys.argv.index("--cpus") + 1]))
        except (OSError, ValueError, IndexError):
            pass  # a placement, not a requirement
    import torch  # noqa: F401  (warm before the first command)

    if role == "candidate" or (role == "spare" and "guard" in sys.argv[2:]):
        _warm_guard()
    if role == "spare" and "cuda" in sys.argv[2:]:
        _warm_cuda(sys.argv[sys.argv.index("--lock") + 1] if "--lock" in sys.argv else None,
                   full="warm-device" in sys.argv[2:])
    chan.send({"ok": True, "ready": role, "pid": os.getpid()})
    if role == "spare":
        role = _become(chan)
    serve(Judge() if role == "judge" else Runner(baseline=role in ("eager", "compile")), chan)
    sys.stdout.flush()
    sys.stderr.flush()
    # The harness has the whole output at EOF, before the CUDA context goes (~0.2 s; engine._close_all).
    os.close(1)
    os.close(2)
    os._exit(0)  # skip interpreter teardown: CUDA IPC and extension destructors can hang or crash it


if __name__ == "__main__":
    main()
