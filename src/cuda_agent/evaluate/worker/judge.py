"""The judge: the trusted worker of an evaluation. It never loads candidate code.

It owns the task module, the reference model (its weights re-drawn, weights.py), the inputs
(generated on the device from seeds the harness chooses), the reference outputs and the comparison.
It writes each trial's inputs into the candidate's input buffers, and reads the candidate's
outputs, inputs and state back from them (transport.py) to judge them. Between evaluations a
judge may be kept for the next one (`Judge.cmd_reset`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from cuda_agent.evaluate.memory import JUDGE_RESERVED_MAX
from cuda_agent.evaluate.result import Code
from cuda_agent.evaluate.worker.common import (Failure, device_of, enter, nothing, process_state, state_changes,
                                               timed_call, timer_for, trace)
from cuda_agent.evaluate.worker.stress import stress_input
from cuda_agent.evaluate.worker.work import counted

INT32_ELEMENTS = 1 << 31  # shape trials stop short of tensors this large (Judge._past_32_bit)


def _nbytes(*values: Any, on: str | None = None) -> int:
    """Bytes of the tensors in `values` (only of those on a device of type `on`, where given)."""
    from cuda_agent.evaluate.transport import tensors_of

    return sum(t.numel() * t.element_size() for v in values for t in tensors_of(v)
               if on is None or t.device.type == on)


def preload() -> None:
    """Import every module the judge uses, before any candidate code runs anywhere: a module
    imported later is read from disk then, and a candidate that could write to the installed
    package (no sandbox) would decide what the judge runs."""
    import torch  # noqa: F401

    from cuda_agent.evaluate import compare, device, transport, weights  # noqa: F401


class Judge:
    def __init__(self) -> None:
        preload()
        self.trials: dict[str, dict[str, Any]] = {}
        self.slots: dict[str, Any] = {}  # the candidate's input buffers, by spec
        self.ref_ms: float | None = None
        self.base_shapes: list[tuple[int, ...]] | None = None  # the input tensors' shapes at the task's sizes
        self.base_numel = 0  # the most elements of one input or output tensor at the task's sizes
        self.ref_work = 0  # the reference's device memory beyond its inputs and output, at its peak
        self.work: dict[str, Any] | None = None  # the reference's FLOPs and bytes (worker/work.py), counted once
        self.reserved_peak = 0  # torch's reserved device memory at its peak this evaluation (serve's `memory`)
        self.served = 0  # evaluations judged (a judge may serve several: cmd_reset)
        self.state0 = process_state()  # before any task code ran

    def cmd_become(self, role: str, cwd: str, env: dict[str, str]) -> dict[str, Any]:
        """A judge kept from an earlier evaluation (cmd_reset) takes the next one's directory and
        environment, as a spare does (`_become`)."""
        if role != "judge":
            raise Failure(Code.INFRA_ERROR, f"a judge cannot become a {role!r}")
        enter(cwd, env)
        return {}

    def cmd_reset(self) -> dict[str, Any]:
        """Forget the evaluation: the task, its model, inputs and outputs, and every mapping of the
        candidate's buffers. Then say whether this process may judge another evaluation: the device
        is healthy, and nothing the task's code could have changed for the next task's reference
        differs from before the first task ran (`process_state`). Reuse spares the machine a CUDA
        context made and destroyed per evaluation, which the host's driver serialises across GPUs."""
        import gc

        import torch

        importer = self.__dict__.pop("importer", None)
        for name in ("model", "task", "timer", "default_state", "learned", "expected", "weights", "weights_seed"):
            self.__dict__.pop(name, None)
        self.trials, self.slots, self.ref_ms, self.ref_work, self.reserved_peak = {}, {}, None, 0, 0
        self.work = None
        self.base_shapes, self.base_numel = None, 0
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
                torch.cuda.reset_peak_memory_stats()  # the next evaluation's peak is its own
        except Exception as exc:  # a device error is sticky: this context is done
            why.append(f"the device failed: {type(exc).__name__}: {str(exc)[:200]}")
        self.served += 1
        if self.served >= JUDGE_MAX_SERVED:
            why.append(f"served {self.served} evaluations")
        why += state_changes(self.state0, process_state())
        return {"reusable": not why, "why": why[:8]}

    def cmd_setup(self, task_source: str, origin: str, device: str, init_seed: int, weights_seed: int,
                  shm_dir: str, touch: str) -> dict[str, Any]:
        """Build the task's Model under `init_seed` (ModelNew is built under the same seed), then
        re-draw its learned state from `weights_seed` (weights.py)."""
        import torch

        from cuda_agent.evaluate import weights
        from cuda_agent.evaluate.device import device_info
        from cuda_agent.evaluate.transport import Importer, describe, inline_tensor

        self.device = device_of(device)
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
            raise Failure(Code.REFERENCE_ERROR, f"the task's Model could not be built:\n{trace(exc)}")
        self.task = module
        self.timer = timer_for(self.device, touch)
        self.default_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.learned = weights.learned(self.model)
        self.weights = {"rule": "redrawn", "redrawn": len(weights.redraw(self.learned, weights_seed)),
                        "learned": len(self.learned), "matched_by": None, "note": None}
        self.weights_seed = weights_seed
        inputs_bytes = None  # (unknown where get_inputs cannot run on the meta device)
        with contextlib.suppress(Exception):  # what a task not measured yet is admitted by (memory.estimate)
            inputs_bytes = _nbytes(self._meta_inputs())
        return {
            "inputs_bytes": inputs_bytes,
            "device": device_info(self.device.type),
            "init_inputs": describe(list(init_inputs), inline_tensor),
            "state": {k: describe(v) for k, v in weights.distinct(self.model.state_dict())[0].items()},
            "weights": dict(self.weights),
        }

    def cmd_judgeable(self) -> dict[str, Any]:
        """The reference's first run on the task's inputs (`_keep_judgeable`), which may change the
        weights' rule. Apart from `setup` because it is the judge's first use of the inputs' and
        output's device memory: the evaluation asks for it once it holds that memory, after the
        candidate's build, not beside the build."""
        try:
            self._keep_judgeable(self.weights_seed)
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the reference Model failed on its inputs:\n{trace(exc)}")
        return {"weights": dict(self.weights)}

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
            why.append("keeps " + ", ".join(f"{c} (a copy of {r}, re-laid out or scaled)" for c, r in list(copied.items())[:4]))
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
                    forget: list[str] | None = None, sizes: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fresh inputs for each item {trial, seed, stress, fill}, written into the runner's input
        slot `fill` when it has the right layout (then the caches are flushed once). Returns per item
        {skip, spec, filled}, and the bytes of one call's inputs and reference output.

        `sizes` (shape trials, evaluate/shapes.py): {"set": the task module's constants to change,
        "max_in_bytes", "grows"}: the items' inputs are made with those constants, restored
        afterwards. An item the task cannot take at those sizes (inputs over `max_in_bytes`, the
        inputs' shapes unchanged, the reference failing or not finite) is skipped with `why`."""
        for key in forget or ():  # timed calls that were not picked for checking
            self.trials.pop(key, None)
        if sizes is not None:
            done = self._prepare_sized(items, sizes, reference)
        else:
            done = [self._prepare(it["trial"], it["seed"], it.get("stress"), it.get("fill"), reference)
                    for it in items]
        if any(d.get("filled") for d in done):  # (a skipped item has none)
            self.timer.flush()
            self.timer.sync(spin=False)
        last = self.trials.get(items[-1]["trial"]) if items else None
        return {"items": done, "in_bytes": _nbytes(last["inputs"]) if last else 0,
                "out_bytes": _nbytes(last["ref"]) if last and last["ref"] is not None else 0,
                "ref_ms": self.ref_ms, "ref_work_bytes": self.ref_work, "work": self.work}

    def after_command(self) -> None:
        """After each command, its frame gone (serve.py): give back to the driver what torch's cache
        holds beyond `JUDGE_RESERVED_MAX`. A large task's inputs, made, stressed and compared, leave
        copies' worth of freed blocks there (several times the input's size:
        docs/measured/2026-12-06-dumps.md, "CUDA-L1 re-judged") that the candidate and baseline
        runners need next, or a task that fits the GPU runs short even alone. (The peak still counts
        for admission: serve's `memory`.) A device error here shows in the next command."""
        import torch

        dev = getattr(self, "device", None)
        with contextlib.suppress(Exception):
            if dev is not None and dev.type == "cuda" and \
                    torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev) > JUDGE_RESERVED_MAX:
                torch.cuda.empty_cache()

    def _prepare_sized(self, items: list[dict[str, Any]], sizes: dict[str, Any],
                       reference: bool) -> list[dict[str, Any]]:
        """`_prepare` of each item with the task module's constants `sizes["set"]` in place (only
        those that get_inputs reads and no model was built from: shapes.py); put back afterwards."""
        task = self.task
        old = {k: getattr(task, k) for k in sizes["set"]}
        try:
            for k, v in sizes["set"].items():
                setattr(task, k, v)
            why = self._sized_unfit(sizes)
            if why is not None:
                return [{"skip": True, "why": why} for _ in items]
            done = []
            for it in items:
                try:
                    done.append(self._prepare(it["trial"], it["seed"], None, it.get("fill"), reference,
                                              finite=True))
                except Failure as f:  # the reference cannot take these sizes: not the candidate's failure
                    done.append({"skip": True, "why": f.message[-2000:]})
                    continue
                if (why := self._past_32_bit(it["trial"])) is not None:
                    self.trials.pop(it["trial"], None)
                    done[-1] = {"skip": True, "why": why}
            return done
        finally:
            for k, v in old.items():
                setattr(task, k, v)

    def _past_32_bit(self, trial: str) -> str | None:
        """Why a shape trial's tensors are not a fair test: one of them has 2^31 elements or more
        where the task's largest has fewer. Below that count, 32-bit index arithmetic is exact, and
        it is what fast kernels use there (PyTorch's own pick it wherever it fits); a kernel that
        overflows past it was not fitted to the task's sizes. None: a fair trial."""
        from cuda_agent.evaluate.transport import tensors_of

        t = self.trials.get(trial)
        if t is None or self.base_numel >= INT32_ELEMENTS:
            return None
        most = max((x.numel() for x in [*tensors_of(t["inputs"]), *tensors_of(t["ref"])]), default=0)
        if most < INT32_ELEMENTS:
            return None
        return (f"a tensor of {most} elements at these sizes (the task's largest has {self.base_numel}): past "
                f"2^31, where 32-bit indexing, exact at the task's sizes, overflows; not tried")

    def _meta_inputs(self) -> list[Any]:
        """get_inputs() made on the meta device, where no memory is taken: the inputs' shapes and
        bytes before any is made (it raises where get_inputs cannot run there)."""
        import torch

        torch.manual_seed(0)
        with torch.device("meta"):
            return list(self.task.get_inputs())

    def _sized_unfit(self, sizes: dict[str, Any]) -> str | None:
        """Why the task's inputs at these sizes are not tried before any is made: over the memory
        bound (their bytes told on the meta device, where no memory is taken), or their shapes are
        the task's own (a size read at import). None: try them."""
        from cuda_agent.evaluate.transport import tensors_of

        try:
            meta = self._meta_inputs()
        except Exception as exc:
            if sizes.get("grows"):
                return (f"the inputs' bytes at larger sizes cannot be told in advance (get_inputs() fails on "
                        f"the meta device: {type(exc).__name__}), so they are not made")
            return None
        need = _nbytes(meta)
        if need > sizes["max_in_bytes"]:
            return f"the inputs would take {need} bytes, over the bound of {sizes['max_in_bytes']} for shape trials"
        if self.base_shapes is not None and [tuple(t.shape) for t in tensors_of(meta)] == self.base_shapes:
            return "the inputs' shapes do not change with these sizes"
        return None

    def _reference(self, inputs: list[Any]) -> Any:
        """The reference's output on (copies of) `inputs`. On a GPU, also what the call held beyond
        those copies and its output at its peak (`ref_work`: an intermediate, a library's workspace),
        which every process that runs the reference keeps in its allocator's cache afterwards: what
        the Evaluator admits the task's evaluations by (memory.py)."""
        import torch

        cuda = self.device.type == "cuda"
        if cuda:  # (the reset below forgets the reserved peak too: kept first)
            self.reserved_peak = max(self.reserved_peak, torch.cuda.max_memory_reserved(self.device))
            torch.cuda.reset_peak_memory_stats(self.device)
            base = torch.cuda.memory_allocated(self.device)
        with torch.no_grad():
            ref = self.model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        self.timer.sync(spin=False)
        if cuda:
            held = _nbytes(inputs, ref, on="cuda")
            self.ref_work = max(self.ref_work, torch.cuda.max_memory_allocated(self.device) - base - held)
        return ref

    def cmd_peaks(self) -> dict[str, Any]:
        """This device's DRAM bandwidth and FLOP/s per class, measured (worker/work.py)."""
        from cuda_agent.evaluate.worker.work import measure_peaks

        return {"peaks": measure_peaks(self.device)}

    def _prepare(self, trial: str, seed: int, stress: int | None, fill: dict[str, Any] | None,
                 reference: bool, finite: bool = False) -> dict[str, Any]:
        """`finite`: skip the item where the reference's output is not finite (as stress trials
        are skipped)."""
        import torch

        from cuda_agent.evaluate.transport import describe, tensors_of

        try:
            inputs = self._inputs(seed)
            first = self.base_shapes is None  # the task's own sizes (the first trial's)
            if first:
                self.base_shapes = [tuple(t.shape) for t in tensors_of(inputs)]
            if stress is not None:
                inputs = [stress_input(x, stress) for x in inputs]
            ref = None
            if reference:
                if self.work is None and stress is None:  # once: what the speed of light is made of
                    ref, self.work = counted(lambda: self._reference(inputs), inputs, self.model)
                else:
                    ref = self._reference(inputs)
                if self.ref_ms is None:  # once: how long one call takes, warm (sizes the batches)
                    t0 = time.perf_counter()
                    ref = self._reference(inputs)
                    self.ref_ms = (time.perf_counter() - t0) * 1e3
            if first:
                self.base_numel = max((t.numel() for t in [*tensors_of(inputs), *tensors_of(ref)]), default=0)
            self.timer.sync(spin=False)
        except Exception as exc:
            raise Failure(Code.REFERENCE_ERROR, f"the reference Model failed on its inputs:\n{trace(exc)}")
        if (stress is not None or finite) and not all(bool(torch.isfinite(t).all()) for t in tensors_of(ref)
                                                      if t.is_floating_point()):
            return {"skip": True, "why": "the reference's output is not finite"}
        self.trials[trial] = {"inputs": inputs, "ref": ref}
        spec = describe(inputs)
        filled = fill is not None and same_layout(spec, fill)
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
        except torch.OutOfMemoryError:
            raise  # the judge's copy did not fit (beside other evaluations): out_of_memory, not the candidate's fault
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
        return {"ms": [timed_call(self.timer, nothing, [])[1] for _ in range(n)]}

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


def same_layout(a: Any, b: Any) -> bool:
    """Do two transport specs describe the same structure, shapes and dtypes (buffers aside)?"""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("t") == "tensor" or b.get("t") == "tensor":
            return all(a.get(k) == b.get(k) for k in ("t", "shape", "dtype", "stride"))
        return a.keys() == b.keys() and all(same_layout(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_layout(x, y) for x, y in zip(a, b))
    return a == b
