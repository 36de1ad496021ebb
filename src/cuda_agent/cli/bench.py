"""`bench` and `report`: solutions over a task set into the run store, metrics, the Markdown report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cuda_agent.cli.common import console, progress_bar, stdout_reserved
from cuda_agent.cli.options import (add_agent_options, add_eval_options, add_level_option, add_service_option,
                                    add_store_options, agent_setup, eval_config, load_tasks, positive,
                                    service_client, store_path)
from cuda_agent.errors import CudaAgentError


def cmd_bench(args: argparse.Namespace) -> int:
    """Evaluate a task set's solutions into the run store (resuming a run of the same name), print
    the metrics and write the report."""
    from cuda_agent.bench import runner
    from cuda_agent.bench.report import write_report
    from cuda_agent.bench.solutions import bundled_solutions, find_solutions
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate import Evaluator
    from cuda_agent.evaluate.device import resolve_device

    config = eval_config(args)
    config.device = device = resolve_device(config.device)
    tasks = load_tasks(args)
    err = console(stderr=True)
    if args.agent:
        if args.solutions or not (args.base_url and args.model):
            raise CudaAgentError("--agent takes --base-url and --model (and no --solutions): the agent writes "
                                 "the solutions")
        client, episode_cfg = agent_setup(args, config)
        solutions = []
    elif args.solutions:
        found = find_solutions(args.solutions, tasks)
        solutions = found.solutions
        if found.unmatched:
            shown = ", ".join(str(p) for p in found.unmatched[:5])
            more = f" and {len(found.unmatched) - 5} more" if len(found.unmatched) > 5 else ""
            err.print(f"[yellow]{len(found.unmatched)} file(s) under {args.solutions} match no task of the set "
                      f"(skipped): {shown}{more}[/]", highlight=False)
    elif args.taskset == "examples":
        solutions = bundled_solutions(device)
        tasks = [t for t in tasks if any(s.task.id == t.id for s in solutions)]  # gemm_cublas: CUDA only
    else:
        raise CudaAgentError("pass --solutions DIR: one candidate per task (level1/19_ReLU.py or a workspace "
                             "folder), or KernelBench's level_L_problem_P_sample_S_kernel.py files")
    missing = 0 if args.agent else len({t.id for t in tasks} - {s.task.id for s in solutions})
    if missing:
        err.print(f"[yellow]{missing} of {len(tasks)} task(s) have no solution: they count as failures[/]")
    name = args.run or (f"{args.model.replace('/', '_')}-{device}" if args.agent
                        else runner.default_run_name(args.taskset, args.solutions, device))
    out, db = args.out, store_path(args)
    made_by = f"agent:{args.model}@{args.base_url}" if args.agent else str(args.solutions or "bundled")
    params = runner.run_params(str(args.taskset), tasks, made_by, device, config)
    with Store(db) as store, stdout_reserved(args.json):
        resumed = store.open_run(name, params)
        with progress_bar(err, "correct") as progress:
            bar = progress.add_task(f"bench {name} on {device}", total=None, correct=0)
            tally = {"correct": 0}

            def start(pending: int) -> None:  # the runner knows what is left to do
                if resumed:
                    err.print(f"run {name!r}: " + ("rescoring every solution" if args.rescore
                                                   else f"resuming, {pending} to go"))
                progress.update(bar, total=pending)

            def advance(sol, res):
                tally["correct"] += bool(res.correct)
                progress.update(bar, advance=1, correct=tally["correct"],
                                description=f"{sol.task.id} #{sol.sample}")

            shown = runner.Progress(start=start, advance=advance)
            with service_client(args, config) or Evaluator(config, jobs=args.jobs) as ev:
                if args.agent:
                    evaluated = runner.run_agent(store, name, tasks, client, episode_cfg, out / name / "episodes",
                                                 ev, episodes=args.episodes, progress=shown, rescore=args.rescore)
                else:
                    evaluated = runner.run(store, name, solutions, ev, rescore=args.rescore, progress=shown)
        summary = runner.summarize_run(store, name)
        report = write_report(store, name, out / name) if not args.no_report else None
    if args.json:
        print(json.dumps({"run": name, "db": str(db), "report": str(report) if report else None,
                          "evaluated": evaluated, **summary.to_json()}))
        return 0
    print_metrics(summary, f"{name}: {len(tasks)} tasks on {device}")
    if report:
        print(f"report: {report}")
    return 0


def print_metrics(summary, title: str) -> None:
    """A run's metrics per level (the report's table) and its failures by reason, on stdout."""
    from rich.table import Table

    from cuda_agent.bench.report import METRIC_COLUMNS, metric_cells, metric_groups

    table = Table(title=title, title_justify="left")
    for col in ("level", *METRIC_COLUMNS):
        table.add_column(col)
    for label, m in metric_groups(summary.best).items():
        table.add_row(label, *metric_cells(m))
    console().print(table)
    if summary.reasons:
        console().print("failures: " + ", ".join(f"{k} {v}" for k, v in summary.reasons.items()), highlight=False)


def cmd_report(args: argparse.Namespace) -> int:
    from cuda_agent.bench.report import write_report
    from cuda_agent.bench.store import Store

    db = store_path(args)
    if not db.is_file():
        raise CudaAgentError(f"{db}: no run store here; run `cuda-agent bench` first or pass --db")
    folder = args.out / (args.run if not args.compare else f"{args.run}-vs-{args.compare}")
    with Store(db) as store:
        store.require_run(args.run)
        if args.compare:
            store.require_run(args.compare)
        path = write_report(store, args.run, folder, compare=args.compare)
    print(path)
    return 0


def add_parsers(sub) -> None:
    """bench, report."""
    p = sub.add_parser("bench", help="evaluate solutions over a task set: metrics, run store, report",
                       description="Evaluate every solution of a task set (in parallel, over every GPU), keep "
                       "each verdict in a SQLite run store as it arrives (a run of the same name resumes), "
                       "print the metrics per level and write a Markdown report with plots.",
                       epilog="example: cuda-agent bench KernelBench/ --level 1 --solutions runs/my_model/ "
                       "--device cuda --run my_model")
    p.add_argument("taskset", help="`examples` (the bundled tasks), a KernelBench checkout, its KernelBench/ "
                   "folder or a folder of level1/..., a task file, or a dataset file (.jsonl, .parquet)")
    p.add_argument("--solutions", type=Path, default=None,
                   help="folder of candidates: one per task (level1/19_ReLU.py, 19_ReLU.py or a workspace "
                   "folder of that name) and/or KernelBench's level_L_problem_P_sample_S_kernel.py files; "
                   "default for `examples`: the bundled candidates")
    add_level_option(p)
    p.add_argument("--run", default=None, help="run name (default: <solutions folder>-<device>); the same "
                   "name with the same arguments resumes")
    p.add_argument("--rescore", action="store_true", help="evaluate every solution again with this evaluator")
    p.add_argument("--jobs", type=positive(int), default=None,
                   help="evaluations at a time (default: 2 per GPU, 2 on the CPU backend; through the service: "
                   "the service's --jobs)")
    add_store_options(p, "where the run store and the reports go")
    p.add_argument("--no-report", action="store_true", help="do not write the report")
    p.add_argument("--agent", action="store_true", help="the solutions are written by the agent: one episode "
                   "per task with the model of --base-url/--model (episodes under OUT/RUN/episodes/)")
    p.add_argument("--episodes", type=positive(int), default=4, help="agent episodes at a time (default 4)")
    add_agent_options(p, required=False)
    add_eval_options(p)
    add_service_option(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("report", help="write the Markdown report of a run (or two, side by side)",
                       description="Write report.md with tables and PNG plots (speedups per level, fast_p "
                       "curves, failures by reason) for RUN, compared with RUN2 when given.",
                       epilog="example: cuda-agent report my_model --compare baseline_model")
    p.add_argument("run", help="a run name from `cuda-agent bench`")
    p.add_argument("--compare", metavar="RUN2", default=None, help="a second run, side by side")
    add_store_options(p, "the folder of the run store; the report goes to OUT/RUN")
    p.set_defaults(func=cmd_report)
