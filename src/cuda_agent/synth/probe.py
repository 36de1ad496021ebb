"""The data filter's worker: runs drafted tasks and says whether each is fit to be a task.

`Prober` serves the command `probe` in a worker process of the evaluator's process layer
(`python -m cuda_agent.evaluate.worker probe --handler cuda_agent.synth.probe:Prober`, started by
`filters.ProbePool` through `process.Worker`: a scrubbed environment, a private channel, a
deadline per draft, its process group killed when it hangs or dies).

A draft is checked in this order, cheapest first; the first failure is its rejection reason (a
`Code`, of kind `task` unless said otherwise): `load_error` (the module does not run), `init_error`
(Model cannot be built), `eager_error` / `out_of_memory` (forward fails), `non_float_output`,
`non_finite`, `nondeterministic` (the same inputs twice give different outputs), `constant_output`
(every output element the same), `input_independent` (other inputs give outputs within the
evaluator's tolerance of the first: a constant answer would pass the evaluator), `too_fast` /
`too_slow` (eager time per call outside the window; the caller may rescale the batch and try
again), `compile_error`, `compile_mismatch` (torch.compile's output is not within the evaluator's
tolerance of eager's). `probe_error`: the probe itself failed (a bug of ours, or a task breaking it
in a way no stage caught).

Times are taken the evaluator's way (`worker.common.timed_call`: caches flushed, host clock around
the call and a device-wide synchronize), median of the calls in a short budget, with the GPU to
itself (`locks.DeviceLock`, exclusive) when a lock is given; everything else shares it.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from typing import Any

from cuda_agent.evaluate.result import Code

INIT_SEED, SEED_A, SEED_B = 1234, 42, 4242
HARNESS_LOCK = "harness"  # a request's `lock` when the pool holds the device lock for the probe
DETERMINISM = {"rtol": 1e-5, "atol": 1e-6}


class Reject(Exception):
    """A draft unfit to be a task: why (`reason`), and the facts measured before (`extra`)."""

    def __init__(self, reason: Code, message: str, **extra: Any):
        super().__init__(message)
        self.reason, self.message, self.extra = reason, message, extra


def _trace(exc: BaseException, limit: int = 2000) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[-limit:]


def _tensors(out: Any) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise Reject(Code.NON_FLOAT_OUTPUT, f"forward returned {type(out).__name__}, not a tensor or tuple of tensors")


def _time_ms(timer: Any, fn: Any, args: list, budget_s: float, min_calls: int = 5, max_calls: int = 200) -> float:
    from cuda_agent.evaluate.worker.common import timed_call

    timed_call(timer, fn, args)  # warm
    ms: list[float] = []
    begun = time.perf_counter()
    while len(ms) < max_calls and (len(ms) < min_calls or time.perf_counter() - begun < budget_s):
        ms.append(timed_call(timer, fn, args)[1])
    ms.sort()
    return ms[len(ms) // 2]


class Prober:
    """The worker's handler: `cmd_probe` checks one draft per command."""

    def cmd_probe(self, **req: Any) -> dict[str, Any]:
        """Check one draft (request keys: source, name, device, window_ms, atol, rtol, budget_s, lock).
        Returns {accepted, reason (a Code's value or None), message, eager_ms, compile_ms,
        peak_bytes, out_shapes} with the facts measured before a rejection."""
        try:
            return {"accepted": True, "reason": None, "message": "", **probe(req)}
        except Reject as r:
            return {"accepted": False, "reason": r.reason.value, "message": r.message, **r.extra}
        except BaseException as exc:  # noqa: BLE001 - the reply must come back whatever happened (SystemExit too)
            return {"accepted": False, "reason": Code.PROBE_ERROR.value, "message": _trace(exc)}
        finally:
            _release()


def probe(req: dict[str, Any]) -> dict[str, Any]:
    """The facts of a draft fit to be a task; raises `Reject` for one that is not."""
    import torch

    try:
        return _probe(req)
    except torch.OutOfMemoryError as exc:
        # Out of memory outside the forward (the checks and the timing allocate too) is the same
        # verdict, and the pool probes the draft again alone when others share its GPU.
        raise Reject(Code.OUT_OF_MEMORY, _trace(exc, 600)) from None


@contextlib.contextmanager
def _held_by_harness():
    """The device lock, held by the pool for this sandboxed probe (filters.ProbePool._call)."""
    from cuda_agent.evaluate.worker.serve import request

    request("device_lock", hold=True)
    try:
        yield
    finally:
        request("device_lock", hold=False)


