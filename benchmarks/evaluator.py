"""The [speed] targets, measured and printed as a table.

    python benchmarks/evaluator.py --device cuda [--jobs-per-gpu 4] [--repeat 5] [--solutions DIR --kernelbench KB]

Candidates: the bundled examples for the device (both forms), plus honest KernelBench solutions
(`benchmarks/solutions/level1/*.py` against KB/level1/) when given. Steps, all in a fresh cache:

1. cold build of one workspace (no cache), then the same build again (a cache hit);
2. a first pass over every candidate with an `Evaluator` (fills the build and baseline caches);
3. latency: each candidate evaluated again, one at a time: the median wall time of a full
   evaluation (correctness trials, stress trials, timing of the candidate) with everything cached,
   and a table of every candidate's verdict: its first (cold) and cached evaluation's time, the
   eager, compile and candidate times, the speedups, the reward and the reason codes;
4. throughput: every candidate `--rounds` times per GPU through an Evaluator on one GPU,
   `--jobs-per-gpu` at a time: evaluations per GPU-minute; on a machine with more GPUs, again over
   all of them (the same work per GPU), and the ratio of the two rates (scaling);
5. stability: the slowest tasks of 0.1 ms or more (`--stability-candidates` of them), each
   `--repeat` times: max/min of the speedup over eager, with the GPU's clock, power and
   temperature during each evaluation (gpu_sampler.py; without nvidia-ml-py, none).

Figures go to `--json` after every step, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cuda_agent.evaluate import EvalConfig, Evaluator, load_candidate
from cuda_agent.evaluate.build import build_extension
from cuda_agent.evaluate.device import cuda_arch, gpu_indices, resolve_device
from cuda_agent.examples import list_examples
from cuda_agent.tasks import load_task

from gpu_sampler import open_sampler  # benchmarks/gpu_sampler.py, beside this script


STEPS = {"build", "latency", "stability", "throughput"}


def candidates(device: str, solutions: str | None, kernelbench: str | None) -> list[tuple[str, object, object]]:
    out = []
    for ex in list_examples():
        for form, path in ex.candidates(device).items():
            out.append((f"{ex.name}/{form}", load_task(ex.task), load_candidate(path)))
    if solutions and kernelbench:
        for sol in sorted(Path(solutions).glob("level*/*.py")):
            task = Path(kernelbench) / sol.parent.name / sol.name
            out.append((f"{sol.parent.name}/{sol.stem}", load_task(task), load_candidate(sol)))
    return out


def config_overrides(p: argparse.ArgumentParser, items: list[str], option: str = "--set") -> dict:
    """EvalConfig fields from `option` FIELD=VALUE arguments (VALUE as JSON, else a string)."""
    fields = {f.name for f in dataclasses.fields(EvalConfig)}
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in fields:
            p.error(f"{option} {item}: expected FIELD=VALUE with FIELD one of {sorted(fields)}")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--jobs-per-gpu", type=int, default=4, help="evaluations at a time per GPU")
    p.add_argument("--gpus", default=None,
                   help="comma-separated GPU indices to use (default: every GPU nvidia-smi lists)")
    p.add_argument("--rounds", type=int, default=3, help="passes over the candidates for throughput")
    p.add_argument("--repeat", type=int, default=5, help="evaluations of one candidate for stability")
    p.add_argument("--stability-candidates", type=int, default=3,
                   help="how many candidates (tasks of 0.1 ms or more, slowest first) the stability step measures")
    p.add_argument("--compare-uncached", action="store_true",
                   help="also measure stability with the eager baseline interleaved in every evaluation")
    p.add_argument("--solutions", default=None)
    p.add_argument("--kernelbench", default=None)
    p.add_argument("--policy", default="kernelbench")
    p.add_argument("--only", default=None,
                   help="comma-separated substrings: keep only the candidates whose name contains one")
    p.add_argument("--timing-budget", type=float, default=None, help="EvalConfig.timing_budget_s (default: its own)")
    p.add_argument("--min-iters", type=int, default=None, help="EvalConfig.min_iters (default: its own)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any other EvalConfig field, e.g. --set timed_check_fraction=0.01 --set batch_calls=1")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here (after every step)")
    p.add_argument("--steps", default=",".join(sorted(STEPS)),
                   help="which measurements, comma-separated (default: all); the caches are always filled first")
    args = p.parse_args()
    device = resolve_device(args.device)
    cache = Path(tempfile.mkdtemp(prefix="cuda-agent-bench-"))
    extra = {k: v for k, v in (("timing_budget_s", args.timing_budget), ("min_iters", args.min_iters)) if v is not None}
    extra.update(config_overrides(p, args.set))
    try:
        cfg = EvalConfig(**{"device": device, "cache_dir": cache, "policy": args.policy, **extra})
    except (TypeError, ValueError) as exc:
        p.error(f"--set: {exc}")
    cands = candidates(device, args.solutions, args.kernelbench)
    if args.only:
        keys = args.only.split(",")
        cands = [c for c in cands if any(k in c[0] for k in keys)]
        if not cands:
            p.error(f"--only {args.only}: no candidate's name contains any of these")
    console = Console(stderr=True)
    figures: dict = {"device": device, "candidates": len(cands), "config": cfg.to_json()}

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1))

    steps = set(args.steps.split(","))
    unknown = steps - STEPS
    if unknown:
        p.error(f"--steps: unknown {sorted(unknown)}; choose from {sorted(STEPS)}")

    # 1. cold build and cache hit of one workspace
    if "build" in steps:
        ws = next(c for name, _, c in cands if name.endswith("/workspace") and c.compiled_sources)
        arch = cuda_arch() if device == "cuda" else None
        for label in ("cold_build_s", "cache_hit_s"):
            t0 = time.monotonic()
            built = build_extension(ws, device, arch, cache / "build-bench", cfg.build_timeout_s)
            figures[label] = time.monotonic() - t0
            if built is None or not built.ok:
                console.print(f"build failed:\n{built.log if built else 'no sources'}")
                return 1
        console.print(f"build: cold {figures['cold_build_s']:.1f} s, hit {figures['cache_hit_s'] * 1e3:.1f} ms")
        save()

    gpus = [str(g) for g in gpu_indices()] if device == "cuda" else [None]
    if args.gpus and device == "cuda":
        chosen = args.gpus.split(",")
        if not set(chosen) <= set(gpus):
            p.error(f"--gpus {args.gpus}: this machine's GPUs are {','.join(gpus) or 'none'}")
        gpus = chosen
    jobs = args.jobs_per_gpu
    spread: dict[str, float] = {}
    with Evaluator(cfg, jobs=jobs * len(gpus), gpus=gpus if device == "cuda" else None) as ev:
        # 2. fill the caches
        t0 = time.monotonic()
        first = ev.map([(t, c) for _, t, c in cands])
        figures["first_pass_s"] = time.monotonic() - t0
        console.print(f"first pass: {len(cands)} evaluations in {figures['first_pass_s']:.1f} s")
        bad = {name: [f"{x.code.value}: {x.message[:300]}" for x in r.reasons]
               for (name, _, _), r in zip(cands, first) if not r.correct}
        if bad:
            console.print(f"[red]not correct: {bad}[/]")
            figures["not_correct"] = bad
        if "latency" in steps:
            latency(ev, cands, first, figures, console)
            save()
        if "stability" in steps:
            spread = stability(ev, cfg, cands, first, args, figures, console)
            save()

    # 4. throughput: one GPU, then all of them
    if "throughput" in steps:
        for n_gpus in sorted({1, len(gpus)}):
            throughput(cfg, cands, gpus[:n_gpus] if device == "cuda" else None, jobs, args.rounds, spread,
                       figures, console)
            save()
        if len(gpus) > 1:
            figures["scaling"] = figures[f"evals_per_minute_{len(gpus)}gpu"] / figures["evals_per_minute_1gpu"]
        save()

    where = f"{len(gpus)} GPU(s)" if device == "cuda" else "CPU backend"
    table = Table(title=f"evaluator on {device} ({where}, {len(cands)} candidates)", title_justify="left")
    for col in ("measure", "value", "target"):
        table.add_column(col)

    def row(label: str, key: str, fmt, target: str) -> None:
        if figures.get(key) is not None:
            table.add_row(label, fmt(figures[key]), target)

    row("cold build of one workspace", "cold_build_s", lambda v: f"{v:.1f} s", "<= 20 s")
    row("build cache hit", "cache_hit_s", lambda v: f"{v * 1e3:.0f} ms", "<= 200 ms")
    row("full evaluation, all cached (median)", "full_eval_median_s", lambda v: f"{v:.2f} s", "<= 2 s")
    row(f"throughput, 1 GPU ({args.rounds} x {len(cands)}, {jobs} at a time)", "evals_per_minute_1gpu",
        lambda v: f"{v:.1f} / GPU-min", ">= 30 / GPU-min")
    row(f"throughput, {len(gpus)} GPUs ({len(gpus) * args.rounds} x {len(cands)}, {jobs * len(gpus)} at a "
        "time), vs 1 GPU", "scaling",
        lambda v: f"{figures[f'evals_per_minute_{len(gpus)}gpu']:.1f} / min = {v:.2f}x", ">= 1.8x on 2 GPUs")
    row(f"stability ({args.repeat} x {len(spread)} tasks >= 0.1 ms, worst)", "stability_max_over_min",
        lambda v: f"{(v - 1) * 100:.2f} % (max/min - 1)", "<= 1 %")
    row("the same, eager interleaved in each evaluation", "stability_uncached_max_over_min",
        lambda v: f"{(v - 1) * 100:.2f} % (max/min - 1)", "")
    row(f"stability under load ({args.rounds} x, {jobs} at a time, worst)", "stability_under_load_worst",
        lambda v: f"{(v - 1) * 100:.2f} % (max/min - 1)", "")
    row("workers handed out warm (last throughput run)", "warm_workers", lambda v: f"{v * 100:.0f} %", "")
    Console().print(table)
    if "full_eval" in figures:
        Console(width=200).print(verdict_table(figures["full_eval"]))
    return 0


def latency(ev, cands, first, figures, console) -> None:
    """3. Each candidate once more, one at a time, everything cached: wall time, phases and the
    verdict (with the first pass's time, its caches cold, beside it)."""
    walls, results = [], []
    for name, t, c in cands:
        t0 = time.monotonic()
        results.append(ev.evaluate(t, c))
        walls.append(time.monotonic() - t0)
    figures["full_eval_median_s"] = statistics.median(walls)
    figures["full_eval"] = {name: {"wall_s": round(w, 3), "first_pass_s": round(f.phases_s.get("total", 0.0), 3),
                                   "phases_s": r.phases_s,
                                   "samples": r.times_ms["candidate"].n if r.times_ms.get("candidate") else 0,
                                   "baselines": (r.timing_check or {}).get("baselines", {}).get("source"),
                                   "median_ms": {k: v.median for k, v in r.times_ms.items() if v},
                                   "speedup_eager": r.speedup_eager, "speedup_compile": r.speedup_compile,
                                   "reward": r.reward, "reasons": [x.code.value for x in r.reasons]}
                            for (name, _, _), w, f, r in zip(cands, walls, first, results)}
    figures["phases_median_s"] = _median_phases(results)
    console.print("median phases: " + " ".join(f"{k}={v:.2f}s" for k, v in figures["phases_median_s"].items()))
    console.print("latency: " + " ".join(f"{n}={w:.2f}s" for (n, _, _), w in zip(cands, walls)))


def verdict_table(full_eval: dict) -> Table:
    """The latency step's evaluations, a row per candidate."""
    table = Table(title="verdicts (first pass: caches cold, evaluations in parallel; cached: one at a time)",
                  title_justify="left")
    for col in ("candidate", "first s", "cached s", "eager ms", "compile ms", "candidate ms", "x eager",
                "x compile", "reward", "reasons"):
        table.add_column(col)
    for name, e in full_eval.items():
        ms = e["median_ms"]
        table.add_row(name, f"{e['first_pass_s']:.1f}", f"{e['wall_s']:.2f}",
                      *(f"{ms[k]:.4g}" if k in ms else "-" for k in ("eager", "compile", "candidate")),
                      *(f"{e[k]:.2f}" if e[k] else "-" for k in ("speedup_eager", "speedup_compile")),
                      str(e["reward"]), ",".join(e["reasons"]) or "-")
    return table


def stability(ev, cfg, cands, first, args, figures, console) -> dict[str, float]:
    """5. The correct candidates whose task takes 0.1 ms or more in eager (the target's scope), the
    slowest tasks first, each --repeat times: max/min of the speedup over eager. With
    --compare-uncached, again with the eager baseline interleaved in every evaluation (drift or
    noise?)."""
    eager = {name: (r.times_ms["eager"].median if r.times_ms.get("eager") else 0.0)
             for (name, _, _), r in zip(cands, first) if r.correct}
    scoped = sorted((x for x in cands if eager.get(x[0], 0.0) >= 0.1), key=lambda x: -eager[x[0]])
    scoped = scoped[: args.stability_candidates]
    spread: dict[str, float] = {}
    clocks = open_sampler(say=console.print) if cfg.device == "cuda" else None
    for name, t, c in scoped:
        rs, windows = [], []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            rs.append(ev.evaluate(t, c))
            windows.append((t0, time.monotonic()))
        if clocks is not None:  # the clock the GPU ran at: a power-bound kernel is timed at its mercy
            figures.setdefault("stability_gpu", {})[name] = [clocks.window(*w) for w in windows]
        speedups = [r.speedup_eager or 0.0 for r in rs]
        spread[name] = max(speedups) / min(speedups) if min(speedups) > 0 else float("inf")
        figures.setdefault("stability_candidate_ms", {})[name] = [
            r.times_ms["candidate"].median if r.times_ms.get("candidate") else None for r in rs]
        # the spread inside each evaluation (interquartile range over median of its samples): noise
        # a longer budget averages away, unlike a shift between evaluations
        figures.setdefault("stability_candidate_n", {})[name] = [
            r.times_ms["candidate"].n if r.times_ms.get("candidate") else None for r in rs]
        figures.setdefault("stability_candidate_iqr", {})[name] = [
            round(r.times_ms["candidate"].iqr / r.times_ms["candidate"].median, 4)
            if r.times_ms.get("candidate") else None for r in rs]
        # the same spread with other estimators of the candidate's time than the median (the
        # baseline is cached, so it cancels): would a lower one be steadier between processes?
        stats = [r.times_ms["candidate"] for r in rs if r.times_ms.get("candidate")]
        by_est = {est: [getattr(x, est) for x in stats] for est in ("median", "mean", "min")}
        figures.setdefault("stability_by_estimator", {})[name] = {
            est: round(max(v) / min(v) - 1, 4) for est, v in by_est.items()
            if len(v) == len(rs) and all(x for x in v)}
        console.print(f"stability {name} (eager {eager[name]:.3f} ms): " + " ".join(f"{s:.4f}" for s in speedups)
                      + ("" if clocks is None else "; SM MHz, W: " + " ".join(
                          f"{g.get('sm_mhz', 0):.0f},{g.get('power_w', 0):.0f}" for g in figures["stability_gpu"][name])))
    if clocks is not None:
        clocks.close()
    figures["stability"] = spread
    figures["stability_max_over_min"] = max(spread.values(), default=None)
    if args.compare_uncached:
        plain = dataclasses.replace(cfg, baseline_cache=False, compile_baseline=False)
        figures["stability_uncached"] = {}
        for name, t, c in scoped:
            rs = [ev.evaluate(t, c, plain) for _ in range(args.repeat)]
            sp = [r.speedup_eager or 0.0 for r in rs]
            figures["stability_uncached"][name] = {
                "max_over_min": max(sp) / min(sp) if min(sp) > 0 else float("inf"), "speedups": sp,
                "eager_ms": [r.times_ms["eager"].median if r.times_ms.get("eager") else None for r in rs],
                "candidate_ms": [r.times_ms["candidate"].median if r.times_ms.get("candidate") else None for r in rs]}
            console.print(f"uncached {name}: " + " ".join(f"{x:.4f}" for x in sp))
        figures["stability_uncached_max_over_min"] = max(
            (v["max_over_min"] for v in figures["stability_uncached"].values()), default=None)
    return spread


def throughput(cfg, cands, gpus, jobs, rounds, spread, figures, console) -> None:
    """4. Every candidate `rounds` times per GPU through an Evaluator on `gpus`, `jobs` per GPU at a
    time: each GPU gets the same work whatever their number, so the drain at the end (slots idle
    while the last evaluations finish) weighs the same in every run."""
    n_gpus = len(gpus) if gpus else 1
    order = [x for _ in range(rounds * n_gpus) for x in cands]
    batch = [(t, c) for _, t, c in order]
    with Evaluator(cfg, jobs=jobs * n_gpus, gpus=gpus) as ev:
        ev.evaluate(*cands[0][1:])  # the pools warm up before the clock starts
        t0, cpu0, machine0 = time.monotonic(), time.process_time(), _machine_cpu()
        loaded = ev.map(batch)
        wall = time.monotonic() - t0
        minutes = wall / 60
        figures[f"evals_per_minute_{n_gpus}gpu"] = len(batch) / minutes
        # What bounds the rate: the harness process (one interpreter: near 1 core means its GIL),
        # or the machine's cores (busy share over the run)?
        busy, total = (b - a for a, b in zip(machine0, _machine_cpu()))
        figures[f"harness_cores_{n_gpus}gpu"] = round((time.process_time() - cpu0) / wall, 2)
        figures[f"machine_busy_{n_gpus}gpu"] = round(busy / total, 3) if total else None
        # CPU-seconds of the whole machine per evaluation (workers' starts, waits, the harness)
        figures[f"machine_cpu_s_per_eval_{n_gpus}gpu"] = round(busy / os.sysconf("SC_CLK_TCK") / len(batch), 2)
        # the same candidates' speedups while other evaluations share the GPU (max/min)
        by_name: dict[str, list[float]] = {}
        for (name, _, _), r in zip(order, loaded):
            if name in spread and r.speedup_eager:
                by_name.setdefault(name, []).append(r.speedup_eager)
        under = {k: max(v) / min(v) for k, v in by_name.items()}
        figures[f"stability_under_load_{n_gpus}gpu"] = under
        if n_gpus == 1 and under:
            figures["stability_under_load_worst"] = max(under.values())
        figures[f"not_correct_under_load_{n_gpus}gpu"] = sum(not r.correct for r in loaded)
        figures[f"phases_under_load_{n_gpus}gpu"] = _median_phases(loaded)
        figures["warm_workers"] = ev.stats()["warm"] / max(ev.stats()["workers"], 1)
        figures[f"judges_reused_{n_gpus}gpu"] = round(ev.stats()["judges_reused"] / (len(batch) + 1), 3)
    console.print(f"throughput on {n_gpus} GPU(s): {len(batch)} evaluations, {len(batch) / minutes:.1f}/min "
                  f"(harness {figures[f'harness_cores_{n_gpus}gpu']} cores, machine "
                  f"{figures[f'machine_busy_{n_gpus}gpu']} busy, "
                  f"{figures[f'machine_cpu_s_per_eval_{n_gpus}gpu']} CPU-s per evaluation, "
                  f"{figures[f'judges_reused_{n_gpus}gpu'] * 100:.0f}% of judges kept from an earlier one)")


def _machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat ((0, 0) where unreadable)."""
    try:
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _median_phases(results) -> dict[str, float]:
    phases = [r.phases_s for r in results]
    return {k: statistics.median(float(p.get(k, 0.0)) for p in phases) for k in sorted({k for p in phases for k in p})}


if __name__ == "__main__":
    sys.exit(main())
