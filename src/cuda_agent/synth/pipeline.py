"""`cuda-agent synth`: drafts -> decontamination -> filters -> deduplication -> dataset.

Attempt i of a run draws its draft from (seed, i) alone (`compose.attempt_rng`). Drafts at or over the
similarity threshold to a KernelBench task are rejected before they run (`too_similar`); the others go
through the filters (`filters.ProbePool.fit`) several at a time. Verdicts are committed in attempt
order, whatever order they finish in: a draft whose structure matches an accepted task is rejected
then (`duplicate`), and the dataset is the same for the same seed whatever the parallelism (up to
timings near the window's edges). Each commit is a line appended to `tasks.jsonl` or `rejections.jsonl`
and flushed, so a killed run resumes after its last committed attempt. At the end: `tasks.parquet`
(the same rows) and `stats.md` with plots.

Output folder: `synth.json` (the settings; a resumed run must use the same), `tasks.jsonl`,
`tasks.parquet`, `rejections.jsonl`, `stats.md` and its PNGs, `probe.log` (what the tasks printed).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cuda_agent.errors import CudaAgentError, UsageError
from cuda_agent.evaluate.result import Code
from cuda_agent.parquet import write_rows
from cuda_agent.synth import COMPOSERS
from cuda_agent.synth.compose import Draft, compose_offline
from cuda_agent.synth.config import SynthConfig
from cuda_agent.synth.filters import ProbePool
from cuda_agent.synth.similarity import SimilarityIndex, fingerprint, kernelbench_index

# Rejections that say the machinery failed rather than the draft; a run of them stops the run.
_BROKEN = (Code.PROBE_ERROR.value, Code.CRASH.value, Code.TIMEOUT.value)  # the probe failed, not the draft
_BROKEN_RUN = 20

ROW_KEYS = ("id", "code", "ops", "families", "num_ops", "eager_ms", "compile_ms", "max_kernelbench_similarity",
            "kernelbench_match", "seed", "attempt", "composer", "batch_size")


@dataclass
class Outcome:
    """What one attempt came to, before it is committed."""

    attempt: int
    draft: Draft | None
    row: dict[str, Any] | None = None
    rejection: dict[str, Any] | None = None


@dataclass
class Progress:
    """Callbacks for a progress display: `start(accepted, attempts_done)` once, `commit(outcome)` per attempt."""

    start: Callable[[int, int], None] = lambda accepted, done: None
    commit: Callable[[Outcome], None] = lambda outcome: None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines):  # a line cut short by a kill: dropped, that attempt runs again
                break
            raise UsageError(f"{path}:{i}: not valid JSON; the run folder is damaged (fix or delete that "
                             "line to resume)") from None
    return rows


def _rewrite_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def run_synth(cfg: SynthConfig, llm: Any = None, progress: Progress | None = None) -> dict[str, Any]:
    """Make (or resume making) the dataset in `cfg.out`; returns the run's summary."""
    progress = progress or Progress()
    if cfg.composer == "llm" and llm is None:
        raise UsageError("--composer llm needs --base-url and --model (an OpenAI-compatible endpoint)")
    if cfg.composer not in COMPOSERS:
        raise UsageError(f"--composer {cfg.composer!r}: choose {' or '.join(COMPOSERS)}")
    try:
        import pyarrow  # noqa: F401  (checked before hours of work, not after)
    except ImportError:
        raise UsageError("cuda-agent synth writes tasks.parquet with pyarrow; install it with "
                         "`pip install 'cuda-agent[data]'`") from None
    out = cfg.out
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "synth.json"
    settings = cfg.settings()
    if manifest.exists():
        before = json.loads(manifest.read_text()).get("settings", {})
        differ = sorted(k for k in settings if before.get(k) != settings[k])
        if differ:
            raise UsageError(f"{out} holds a synth run made with other settings ({', '.join(differ)}); pass the "
                             "same settings to resume it, or another --out")
    tasks_path, rej_path = out / "tasks.jsonl", out / "rejections.jsonl"
    rows, rejections = _read_jsonl(tasks_path), _read_jsonl(rej_path)
    _rewrite_jsonl(tasks_path, rows)  # drops a half-written last line, if any
    _rewrite_jsonl(rej_path, rejections)
    next_attempt = 1 + max((r["attempt"] for r in rows + rejections), default=-1)
    wall_before = json.loads(manifest.read_text()).get("wall_s", 0.0) if manifest.exists() else 0.0

    import torch

    meta = {"settings": settings, "n": cfg.n, "torch": torch.__version__, "wall_s": wall_before}
    manifest.write_text(json.dumps(meta, indent=1))
    kb = kernelbench_index(cfg.kernelbench) if cfg.kernelbench else None
    accepted = SimilarityIndex([])
    for r in rows:
        accepted.add(r["id"], r["code"])
    progress.start(len(rows), next_attempt)
    max_attempts = cfg.max_attempts or 50 * cfg.n
    t0 = time.monotonic()

    if len(rows) < cfg.n and next_attempt < max_attempts:
        gpus: list[str | None] = list(cfg.gpus) if cfg.device == "cuda" and cfg.gpus else [None]
        if cfg.device == "cuda" and not cfg.gpus:
            from cuda_agent.evaluate.device import gpu_indices

            gpus = [str(g) for g in gpu_indices()] or [None]
        workers = cfg.workers or (4 * len(gpus) if cfg.device == "cuda" else 2)
        from cuda_agent.evaluate.config import default_cache_dir

        pool = ProbePool(cfg.device, workers, gpus, out / "probe.log", default_cache_dir(), cfg.timeout_s,
                         window_ms=cfg.window(), isolation=cfg.isolation)
        try:
            _loop(cfg, llm, pool, kb, accepted, rows, rejections, next_attempt, max_attempts, workers,
                  tasks_path, rej_path, progress)
        finally:
            pool.close()
            meta["wall_s"] = wall_before + time.monotonic() - t0
            manifest.write_text(json.dumps(meta, indent=1))
    _write_parquet(out / "tasks.parquet", rows)
    from cuda_agent.synth.stats import write_stats

    attempts = 1 + max((r["attempt"] for r in rows + rejections), default=-1)
    stats = write_stats(out, rows, rejections, {
        "device": cfg.device, "seed": cfg.seed, "n": cfg.n, "window_ms": list(cfg.window()),
        "similarity_threshold": cfg.threshold, "composer": cfg.composer, "attempts": attempts,
        "wall_s": meta["wall_s"], "torch": torch.__version__,
        "kernelbench": str(cfg.kernelbench) if cfg.kernelbench else None})
    return {"out": str(out), "accepted": len(rows), "attempts": attempts, "wall_s": round(meta["wall_s"], 1),
            "rejections": _count(rejections), "stats": str(stats), "complete": len(rows) >= cfg.n}


