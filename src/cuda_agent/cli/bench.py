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
    the metrics and write the report; a dump split by model is one run per model."""
    from cuda_agent.bench import runner
    from cuda_agent.bench.dumps import is_dump
    from cuda_agent.bench.solutions import bundled_solutions, find_solutions
    from cuda_agent.evaluate.device import resolve_device

    config = eval_config(args)
    config.device = device = resolve_device(config.device)
    tasks = load_tasks(args)
    err = console(stderr=True)
    if (args.columns or args.split_by or args.tasks_from_dump) and not (args.solutions and is_dump(args.solutions)):
        raise CudaAgentError("--columns, --split-by and --tasks-from-dump read a dump: pass it as --solutions FILE "
                             "(a .json, .jsonl or .parquet file, or a folder of them)")
    claimed: dict = {}
    if args.agent:
        if args.solutions or not (args.base_url and args.model):
            raise CudaAgentError("--agent takes --base-url and --model (and no --solutions): the agent writes "
                                 "the solutions")
        runs = [(args.run or f"{args.model.replace('/', '_')}-{device}", [])]
    elif args.solutions and is_dump(args.solutions):
        runs, claimed = _dump_runs(args, tasks, device, err)
    elif args.solutions:
        from cuda_agent.bench.dumps import run_folder_claims

        found = find_solutions(args.solutions, tasks)
        _warn_unmatched(err, found.unmatched, args.solutions)
        name = args.run or runner.default_run_name(args.taskset, args.solutions, device)
        runs = [(name, found.solutions)]
        claimed = {name: run_folder_claims(Path(args.solutions), found.solutions)}  # KernelBench's own verdicts
    elif args.taskset == "examples":
        solutions = bundled_solutions(device)
        tasks = [t for t in tasks if any(s.task.id == t.id for s in solutions)]  # gemm_cublas: CUDA only
        runs = [(args.run or runner.default_run_name(args.taskset, None, device), solutions)]
    else:
        raise CudaAgentError("pass --solutions DIR: one candidate per task (level1/19_ReLU.py or a workspace "
                             "folder), or KernelBench's level_L_problem_P_sample_S_kernel.py files, or a dump "
                             "file (.json, .jsonl, .parquet)")
    for name, solutions in runs:
        _bench_one(args, config, tasks, name, solutions, claimed.get(name, []), err)
    return 0


def _warn_unmatched(err, unmatched: list, where) -> None:
    if unmatched:
        shown = ", ".join(str(p) for p in unmatched[:5])
        more = f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else ""
        err.print(f"[yellow]{len(unmatched)} solution(s) in {where} match no task of the set (skipped): "
                  f"{shown}{more}[/]", highlight=False)


def _dump_runs(args: argparse.Namespace, tasks: list, device: str, err) -> tuple[list, dict]:
    """A dump's solutions, written into OUT/RUN/solutions/ in KernelBench's run layout: one run (models
    as samples) or, with --split-by model, one per model; and per run what the dump claims of each."""
    from cuda_agent.bench.dump_match import dump_tasks, split_by_model, to_solutions
    from cuda_agent.bench.dumps import Columns, read_dump

    entries, shapes = read_dump(args.solutions, Columns.parse(args.columns) if args.columns else None)
    for file, shape in shapes.items():
        err.print(f"{file}: read as {shape}", highlight=False)
    if args.level:  # (the task set is cut to them already; a dump's own tasks are not)
        entries = [e for e in entries if e.level in args.level]
        if not entries:
            raise CudaAgentError(f"{args.solutions}: no kernel of level {', '.join(map(str, args.level))} in the dump")
    if args.tasks_from_dump:
        tasks[:] = dump_tasks(entries, tasks)
        err.print(f"{len(tasks)} task(s) from the dump's own reference code", highlight=False)
    base = args.run or f"{Path(args.solutions).stem}-{device}"
    groups = ({f"{base}-{m}": es for m, es in split_by_model(entries).items()} if args.split_by == "model"
              else {base: entries})
    runs, claimed = [], {}
    for name, group in groups.items():
        found, behind, mismatched = to_solutions(group, tasks, args.out / name / "solutions")
        _warn_unmatched(err, found.unmatched, args.solutions)
        for other, what in ((True, "not judged: the dump's reference is another task"),
                            (False, "judged, though the dump's reference differs a little")):
            ms = [m for m in mismatched if m.other is other]
            if ms:
                lines = "\n".join(f"  {m.entry.origin} -> {m.task.id}: {m.why}" for m in ms[:10])
                more = f"\n  and {len(ms) - 10} more" if len(ms) > 10 else ""
                err.print(f"[yellow]{name}: {len(ms)} solution(s) {what} (--tasks-from-dump judges them against "
                          f"the dump's own reference):\n{lines}{more}[/]", highlight=False, soft_wrap=True)
        runs.append((name, found.solutions))
        claimed[name] = [(task, sample, e.origin, {"model": e.model, **e.claimed})
                         for (task, sample), e in behind.items()]
    return runs, claimed


def _bench_one(args: argparse.Namespace, config, tasks: list, name: str, solutions: list, claimed: list,
               err) -> None:
    from cuda_agent.bench import runner
    from cuda_agent.bench.report import write_report
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate import Evaluator

    device = config.device
    missing = 0 if args.agent else len({t.id for t in tasks} - {s.task.id for s in solutions})
    if missing:
        err.print(f"[yellow]{name}: {missing} of {len(tasks)} task(s) have no solution: they count as failures[/]")
    out, db = args.out, store_path(args)
    made_by = f"agent:{args.model}@{args.base_url}" if args.agent else str(args.solutions or "bundled")
    params = runner.run_params(str(args.taskset), tasks, made_by, device, config)
    if args.agent:
        client, episode_cfg = agent_setup(args, config)
    with Store(db) as store, stdout_reserved(args.json):
        resumed = store.open_run(name, params)
        if claimed:
            store.put_claimed(name, claimed)
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
        return
    print_metrics(summary, f"{name}: {len(tasks)} tasks on {device}")
    if report:
        print(f"report: {report}")


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
                   "folder of that name) and/or KernelBench's level_L_problem_P_sample_S_kernel.py files; or a "
                   "published dump (.json, .jsonl, .parquet, or a folder of them): CUDA-L1's files, the "
                   "KernelBench leaderboard's, KernelBench's samples and the AI CUDA Engineer archive's are "
                   "recognised, any other through --columns; default for "
                   "`examples`: the bundled candidates")
    p.add_argument("--columns", default=None, metavar="KEY=COLUMN,...",
                   help="which column of a dump holds what: level=...,problem=...,code=... (or task=... for a "
                   "column of task names such as level1/19_ReLU, in place of level and problem) and optionally "
                   "model=..., sample=..., ref=..., the dump's claims correct=... and speedup=... (over eager; by "
                   "default the columns named correct and *speedup*), and base=0 where its problem ids count "
                   "from 0 (default 1); a code column of whole model replies gives their fenced ```python module, "
                   "one of file paths (relative to the dump) those files; a.b names key b of object a")
    p.add_argument("--tasks-from-dump", action="store_true",
                   help="judge a dump's kernels against the reference code it carries (CUDA-L1's ref_code), "
                   "not the task set's (whose names it keeps)")
    p.add_argument("--split-by", choices=["model"], default=None,
                   help="a dump of several models: one run per model (RUN-MODEL) instead of their kernels as "
                   "samples of one run")
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
