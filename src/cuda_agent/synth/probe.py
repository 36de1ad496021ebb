"""The filters' worker process: runs drafted tasks and says whether each is fit to be a task.

    python -m cuda_agent.synth.probe    (started by `filters.ProbePool`; one JSON request per stdin line,
                                        one JSON reply per line on the original stdout)

A draft is checked in this order, cheapest first; the first failure is its rejection reason:
`load_error` (the module does not run), `init_error` (Model cannot be built), `eager_error` /
`out_of_memory` (forward fails), `non_float_output`, `non_finite`, `nondeterministic` (the same inputs
twice give different outputs), `constant_output` (every output element the same),
`input_independent` (other inputs give outputs within the evaluator's tolerance of the first: a
constant answer would pass the evaluator), `too_fast` / `too_slow` (eager time per call outside the
window; the caller may rescale the batch and try again), `compile_error`, `compile_mismatch`
(torch.compile's output is not within the evaluator's tolerance of eager's). `probe_error`: the
probe itself failed (a bug of ours, or a task breaking it in a way no stage caught).

Times are taken the evaluator's way (`worker.timed_call`: caches flushed, host clock around the call
and a device-wide synchronize), median of the calls in a short budget, with the GPU to itself
(`locks.DeviceLock`, exclusive) when a lock is given; everything else shares it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from typing import Any

INIT_SEED, SEED_A, SEED_B = 1234, 42, 4242
DETERMINISM = {"rtol": 1e-5, "atol": 1e-6}


class Reject(Exception):
    def __init__(self, reason: str, message: str, **extra: Any):
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
    raise Reject("non_float_output", f"forward returned {type(out).__name__}, not a tensor or tuple of tensors")


def _time_ms(timer: Any, fn: Any, args: list, budget_s: float, min_calls: int = 5, max_calls: int = 200) -> float:
    from cuda_agent.evaluate.worker import timed_call

    timed_call(timer, fn, args)  # warm
    ms: list[float] = []
    begun = time.perf_counter()
    while len(ms) < max_calls and (len(ms) < min_calls or time.perf_counter() - begun < budget_s):
        ms.append(timed_call(timer, fn, args)[1])
    ms.sort()
    return ms[len(ms) // 2]


def probe(req: dict[str, Any]) -> dict[str, Any]:
    """Check one draft (request keys: source, name, device, window_ms, atol, rtol, budget_s, lock)."""
    import torch

    try:
        return {"ok": True, **_probe(req)}
    except Reject as r:
        return {"ok": False, "reason": r.reason, "message": r.message, **r.extra}
    except torch.OutOfMemoryError as exc:
        # Out of memory outside the forward (the checks and the timing allocate too) is the same verdict,
        # and the pool probes the draft again alone when others share its GPU; the first 500-task H200 run
        # lost 10 of 587 drafts to probe_error so.
        return {"ok": False, "reason": "out_of_memory", "message": _trace(exc, 600)}


def _probe(req: dict[str, Any]) -> dict[str, Any]:
    import torch

    from cuda_agent.evaluate.locks import DeviceLock
    from cuda_agent.evaluate.timing import Timer

    device = torch.device(req["device"])
    lock = DeviceLock(req["lock"]) if req.get("lock") else None

    def exclusive():  # a fresh context each time: a lock's context manager serves one `with` only
        return lock.exclusive(600) if lock else contextlib.nullcontext()
    atol, rtol = req["atol"], req["rtol"]
    lo, hi = req["window_ms"]
    ns: dict[str, Any] = {"__name__": f"synth_{req['name']}"}
    try:
        exec(compile(req["source"], f"<{req['name']}>", "exec"), ns)
        model_cls, get_inputs, get_init = ns["Model"], ns["get_inputs"], ns["get_init_inputs"]
    except Exception as exc:  # noqa: BLE001 - any failure of the module is the draft's
        raise Reject("load_error", _trace(exc)) from None
    try:
        torch.manual_seed(INIT_SEED)
        model = model_cls(*get_init()).to(device)
    except torch.OutOfMemoryError as exc:
        raise Reject("out_of_memory", _trace(exc, 600)) from None
    except Exception as exc:  # noqa: BLE001
        raise Reject("init_error", _trace(exc)) from None

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
        raise Reject("out_of_memory", _trace(exc, 600)) from None
    except Exception as exc:  # noqa: BLE001
        raise Reject("eager_error", _trace(exc)) from None
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = 3 * sum(t.numel() * t.element_size() for t in (*a1, *[x for x in xa if isinstance(x, torch.Tensor)]))
    shapes = [list(t.shape) for t in a1]
    for t in a1:
        if not t.is_floating_point():
            raise Reject("non_float_output", f"an output has dtype {t.dtype}; tasks return floating-point tensors")
        if not bool(torch.isfinite(t).all()):
            raise Reject("non_finite", f"an output of shape {list(t.shape)} holds inf or nan")
    for x, y in zip(a1, a2):
        if not torch.allclose(x, y, **DETERMINISM):
            err = (x - y).abs().max().item()
            raise Reject("nondeterministic", f"the same inputs twice gave outputs {err:.3g} apart (max abs)")
    if all(t.numel() > 1 and float(t.max() - t.min()) <= 1e-6 * max(1.0, float(t.abs().max())) for t in a1):
        raise Reject("constant_output", f"every output element is the same ({float(a1[0].flatten()[0]):.6g})")
    if all(torch.allclose(x, y, atol=atol, rtol=rtol) for x, y in zip(a1, b)):
        raise Reject("input_independent", f"outputs for other inputs are within atol={atol}, rtol={rtol} of "
                     "the first: a constant answer would pass the evaluator")

    timer = Timer(device)
    with exclusive():
        eager_ms = _time_ms(timer, model, xa, req["budget_s"])
    facts = {"eager_ms": round(eager_ms, 5), "peak_bytes": int(peak), "out_shapes": shapes}
    if eager_ms < lo:
        raise Reject("too_fast", f"eager takes {eager_ms:.4g} ms per call, under the window's {lo} ms", **facts)
    if eager_ms > hi:
        raise Reject("too_slow", f"eager takes {eager_ms:.4g} ms per call, over the window's {hi} ms", **facts)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            c1 = _tensors(compiled(*xa))
    except Reject:
        raise
    except torch.OutOfMemoryError as exc:
        raise Reject("out_of_memory", _trace(exc, 600), **facts) from None
    except Exception as exc:  # noqa: BLE001
        raise Reject("compile_error", _trace(exc), **facts) from None
    for x, y in zip(a1, c1):
        if x.shape != y.shape or not torch.allclose(x, y, atol=atol, rtol=rtol):
            err = (x - y).abs().max().item() if x.shape == y.shape else float("nan")
            raise Reject("compile_mismatch", f"torch.compile's output differs from eager's by {err:.3g} "
                         f"(max abs; atol={atol}, rtol={rtol})", **facts)
    with exclusive():
        compile_ms = _time_ms(timer, compiled, xa, req["budget_s"])
    return {**facts, "compile_ms": round(compile_ms, 5)}


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the tasks print goes to the log, not into the replies
    import torch  # noqa: F401  (warm before the first request)

    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        try:
            reply = probe(req)
        except BaseException as exc:  # noqa: BLE001 - the reply must come back whatever happened
            reply = {"ok": False, "reason": "probe_error", "message": _trace(exc)}
        reply["id"] = req.get("id")
        proto.write(json.dumps(reply) + "\n")
        _release()


def _release() -> None:
    """Give back what the last draft left cached: other probes share the GPU."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
