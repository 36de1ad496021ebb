"""The [speed] targets, measured and printed as a table.

    python benchmarks/evaluator.py --device cuda [--jobs 4] [--repeat 5] [--solutions DIR --kernelbench KB]

Candidates: the bundled examples for the device (both forms), plus honest KernelBench solutions
(`benchmarks/solutions/level1/*.py` against KB/level1/) when given. Steps, all in a fresh cache:

1. cold build of one workspace (no cache), then the same build again (a cache hit);
2. a first pass over every candidate with an `Evaluator` (fills the build and baseline caches);
3. latency: each candidate evaluated again, one at a time: the median wall time of a full
   evaluation (correctness trials, stress trials, timing of the candidate) with everything cached;
4. throughput: every candidate `--rounds` times through the Evaluator, `--jobs` at a time:
   evaluations per GPU-minute;
5. stability: one candidate `--repeat` times: max/min of its speedup over eager.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cuda_agent.evaluate import EvalConfig, Evaluator, load_candidate
from cuda_agent.evaluate.build import build_extension
from cuda_agent.evaluate.device import cuda_arch, resolve_device
from cuda_agent.examples import list_examples
from cuda_agent.tasks import load_task


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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--jobs", type=int, default=None, help="evaluations at a time (default: 2 per GPU)")
    p.add_argument("--rounds", type=int, default=3, help="passes over the candidates for throughput")
    p.add_argument("--repeat", type=int, default=5, help="evaluations of one candidate for stability")
    p.add_argument("--solutions", default=None)
    p.add_argument("--kernelbench", default=None)
    p.add_argument("--policy", default="kernelbench")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args()
    device = resolve_device(args.device)
    cache = Path(tempfile.mkdtemp(prefix="cuda-agent-bench-"))
    cfg = EvalConfig(device=device, cache_dir=cache, policy=args.policy)
    cands = candidates(device, args.solutions, args.kernelbench)
    console = Console(stderr=True)
    figures: dict[str, float] = {}

    # 1. cold build and cache hit of one workspace
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

    with Evaluator(cfg, jobs=args.jobs) as ev:
        n_gpus = len(ev.gpus)
        # 2. fill the caches
        t0 = time.monotonic()
        first = ev.map([(t, c) for _, t, c in cands])
        console.print(f"first pass: {len(cands)} evaluations in {time.monotonic() - t0:.1f} s")
        bad = [name for (name, _, _), r in zip(cands, first) if not r.correct]
        if bad:
            console.print(f"[red]not correct: {bad}[/]")
        # 3. latency with everything cached, one at a time
        walls = []
        for name, t, c in cands:
            t0 = time.monotonic()
            ev.evaluate(t, c)
            walls.append(time.monotonic() - t0)
        figures["full_eval_median_s"] = statistics.median(walls)
        # 4. throughput
        batch = [(t, c) for _ in range(args.rounds) for _, t, c in cands]
        t0 = time.monotonic()
        ev.map(batch)
        minutes = (time.monotonic() - t0) / 60
        figures["evals_per_gpu_minute"] = len(batch) / minutes / n_gpus
        figures["evals_per_minute"] = len(batch) / minutes
        figures["gpus"] = n_gpus
        # 5. stability
        name, t, c = next(x for x in cands if x[0].endswith("/single")) if device == "cuda" else cands[0]
        speedups = [ev.evaluate(t, c).speedup_eager or 0.0 for _ in range(args.repeat)]
        figures["stability_max_over_min"] = max(speedups) / min(speedups) if min(speedups) > 0 else float("inf")
        figures["stability_candidate"] = name
        figures["warm_workers"] = ev.stats()["warm"] / max(ev.stats()["workers"], 1)

    where = f"{n_gpus} GPU(s)" if device == "cuda" else "CPU backend"
    table = Table(title=f"evaluator on {device} ({where}, {len(cands)} candidates)", title_justify="left")
    for col in ("measure", "value", "target"):
        table.add_column(col)
    table.add_row("cold build of one workspace", f"{figures['cold_build_s']:.1f} s", "<= 20 s")
    table.add_row("build cache hit", f"{figures['cache_hit_s'] * 1e3:.0f} ms", "<= 200 ms")
    table.add_row("full evaluation, all cached (median)", f"{figures['full_eval_median_s']:.2f} s", "<= 2 s")
    table.add_row(f"throughput ({args.rounds} x {len(cands)}, jobs {ev.jobs})",
                  f"{figures['evals_per_gpu_minute']:.1f} / GPU-min", ">= 30 / GPU-min")
    table.add_row(f"stability ({args.repeat} x {figures['stability_candidate']})",
                  f"{(figures['stability_max_over_min'] - 1) * 100:.2f} % (max/min - 1)", "<= 1 %")
    table.add_row("workers handed out warm", f"{figures['warm_workers'] * 100:.0f} %", "")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
