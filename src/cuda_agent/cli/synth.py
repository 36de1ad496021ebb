"""`synth`: a dataset of training tasks, composed, filtered and decontaminated."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuda_agent.cli.common import EXIT_FAILED, console, progress_bar, stdout_reserved
from cuda_agent.cli.options import Flag, add_config_options, add_endpoint_options, chat_client, config_kwargs, parsed, positive
from cuda_agent.errors import CudaAgentError
from cuda_agent.evaluate.config import DEVICES, ISOLATION_MODES
from cuda_agent.synth import COMPOSERS
from cuda_agent.synth.config import SynthConfig, parse_mix, parse_window


SYNTH_FLAGS = (
    Flag("out", "--out", Path),
    Flag("n", "--n", positive(int)),
    Flag("device", "--device", choices=DEVICES),
    Flag("seed", "--seed", int),
    Flag("composer", "--composer", choices=COMPOSERS),
    Flag("kernelbench", "--kernelbench", Path),
    Flag("threshold", "--threshold", float),
    Flag("window_ms", "--window", parsed(parse_window), metavar="LO,HI"),
    Flag("mix", "--mix", parsed(parse_mix)),
    Flag("workers", "--workers", positive(int)),
    Flag("timeout_s", "--timeout", positive(float)),
    Flag("max_attempts", "--max-attempts", positive(int)),
    Flag("isolation", "--isolation", choices=ISOLATION_MODES),
)


def cmd_synth(args: argparse.Namespace) -> int:
    """Make (or resume) a dataset of tasks: compose, filter, decontaminate, deduplicate; print a summary."""
    from cuda_agent.synth.pipeline import Progress as SynthProgress, run_synth

    err = console(stderr=True)
    if args.kernelbench is None:
        err.print("[yellow]no --kernelbench: drafts are not checked against KernelBench "
                  "(max_kernelbench_similarity is 0 for all)[/]")
    llm = None
    if args.composer == "llm":
        if not (args.base_url and args.model):
            raise CudaAgentError("--composer llm takes --base-url and --model")
        llm = chat_client(args)
    cfg = SynthConfig(**config_kwargs(args, SYNTH_FLAGS), model=args.model if args.composer == "llm" else None)
    device = cfg.device
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
    add_config_options(p, SynthConfig, SYNTH_FLAGS)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    add_endpoint_options(p, required=False, when="--composer llm: ")
    p.set_defaults(func=cmd_synth)
