"""How much device memory an evaluation of a task needs, so that the Evaluator admits to a GPU only
what fits (`locks.MemoryLedger`) instead of letting evaluations run out of memory beside each other
and drain the pool for second tries alone.

What a task needs is learned from its first evaluation: the judge reports the bytes of one call's
inputs and reference output, and what the reference call held beyond them at its peak (`prepare`:
an intermediate such as a materialised matrix, a library's workspace), recorded per task under the
cache directory. An evaluation holds the inputs and output about `IN_COPIES` and `OUT_COPIES`
times across its processes at its peak (judge: inputs, the reference's copy of them, the reference
output, the received output, the comparison's temporaries; candidate: its input slot and output; a
baseline runner: one call's inputs and output), plus a CUDA context per process, plus the
reference's working memory once for the judge and once for each baseline runner (eager and
compile) when the baselines are measured: every process that ran the reference keeps that memory
in its allocator's cache. A task not measured yet is admitted by its inputs' bytes alone, told
by the judge on the meta device before any input is made (`estimate`), or at once where they
cannot be told; that evaluation measures it. A second try alone, after a first that ran short,
holds the whole budget whatever the need (`Evaluator`).

That model misses what only the run shows: the allocator's cache kept across trials, a stress
trial's second copy, fragmentation, a candidate's own workspace. So each evaluation that finishes
also reports what the judge's and the candidate's processes held at their peak (torch's reserved
memory, plus a context each; `record_peak`), and a task needs at least that. The last evaluation's
figure is kept, not the largest: one candidate that holds much more than the task's others (or
says so: the candidate's process reports its own) raises the need of the next evaluation only."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cuda_agent.evaluate.cache_layout import MEMORY
from cuda_agent.evaluate.device import gpu_memory_mib

IN_COPIES, OUT_COPIES = 3, 5
CONTEXT = 512 << 20  # one process's CUDA context
CONTEXTS = 3 * CONTEXT  # judge, candidate and one baseline runner
BASELINE_RUNNERS = 2  # eager and torch.compile
JUDGE_RESERVED_MAX = 1 << 30  # device memory a judge kept for the next evaluation may hold in torch's cache
BUDGET_FRACTION = 0.9  # of the GPU's memory, before the warm pool's share (the rest: fragmentation)


def _path(cache_dir: str | os.PathLike, source: str) -> Path:
    return Path(cache_dir) / MEMORY / f"{hashlib.sha256(source.encode()).hexdigest()[:16]}.json"


def read_record(path: Path) -> dict:
    """A cache record (a JSON object) at `path`; {} where there is none or it is unreadable."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def record(cache_dir: str | os.PathLike, source: str, in_bytes: int, out_bytes: int, ref_work: int = 0) -> None:
    """Remember the bytes of one call's inputs and output of the task with this source, and the
    reference's working memory beyond them (written only when they differ from what is recorded)."""
    path = _path(cache_dir, source)
    old = read_record(path)
    rec = {**old, "in_bytes": int(in_bytes), "out_bytes": int(out_bytes), "ref_work": max(int(ref_work), 0)}
    if old != rec:
        write_record(path, rec)


def record_peak(cache_dir: str | os.PathLike, source: str, peak: int) -> None:
    """Remember what an evaluation of the task held at its peak across the judge's and candidate's
    processes (bytes, contexts included), once its inputs and output are recorded (`record`)."""
    path = _path(cache_dir, source)
    old = read_record(path)
    if "in_bytes" in old and old.get("peak") != int(peak):
        write_record(path, {**old, "peak": int(peak)})


def write_record(path: Path, rec: dict) -> None:
    """Write a cache record whole (a reader never sees half of it); nothing where the cache is
    read-only (what it would have spared is redone next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rec))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache (for memory records: every evaluation of the task is admitted unmeasured)


def need(cache_dir: str | os.PathLike, source: str, baselines_cached: bool = True) -> int:
    """Bytes of device memory an evaluation of the task is expected to hold at its peak; 0 when it
    has not been measured. `baselines_cached`: False when the evaluation will run the baselines'
    runners (each runs the reference: its working memory once more per runner)."""
    rec = read_record(_path(cache_dir, source))
    try:
        ins, outs, work = int(rec["in_bytes"]), int(rec["out_bytes"]), max(int(rec.get("ref_work", 0)), 0)
        peak = max(int(rec.get("peak", 0)), 0)
    except (KeyError, TypeError, ValueError):
        return 0
    model = _model(ins, outs, work, baselines_cached)
    if peak and not baselines_cached:  # the measured peak is the judge's and candidate's alone
        peak += BASELINE_RUNNERS * (CONTEXT + ins + outs + work)
    return max(model, peak)


def estimate(in_bytes: int, baselines_cached: bool = True) -> int:
    """What an evaluation of a task not measured yet is expected to hold at its peak, from the bytes
    of one call's inputs alone (the judge makes get_inputs() on the meta device first): `need`'s
    model with no output and no working memory. Admitted by it rather than at once, the first
    evaluations of a batch's large tasks do not all start together, run out of memory beside each
    other and queue for second tries alone."""
    return _model(max(int(in_bytes), 0), 0, 0, baselines_cached)


def _model(ins: int, outs: int, work: int, baselines_cached: bool) -> int:
    runs = 1 if baselines_cached else 1 + BASELINE_RUNNERS
    return IN_COPIES * ins + OUT_COPIES * outs + CONTEXTS + runs * work


def budget(gpu: str, spares: int = 0, jobs: int = 0) -> int | None:
    """Bytes the evaluations on GPU `gpu` (index or UUID) may be promised beside a warm pool of
    `spares` workers and `jobs` evaluations at once, or None where nvidia-smi cannot tell its
    memory. What is held outside any promise comes off first: each spare's CUDA context, the judges
    the pool keeps between evaluations (up to half its size, `WarmPool.give_back`), each a context
    and up to `JUDGE_RESERVED_MAX` of cached memory, and the judge's and candidate's contexts of
    each evaluation still building, before it is admitted. At least a quarter of the GPU stays
    promisable."""
    mib = gpu_memory_mib(gpu)
    if not mib:
        return None
    total = mib << 20
    pool = spares * CONTEXT + max(spares // 2, 1 if spares else 0) * (CONTEXT + JUDGE_RESERVED_MAX)
    return max(int(total * BUDGET_FRACTION) - pool - jobs * 2 * CONTEXT, total // 4)
