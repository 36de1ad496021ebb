"""`synth`: a dataset of training tasks, composed, filtered and decontaminated."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuda_agent.cli.common import EXIT_FAILED, console, progress_bar, stdout_reserved
from cuda_agent.cli.options import add_endpoint_options, chat_client, positive
from cuda_agent.evaluate.config import ISOLATION_MODES
from cuda_agent.errors import CudaAgentError
from cuda_agent.synth import COMPOSERS


def _window(text: str | None) -> tuple[float, float] | None:
    """--window LO,HI in ms."""
    if not text:
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise CudaAgentError(f"--window {text!r}: give LO,HI in milliseconds, e.g. 1,100") from None
    if not 0 <= lo < hi:
        raise CudaAgentError(f"--window {text!r}: LO must be >= 0 and under HI")
    return lo, hi


def cmd_synth(args: argparse.Namespace) -> int:
    """Make (or resume) a dataset of tasks: compose, filter, decontaminate, deduplicate; print a summary."""
    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.synth.compose import parse_mix
    from cuda_agent.synth.pipeline import Progress as SynthProgress, SynthConfig, run_synth

    device = resolve_device(args.device)
    window = _window(args.window)
    err = console(stderr=True)
    if args.kernelbench is None:
        err.print("[yellow]no --kernelbench: drafts are not checked against KernelBench "
                  "(max_kernelbench_similarity is 0 for all)[/]")
    llm = None
    if args.composer == "llm":
        if not (args.base_url and args.model):
            raise CudaAgentError("--composer llm takes --base-url and --model")
        llm = chat_client(args)
    cfg = SynthConfig(out=args.out, n=args.n, device=device, seed=args.seed, composer=args.composer,
                      mix=parse_mix(args.mix), window_ms=window, threshold=args.threshold,
                      kernelbench=args.kernelbench, workers=args.workers, timeout_s=args.timeout,
                      max_attempts=args.max_attempts, model=args.model if args.composer == "llm" else None,
                      isolation=args.isolation)
    with progress_bar(err, "attempts") as progress, stdout_reserved(args.json):
        bar = progress.add_task(f"synth {args.out} on {device}", total=args.n, attempts=0)

        def start(accepted: int, done: int) -> None:
            if done:
                err.print(f"resuming {args.out}: {accepted} accepted of {done} attempts")
            progress.update(bar, completed=accepted, attempts=done)

        def commit(o) -> None:
            progress.update(bar, advance=1 if o.row else 0, attempts=o.attempt + 1,
                            description=f"synth {o.draft.name if o.draft else o.attempt}")

        summary = run_synth(cfg, llm, SynthProgress(start=start, commit=commit))
    if args.json:
        print(json.dumps(summary))
        return 0 if summary["complete"] else EXIT_FAILED
    from rich.table import Table

    table = Table(title=f"synth {args.out} on {device}", title_justify="left")
    table.add_column("measure")
    table.add_column("value")
    for k in ("accepted", "attempts", "wall_s"):
        table.add_row(k, str(summary[k]))
    table.add_row("rejections", ", ".join(f"{k} {v}" for k, v in summary["rejections"].items()) or "none")
    console().print(table)
    print(f"tasks: {args.out / 'tasks.parquet'}\nstats: {summary['stats']}")
    if not summary["complete"]:
        print(f"stopped at --max-attempts with {summary['accepted']} of {args.n} tasks", file=sys.stderr)
        return EXIT_FAILED
    return 0


def add_parsers(sub) -> None:
    """synth."""
    p = sub.add_parser("synth", help="make a dataset of training tasks: compose operators, filter, decontaminate",
                       description="Compose 1-5 catalogued operators into KernelBench-format tasks (offline, or "
                       "written by an LLM), keep those that run in eager and torch.compile and agree, are "
                       "deterministic, give non-constant input-dependent output and take a time inside the "
                       "window, drop those too similar to KernelBench or to each other. OUT gets tasks.jsonl, "
                       "tasks.parquet, rejections.jsonl and stats.md; the same OUT resumes.",
                       epilog="example: cuda-agent synth --out data/ops --n 500 --device cuda --seed 0 "
                       "--kernelbench KernelBench/")
    p.add_argument("--out", type=Path, required=True, help="output folder (a run there resumes)")
    p.add_argument("--n", type=positive(int), required=True, help="tasks to accept")
    p.add_argument("--device", default="auto", help="cuda, cpu or auto (default: cuda when there is a GPU)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: attempt i draws from (seed, i) (default 0)")
    p.add_argument("--composer", choices=COMPOSERS, default="offline",
                   help="offline (shape-aware, default) or llm (--base-url/--model write the tasks)")
    p.add_argument("--kernelbench", type=Path, default=None,
                   help="a KernelBench checkout: drafts at or over --threshold AST similarity to its levels 1-3 "
                   "are dropped")
    p.add_argument("--threshold", type=float, default=0.9, help="decontamination threshold (default 0.9)")
    p.add_argument("--window", default=None, help="eager time per call to keep, LO,HI in ms "
                   "(default 1,100 on cuda, 0.5,50 on cpu)")
    p.add_argument("--mix", default=None, help="share of tasks by operator count, e.g. "
                   "1:0.05,2:0.838,3:0.07,4:0.03,5:0.012 (the default, close to the paper's)")
    p.add_argument("--workers", type=positive(int), default=None,
                   help="probe processes (default 4 per GPU, 2 on the CPU backend)")
    p.add_argument("--timeout", type=positive(float), default=300.0, help="seconds one draft may take (default 300)")
    p.add_argument("--max-attempts", type=positive(int), default=None,
                   help="give up after this many drafts (default 50 x N)")
    p.add_argument("--isolation", choices=ISOLATION_MODES, default="required",
                   help="the drafts' sandbox: required (default: refuse to start without one), auto (run "
                   "unsandboxed with a warning where the machine cannot make one) or off")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    add_endpoint_options(p, required=False, when="--composer llm: ")
    p.set_defaults(func=cmd_synth)