def _probe(req: dict[str, Any]) -> dict[str, Any]:
    import torch

    from cuda_agent.evaluate.locks import DeviceLock
    from cuda_agent.evaluate.timing import Timer

    device = torch.device(req["device"])
    lock = DeviceLock(req["lock"]) if req.get("lock") and req["lock"] != HARNESS_LOCK else None

    def exclusive():  # a fresh context each time: a lock's context manager serves one `with` only
        if req.get("lock") == HARNESS_LOCK:
            return _held_by_harness()
        return lock.exclusive(600) if lock else contextlib.nullcontext()
    atol, rtol = req["atol"], req["rtol"]
    lo, hi = req["window_ms"]
    ns: dict[str, Any] = {"__name__": f"synth_{req['name']}"}
    try:
        exec(compile(req["source"], f"<{req['name']}>", "exec"), ns)
        model_cls, get_inputs, get_init = ns["Model"], ns["get_inputs"], ns["get_init_inputs"]
    except Exception as exc:  # noqa: BLE001 - any failure of the module is the draft's
        raise Reject(Code.LOAD_ERROR, _trace(exc)) from None
    try:
        torch.manual_seed(INIT_SEED)
        model = model_cls(*get_init()).to(device)
    except torch.OutOfMemoryError as exc:
        raise Reject(Code.OUT_OF_MEMORY, _trace(exc, 600)) from None
    except Exception as exc:  # noqa: BLE001
        raise Reject(Code.INIT_ERROR, _trace(exc)) from None

    def inputs(seed: int) -> list:
        torch.manual_seed(seed)
        with torch.device(device):
            xs = list(get_inputs())
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    try:
        with torch.no_grad():
            xa, xb = inputs(SEED_A), inputs(SEED_B)
            a1 = _tensors(model(*xa))
            a2 = _tensors(model(*xa))
            b = _tensors(model(*xb))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Reject:
        raise
    except torch.OutOfMemoryError as exc:
        raise Reject(Code.OUT_OF_MEMORY, _trace(exc, 600)) from None
    except Exception as exc:  # noqa: BLE001
        raise Reject(Code.EAGER_ERROR, _trace(exc)) from None
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = 3 * sum(t.numel() * t.element_size() for t in (*a1, *[x for x in xa if isinstance(x, torch.Tensor)]))
    shapes = [list(t.shape) for t in a1]
    for t in a1:
        if not t.is_floating_point():
            raise Reject(Code.NON_FLOAT_OUTPUT, f"an output has dtype {t.dtype}; tasks return floating-point tensors")
        if not bool(torch.isfinite(t).all()):
            raise Reject(Code.NON_FINITE, f"an output of shape {list(t.shape)} holds inf or nan")
    for x, y in zip(a1, a2):
        if not torch.allclose(x, y, **DETERMINISM):
            err = (x - y).abs().max().item()
            raise Reject(Code.NONDETERMINISTIC, f"the same inputs twice gave outputs {err:.3g} apart (max abs)")
    if all(t.numel() > 1 and float(t.max() - t.min()) <= 1e-6 * max(1.0, float(t.abs().max())) for t in a1):
        raise Reject(Code.CONSTANT_OUTPUT, f"every output element is the same ({float(a1[0].flatten()[0]):.6g})")
    if all(torch.allclose(x, y, atol=atol, rtol=rtol) for x, y in zip(a1, b)):
        raise Reject(Code.INPUT_INDEPENDENT, f"outputs for other inputs are within atol={atol}, rtol={rtol} of "
                     "the first: a constant answer would pass the evaluator")

    timer = Timer(device)
    with exclusive():
        eager_ms = _time_ms(timer, model, xa, req["budget_s"])
    facts = {"eager_ms": round(eager_ms, 5), "peak_bytes": int(peak), "out_shapes": shapes}
    if eager_ms < lo:
        raise Reject(Code.TOO_FAST, f"eager takes {eager_ms:.4g} ms per call, under the window's {lo} ms", **facts)
    if eager_ms > hi:
        raise Reject(Code.TOO_SLOW, f"eager takes {eager_ms:.4g} ms per call, over the window's {hi} ms", **facts)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            c1 = _tensors(compiled(*xa))
    except Reject:
        raise
    except torch.OutOfMemoryError as exc:
        raise Reject(Code.OUT_OF_MEMORY, _trace(exc, 600), **facts) from None
    except Exception as exc:  # noqa: BLE001
        raise Reject(Code.COMPILE_ERROR, _trace(exc), **facts) from None
    for x, y in zip(a1, c1):
        if x.shape != y.shape or not torch.allclose(x, y, atol=atol, rtol=rtol):
            err = (x - y).abs().max().item() if x.shape == y.shape else float("nan")
            raise Reject(Code.COMPILE_MISMATCH, f"torch.compile's output differs from eager's by {err:.3g} "
                         f"(max abs; atol={atol}, rtol={rtol})", **facts)
    with exclusive():
        compile_ms = _time_ms(timer, compiled, xa, req["budget_s"])
    return {**facts, "compile_ms": round(compile_ms, 5)}


def _release() -> None:
    """Give back what the last draft left cached: other probes share the GPU."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