def _count(rejections: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rejections:
        counts[r["reason"]] = counts.get(r["reason"], 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _loop(cfg, llm, pool, kb, accepted, rows, rejections, next_attempt, max_attempts, workers, tasks_path,
          rej_path, progress) -> None:
    done: dict[int, Outcome] = {}
    inflight: dict[int, Future] = {}
    commit_at = next_attempt
    with ThreadPoolExecutor(workers) as ex, open(tasks_path, "a") as tf, open(rej_path, "a") as rf:
        while len(rows) < cfg.n:
            # Keep the probes busy, but do not run far past what the dataset still needs.
            while (len(inflight) < 2 * workers and next_attempt < max_attempts
                   and len(inflight) + len(done) < 4 * (cfg.n - len(rows)) + workers):
                inflight[next_attempt] = ex.submit(_attempt, cfg, llm, pool, kb, next_attempt)
                next_attempt += 1
            if not inflight and commit_at not in done:
                break
            if commit_at not in done:
                finished, _ = wait(list(inflight.values()), return_when=FIRST_COMPLETED)
                for a in [a for a, f in inflight.items() if f in finished]:
                    done[a] = inflight.pop(a).result()
            while commit_at in done and len(rows) < cfg.n:
                o = done.pop(commit_at)
                if o.row is not None:
                    score, match = accepted.max_similarity(o.row["code"]) if len(accepted) else (0.0, None)
                    if score >= cfg.dedup_threshold:
                        o.rejection = _rejection(o, "duplicate", f"similarity {score:.3f} to accepted task {match}")
                        o.row = None
                    else:
                        accepted.add(o.row["id"], o.row["code"])
                        rows.append(o.row)
                        tf.write(json.dumps(o.row) + "\n")
                        tf.flush()
                if o.rejection is not None:
                    rejections.append(o.rejection)
                    rf.write(json.dumps(o.rejection) + "\n")
                    rf.flush()
                progress.commit(o)
                commit_at += 1
                last = rejections[-_BROKEN_RUN:]
                if (len(last) == _BROKEN_RUN and not (rows and rows[-1]["attempt"] > last[0]["attempt"])
                        and all(r["reason"] in _BROKEN for r in last)):
                    for f in inflight.values():
                        f.cancel()
                    raise CudaAgentError(
                        f"the last {_BROKEN_RUN} drafts all failed in the probe ({last[-1]['reason']}: "
                        f"{last[-1]['message'][:300]}); this is not the drafts' fault: see {cfg.out / 'probe.log'}. "
                        "Fix the cause and run the same command again: it resumes")
        for f in inflight.values():
            f.cancel()


def _rejection(o: Outcome, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    d = o.draft
    return {"attempt": o.attempt, "reason": reason, "message": message[:2000],
            "ops": list(d.ops) if d else [], "composer": d.composer if d else None, **extra}


def _attempt(cfg: SynthConfig, llm: Any, pool: ProbePool, kb: SimilarityIndex | None, attempt: int) -> Outcome:
    if cfg.composer == "llm":
        from cuda_agent.synth.llm_compose import LlmFailure, compose_llm

        got = compose_llm(llm, cfg.seed, attempt, cfg.mix, device=cfg.device)
        if isinstance(got, LlmFailure):
            return Outcome(attempt, None, rejection={"attempt": attempt, "reason": got.reason,
                                                     "message": got.message[:2000], "ops": list(got.ops),
                                                     "composer": "llm"})
        draft = got
    else:
        draft = compose_offline(cfg.seed, attempt, cfg.mix)
    o = Outcome(attempt, draft)
    if draft is None:
        o.rejection = _rejection(o, "no_chain", "no chain of operators with connecting shapes was found")
        return o
    try:
        fp = fingerprint(draft.source, draft.name)
    except ValueError as exc:
        o.rejection = _rejection(o, "load_error", str(exc))
        return o
    score, match = kb.max_similarity(fp) if kb is not None else (0.0, None)
    if score >= cfg.threshold:
        o.rejection = _rejection(o, "too_similar", f"AST similarity {score:.3f} to KernelBench {match}",
                                 kernelbench_match=match)
        return o
    v = pool.fit(draft.source, draft.name, draft.batch_scalable)
    if not v.ok:
        o.rejection = _rejection(o, v.reason or "rejected", v.message, **{k: v.facts[k] for k in ("eager_ms",)
                                                                           if k in v.facts})
        return o
    o.row = {"id": draft.name, "code": v.source, "ops": list(draft.ops), "families": list(draft.families),
             "num_ops": len(draft.ops), "eager_ms": v.facts["eager_ms"], "compile_ms": v.facts.get("compile_ms"),
             "max_kernelbench_similarity": round(score, 4), "kernelbench_match": match, "seed": cfg.seed,
             "attempt": attempt, "composer": draft.composer, "batch_size": v.batch}
    return o


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("code", pa.string()), ("ops", pa.list_(pa.string())),
                        ("families", pa.list_(pa.string())), ("num_ops", pa.int32()), ("eager_ms", pa.float64()),
                        ("compile_ms", pa.float64()), ("max_kernelbench_similarity", pa.float64()),
                        ("kernelbench_match", pa.string()), ("seed", pa.int64()), ("attempt", pa.int64()),
                        ("composer", pa.string()), ("batch_size", pa.int64())])
    write_rows(path, [{k: r.get(k) for k in ROW_KEYS} for r in rows], schema)
