"""Shape trials (`EvalConfig.shapes`): after its verdict at the task's sizes, a correct candidate
is called at other sizes of the task (shapes.py chooses them), so that a kernel with the task's
sizes baked in is told from a general one. Driven through the evaluation's own `run_batch`, as the
correctness trials are; the result's `generalization` says what was tried and what failed."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cuda_agent.evaluate import shapes
from cuda_agent.evaluate.process import WorkerFailure
from cuda_agent.evaluate.result import Code

if TYPE_CHECKING:
    from cuda_agent.evaluate.evaluation import Evaluation


def shape_trials(ev: "Evaluation") -> None:
    """Shape trials (`EvalConfig.shapes`, shapes.py): a correct candidate called on inputs of
    other sizes, the task's size constants scaled, one trial per size set, judged as the
    correctness trials are. Sizes the task cannot take (the reference fails or is not finite,
    the inputs would exceed the memory bound) and sizes that push a tensor past 2^31 elements
    where the task's stay below (32-bit indexing: Judge._past_32_bit) are skipped, not held
    against the candidate; so is running out of memory at sizes larger than the task's beside
    other evaluations, where the Evaluator will run it again alone (`_outgrown`). Its own failure
    there (an exception, a crash, a wrong answer, out of memory at a smaller size) means it does
    not generalise, which fails the evaluation only under `require_generalization` (KernelBench's
    contract fixes the shapes)."""
    from cuda_agent.evaluate.evaluation import weights_seed  # (the module that calls this one)

    cfg, t0 = ev.cfg, time.monotonic()
    sizes = shapes.analyse(ev.task.source)
    gen: dict[str, Any] = {"generalizes": None, "tried": [], "skipped": [], "why": sizes.why}
    ev.res.generalization = gen
    bound = shapes.max_in_bytes(ev.in_bytes or 0)
    seed = ev.seeds["timing"]
    try:
        for i, (scale, scaled, changed) in enumerate(shapes.size_sets(sizes)):
            if len(gen["tried"]) >= cfg.shapes:
                break
            seed = weights_seed(seed)  # one LCG step per size set: `seeds` replays them too
            entry: dict[str, Any] = {"sizes": scaled, "scale": scale, "seed": seed}
            key = f"g{i}"
            try:
                with ev.on_device():
                    outcomes, _ = ev.run_batch([(key, seed, None)], guarded=True, sizes={
                        "set": changed, "max_in_bytes": bound, "grows": scale > 1})
            except WorkerFailure as f:  # the candidate's (no_strays: role None), or the judge's: infra
                if f.role == "judge" or f.code in (Code.INFRA_ERROR, Code.REFERENCE_ERROR):
                    gen["why"] = f"shape trials stopped: the evaluator failed at sizes {scaled}: {f.message[-1000:]}"
                    break
                if (why := _outgrown(scale, f.code, f.message, ev.retry_alone)) is not None:
                    gen["skipped"].append({**entry, "why": why, "reason": f.code.value})
                else:
                    gen["tried"].append({**entry, "ok": False, "reason": f.code.value, "message": f.message[-2000:]})
                if ev.candidate.proc.poll() is not None:
                    gen["why"] = "the candidate's process ended in a shape trial: no more were tried"
                    break
                continue
            if key not in outcomes:
                gen["skipped"].append({**entry, "why": ev.skipped.get(key, "")[-1000:]})
                continue
            code, verdict, _ = outcomes[key]
            if (why := _outgrown(scale, code, (verdict or {}).get("message") or "", ev.retry_alone)) is not None:
                gen["skipped"].append({**entry, "why": why, "reason": code.value})
                continue
            entry.update(ok=code is None, reason=None if code is None else code.value,
                         message=(verdict or {}).get("message") or "")
            if code is None and isinstance((verdict or {}).get("error"), dict):
                entry["error"] = verdict["error"]
            gen["tried"].append(entry)
    finally:
        ev.phase("shapes", t0)
    tried = gen["tried"]
    if tried:
        gen["generalizes"] = all(t["ok"] for t in tried)
        failed = [t for t in tried if not t["ok"]]
        gen["why"] = gen["why"] if not failed and gen["why"] else (
            f"correct at {len(tried)} other size set(s)" if not failed else
            f"failed at {len(failed)} of {len(tried)} other size set(s), first at {failed[0]['sizes']}: "
            f"{failed[0]['reason']}")
    elif gen["why"] is None:
        gen["why"] = ("every other size set was skipped: the task cannot take it" if gen["skipped"]
                      else "no size set changes the inputs")
    if gen["generalizes"] is False and cfg.require_generalization:
        first = next(t for t in tried if not t["ok"])
        ev.res.add(Code.SHAPE_SPECIFIC, f"correct at the task's sizes but not at {first['sizes']} "
                     f"({first['reason']}: {first['message'][:1000]}); --require-generalization asks for "
                     "a kernel correct at every size the task can take")
        ev.res.correct = False


def _outgrown(scale: float, code: Code | None, message: str, retry_alone: bool) -> str | None:
    """Why a shape trial's failure is not counted in this try: the candidate ran out of memory at
    sizes larger than the task's, beside other evaluations, and a second try alone will follow
    (`retry_alone`, the Evaluator's first try). A kernel's scratch memory grows with its inputs (an
    im2col buffer, a split-K workspace) and the GPU is shared, so at 1.5x an honest kernel may find
    none left; that says nothing of sizes baked in. The skip carries `reason: out_of_memory`, the
    Evaluator's cue to run the evaluation again with the device to itself, where out of memory
    counts: so a kernel that feigns it (raises the error, or asks for more than the device has) at
    larger sizes still fails them. At a smaller size, which takes less than the task's own, and
    where no second try follows, it always counts. None: count the failure."""
    if code is not Code.OUT_OF_MEMORY or scale <= 1 or not retry_alone:
        return None
    return (f"out of memory at {scale}x the task's sizes, beside other evaluations: not counted in this try "
            f"(the second try, alone, counts it): {message[-500:]}")


def short_of_memory(gen: dict[str, Any] | None) -> dict[str, Any] | None:
    """The first size set that `shape_trials` skipped for out of memory beside other evaluations,
    or None: the Evaluator's cue for a second try alone."""
    return next((s for s in (gen or {}).get("skipped", []) if s.get("reason") == Code.OUT_OF_MEMORY.value), None)
