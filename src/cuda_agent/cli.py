"""The `cuda-agent` command line. Imports nothing heavy: torch is loaded by worker processes only."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

from cuda_agent import __version__
from cuda_agent.errors import CudaAgentError

EXIT_USAGE = 2


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: give integers separated by commas") from None


def _positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
        return v
    return parse


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="backend (default: auto = cuda when a GPU is present)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--policy", choices=["strict", "kernelbench", "none"], default="strict",
                   help="candidate rules: strict (default; only your own kernels inside forward), "
                        "kernelbench (PyTorch ops allowed in forward, every cheating check still on), "
                        "none (static checks off; for testing the runtime defences only)")
    p.add_argument("--trials", type=_positive(int), default=5, help="correctness trials (default 5)")
    p.add_argument("--stress-trials", type=int, default=2,
                   help="trials on inputs beyond the task's distribution that keep its structure "
                        "(zeros, signs, ranges, integer values; default 2)")
    p.add_argument("--atol", type=float, default=1e-2, help="absolute tolerance (default 1e-2)")
    p.add_argument("--rtol", type=float, default=1e-2, help="relative tolerance (default 1e-2)")
    p.add_argument("--seeds", type=_seeds, default=None,
                   help="replay a verdict: the `seeds.all` list of an earlier result, comma-separated")
    p.add_argument("--no-timing", action="store_true", help="check correctness only (reward at most 1)")
    p.add_argument("--no-compile-baseline", action="store_true",
                   help="skip the torch.compile baseline (reward at most 2)")
    p.add_argument("--no-baseline-cache", action="store_true",
                   help="measure eager and compile in this evaluation, interleaved with the candidate, "
                        "instead of reusing their cached timings for this task, device and software")
    p.add_argument("--timeout", type=_positive(float), default=300.0,
                   help="wall-clock limit of the evaluation after the build, seconds (default 300)")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="build cache (default: $CUDA_AGENT_CACHE or ~/.cache/cuda-agent)")


def _config(args: argparse.Namespace):
    from cuda_agent.evaluate import EvalConfig

    kw: dict[str, Any] = dict(device=args.device, policy=args.policy, trials=args.trials, stress_trials=args.stress_trials,
                              atol=args.atol, rtol=args.rtol, seeds=args.seeds,
                              timing=not args.no_timing, compile_baseline=not args.no_compile_baseline,
                              baseline_cache=not args.no_baseline_cache, timeout_s=args.timeout)
    if args.cache_dir is not None:
        kw["cache_dir"] = args.cache_dir
    try:
        return EvalConfig(**kw)
    except ValueError as exc:
        raise CudaAgentError(str(exc)) from None


@contextlib.contextmanager
def _stdout_reserved(active: bool) -> Iterator[None]:
    """While evaluating under --json, anything written to fd 1 goes to stderr instead, so stdout
    carries exactly one JSON object whatever a library or a child process prints."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _fmt_ms(stats) -> str:
    return "-" if stats is None else f"{stats.median:.4g}"


def _fmt_x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _console(stderr: bool = False):
    """A rich console; when the stream is not a terminal (a pipe, a log), lines are not wrapped at
    80 columns, so tables stay readable in logs."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=160)


def print_result(result, console=None) -> None:
    """A readable summary of one EvalResult: times, speedups, verdict, reasons."""
    from rich.table import Table

    console = console or _console()
    table = Table(title=f"{result.task}  <-  {result.candidate}", title_justify="left")
    for col in ("", "median ms", "IQR ms", "calls", "speedup"):
        table.add_column(col, justify="right" if col else "left")
    for name, st in result.times_ms.items():
        sp = {"candidate": None, "eager": result.speedup_eager, "compile": result.speedup_compile}[name]
        table.add_row(name, _fmt_ms(st), "-" if st is None else f"{st.iqr:.3g}",
                      "-" if st is None else str(st.n),
                      "" if name == "candidate" else ("-" if sp is None else f"candidate {_fmt_x(sp)}"))
    console.print(table)
    colour = {-1: "red", 1: "yellow", 2: "green", 3: "bold green"}[result.reward]
    dev = result.device.get("name") or result.device.get("type")
    console.print(f"compiled: {result.compiled}   correct: {result.correct}   "
                  f"reward: [{colour}]{result.reward}[/]   device: {dev}   "
                  f"time: {result.phases_s.get('total', 0):.1f} s")
    for r in result.reasons:
        style = "dim" if r.kind.value == "info" else "red"
        msg = r.message if len(r.message) < 1500 else r.message[:700] + "\n[...]\n" + r.message[-700:]
        console.print(f"[{style}]{r.code.value}[/] ({r.kind.value}): ", msg, markup=True, highlight=False)


def cmd_eval(args: argparse.Namespace) -> int:
    from cuda_agent.evaluate import evaluate, load_candidate
    from cuda_agent.tasks import load_task

    config = _config(args)
    task = load_task(args.task)
    candidate = load_candidate(args.candidate)
    with _stdout_reserved(args.json):
        result = evaluate(task, candidate, config)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print_result(result)
    return 0


def cmd_init_workspace(args: argparse.Namespace) -> int:
    from cuda_agent.tasks import load_task
    from cuda_agent.workspace import init_workspace

    path = init_workspace(load_task(args.task), Path(args.dir), device=args.device)
    print(f"workspace ready: {path}\nnext: cd {path} && read SKILL.md, then `bash utils/compile.sh`, "
          "`python3 -m utils.verification`, `python3 -m utils.profiling`")
    return 0


def cmd_workspace(args: argparse.Namespace) -> int:
    from cuda_agent.workspace.commands import main as ws_main

    return ws_main(args.command, Path(args.dir), args.rest)


def cmd_examples(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from cuda_agent.evaluate import evaluate, load_candidate
    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.examples import get_example, list_examples
    from cuda_agent.tasks import load_task

    config = _config(args)
    device = resolve_device(config.device)
    config.device = device
    examples = [get_example(n) for n in args.only] if args.only else list_examples()
    jobs = [(ex, form, path) for ex in examples for form, path in ex.candidates(device).items()
            if args.form in (None, form)]
    err = _console(stderr=True)
    results = []
    with _stdout_reserved(args.json), Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=err, transient=True,
    ) as progress:
        bar = progress.add_task(f"evaluating bundled examples on {device}", total=len(jobs))
        for ex, form, path in jobs:
            progress.update(bar, description=f"{ex.name} ({form})")
            res = evaluate(load_task(ex.task), load_candidate(path), config)
            results.append((ex, form, res))
            progress.advance(bar)
    if args.json:
        print(json.dumps({"device": device, "results": [
            {"example": ex.name, "form": form, **res.to_json()} for ex, form, res in results]}))
        return 0
    table = Table(title=f"bundled examples on {device}", title_justify="left")
    for col in ("example", "form", "correct", "reward", "eager ms", "compile ms", "candidate ms",
                "vs eager", "vs compile", "eval s", "reasons"):
        table.add_column(col)
    for ex, form, r in results:
        table.add_row(ex.name, form, str(r.correct), str(r.reward), _fmt_ms(r.times_ms["eager"]),
                      _fmt_ms(r.times_ms["compile"]), _fmt_ms(r.times_ms["candidate"]),
                      _fmt_x(r.speedup_eager), _fmt_x(r.speedup_compile),
                      f"{r.phases_s.get('total', 0):.1f}",
                      ", ".join(x.code.value for x in r.reasons) or "-")
    _console().print(table)
    return 0


def cmd_baselines(args: argparse.Namespace) -> int:
    """Measure (or read from the cache) every task's eager and compile baselines; print them with a
    self-check (the reference timed as a candidate: 1.00x when timing is fair); with --out, write
    KernelBench's results/timing layout."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from cuda_agent.evaluate import evaluate
    from cuda_agent.evaluate.baselines import baseline_candidate
    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.tasks import load_taskset

    config = _config(args)
    config.device = device = resolve_device(config.device)
    config.policy, config.trials, config.stress_trials = "none", 1, 0  # the reference is trusted code
    tasks = load_taskset(args.taskset, args.level)
    if not tasks:
        raise CudaAgentError(f"{args.taskset}: no tasks found (levels {args.level or 'all'})")
    rows = []
    with _stdout_reserved(args.json), Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=_console(stderr=True), transient=True,
    ) as progress:
        bar = progress.add_task(f"baselines on {device}", total=len(tasks))
        for task in tasks:
            progress.update(bar, description=task.id)
            res = evaluate(task, baseline_candidate(task.source, "eager"), config)
            rows.append((task, res))
            progress.advance(bar)
    written = _write_kernelbench_timing(rows, args.out) if args.out else []
    if args.json:
        print(json.dumps({"device": device, "written": [str(p) for p in written], "tasks": [
            {"task": t.id, "level": t.level, "eager": _stats_json(r.times_ms.get("eager")),
             "compile": _stats_json(r.times_ms.get("compile")),
             "source": (r.timing_check or {}).get("baselines", {}).get("source"),
             "self_check": r.speedup_eager, "reasons": [x.code.value for x in r.reasons]}
            for t, r in rows]}))
        return 0
    table = Table(title=f"baselines on {device}", title_justify="left")
    for col in ("task", "eager ms", "compile ms", "source", "self-check", "reasons"):
        table.add_column(col)
    for t, r in rows:
        table.add_row(t.id, _fmt_ms(r.times_ms["eager"]), _fmt_ms(r.times_ms["compile"]),
                      (r.timing_check or {}).get("baselines", {}).get("source", "-"), _fmt_x(r.speedup_eager),
                      ", ".join(x.code.value for x in r.reasons) or "-")
    _console().print(table)
    for p in written:
        print(f"wrote {p}")
    return 0


def _stats_json(st) -> dict[str, Any] | None:
    from dataclasses import asdict

    return None if st is None else asdict(st)


def _write_kernelbench_timing(rows, out: Path) -> list[Path]:
    """KernelBench's results/timing layout: <out>/<hardware>/baseline_time_torch.json and
    baseline_time_torch_compile_inductor_default.json, {"level1": {"19_ReLU.py": {"mean", "std",
    "min", "max", "num_trials", "hardware", "device"}}}, plus our median and IQR."""
    files = {"eager": "baseline_time_torch.json", "compile": "baseline_time_torch_compile_inductor_default.json"}
    docs: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in files}
    folder_name = None
    for task, res in rows:
        dev = res.device
        hardware = dev.get("name") or dev.get("type") or "unknown"
        folder_name = folder_name or hardware.replace(" ", "_")
        device = f"cuda:{dev.get('index', 0)}" if dev.get("type") == "cuda" else "cpu"
        level = f"level{task.level}" if task.level is not None else "examples"
        for which in files:
            st = res.times_ms.get(which)
            if st is None:
                continue
            docs[which].setdefault(level, {})[f"{task.name}.py"] = {
                "mean": round(st.mean if st.mean is not None else st.median, 6),
                "std": round(st.std or 0.0, 6), "min": round(st.min, 6), "max": round(st.max, 6),
                "num_trials": st.n, "median": round(st.median, 6), "iqr": round(st.iqr, 6),
                "hardware": hardware, "device": device,
            }
    folder = Path(out) / (folder_name or "unknown")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for which, name in files.items():
        if docs[which]:
            path = folder / name
            path.write_text(json.dumps(docs[which], indent=2, sort_keys=True) + "\n")
            written.append(path)
    return written


def _bundled_solutions(device: str):
    """The bundled examples' own candidates for `device`: single file as sample 0, workspace as 1."""
    from cuda_agent.bench.solutions import Solution
    from cuda_agent.examples import FORMS, list_examples
    from cuda_agent.tasks import example_tasks

    tasks = {t.name: t for t in example_tasks()}
    return [Solution(tasks[ex.name], FORMS.index(form), path)
            for ex in list_examples() for form, path in ex.candidates(device).items()]


def cmd_bench(args: argparse.Namespace) -> int:
    """Evaluate a task set's solutions into the run store (resuming a run of the same name), print
    the metrics and write the report."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from cuda_agent.bench import runner
    from cuda_agent.bench.report import write_report
    from cuda_agent.bench.solutions import find_solutions
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate import Evaluator
    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.tasks import load_taskset

    config = _config(args)
    config.device = device = resolve_device(config.device)
    tasks = load_taskset(args.taskset, args.level)
    if not tasks:
        raise CudaAgentError(f"{args.taskset}: no tasks found (levels {args.level or 'all'})")
    err = _console(stderr=True)
    if args.agent:
        if args.solutions or not (args.base_url and args.model):
            raise CudaAgentError("--agent takes --base-url and --model (and no --solutions): the agent writes "
                                 "the solutions")
        client, episode_cfg = _agent(args, config)
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
        solutions = _bundled_solutions(device)
        tasks = [t for t in tasks if any(s.task.id == t.id for s in solutions)]  # gemm_cublas: CUDA only
    else:
        raise CudaAgentError("pass --solutions DIR: one candidate per task (level1/19_ReLU.py or a workspace "
                             "folder), or KernelBench's level_L_problem_P_sample_S_kernel.py files")
    missing = 0 if args.agent else len({t.id for t in tasks} - {s.task.id for s in solutions})
    if missing:
        err.print(f"[yellow]{missing} of {len(tasks)} task(s) have no solution: they count as failures[/]")
    name = args.run or (f"{args.model.replace('/', '_')}-{device}" if args.agent
                        else runner.default_run_name(args.taskset, args.solutions, device))
    out, db = args.out, _store_path(args)
    made_by = f"agent:{args.model}@{args.base_url}" if args.agent else str(args.solutions or "bundled")
    params = runner.run_params(str(args.taskset), tasks, made_by, device, config)
    with Store(db) as store, _stdout_reserved(args.json):
        resumed = store.open_run(name, params)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[correct]} correct"), TimeRemainingColumn(),
                      console=err, transient=True) as progress:
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
            with Evaluator(config, jobs=args.jobs) as ev:
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
    _print_metrics(summary, f"{name}: {len(tasks)} tasks on {device}")
    if report:
        print(f"report: {report}")
    return 0


def _print_metrics(summary, title: str) -> None:
    from rich.table import Table

    from cuda_agent.bench.report import metric_groups

    table = Table(title=title, title_justify="left")
    for col in ("level", "tasks", "correct", "faster than eager", "faster than compile",
                "geomean eager (correct / all)", "geomean compile (correct / all)"):
        table.add_column(col)
    for label, m in metric_groups(summary.best).items():
        table.add_row(label, str(m["tasks"]), f"{100 * m['pass_rate']:.1f}%", f"{100 * m['faster_eager_rate']:.1f}%",
                      f"{100 * m['faster_compile_rate']:.1f}%",
                      f"{_fmt_x(m['geomean_eager'])} / {_fmt_x(m['geomean_eager_all'])}",
                      f"{_fmt_x(m['geomean_compile'])} / {_fmt_x(m['geomean_compile_all'])}")
    _console().print(table)
    if summary.reasons:
        _console().print("failures: " + ", ".join(f"{k} {v}" for k, v in summary.reasons.items()), highlight=False)


def cmd_report(args: argparse.Namespace) -> int:
    from cuda_agent.bench.report import write_report
    from cuda_agent.bench.store import Store

    db = _store_path(args)
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


def _agent(args: argparse.Namespace, config):
    """The model client and the episode settings of `solve` and `bench --agent`."""
    from cuda_agent.agent.llm import ChatClient
    from cuda_agent.agent.loop import EpisodeConfig

    client = ChatClient(args.base_url, args.model, api_key_env=args.api_key_env or None,
                        timeout_s=args.request_timeout)
    cfg = EpisodeConfig(max_turns=args.max_turns, context_tokens=args.context_tokens, wall_s=args.wall_time,
                        device=config.device, allow_unsandboxed=args.unsandboxed, eval=config)
    return client, cfg


def cmd_synth(args: argparse.Namespace) -> int:
    """Make (or resume) a dataset of tasks: compose, filter, decontaminate, deduplicate; print a summary."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.synth.compose import parse_mix
    from cuda_agent.synth.pipeline import Progress as SynthProgress, SynthConfig, run_synth

    device = resolve_device(args.device)
    window = None
    if args.window:
        try:
            lo, hi = (float(x) for x in args.window.split(","))
        except ValueError:
            raise CudaAgentError(f"--window {args.window!r}: give LO,HI in milliseconds, e.g. 1,100") from None
        if not 0 <= lo < hi:
            raise CudaAgentError(f"--window {args.window!r}: LO must be >= 0 and under HI")
        window = (lo, hi)
    if args.kernelbench is None:
        _console(stderr=True).print("[yellow]no --kernelbench: drafts are not checked against KernelBench "
                                    "(max_kernelbench_similarity is 0 for all)[/]")
    llm = None
    if args.composer == "llm":
        if not (args.base_url and args.model):
            raise CudaAgentError("--composer llm takes --base-url and --model")
        from cuda_agent.agent.llm import ChatClient

        llm = ChatClient(args.base_url, args.model, api_key_env=args.api_key_env or None,
                         timeout_s=args.request_timeout)
    cfg = SynthConfig(out=args.out, n=args.n, device=device, seed=args.seed, composer=args.composer,
                      mix=parse_mix(args.mix), window_ms=window, threshold=args.threshold,
                      kernelbench=args.kernelbench, workers=args.workers, timeout_s=args.timeout,
                      max_attempts=args.max_attempts, model=args.model if args.composer == "llm" else None)
    err = _console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[attempts]} attempts"), TimeRemainingColumn(),
                  console=err, transient=True) as progress, _stdout_reserved(args.json):
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
        return 0 if summary["complete"] else 1
    from rich.table import Table

    table = Table(title=f"synth {args.out} on {device}", title_justify="left")
    table.add_column("measure")
    table.add_column("value")
    for k in ("accepted", "attempts", "wall_s"):
        table.add_row(k, str(summary[k]))
    table.add_row("rejections", ", ".join(f"{k} {v}" for k, v in summary["rejections"].items()) or "none")
    _console().print(table)
    print(f"tasks: {args.out / 'tasks.parquet'}\nstats: {summary['stats']}")
    if not summary["complete"]:
        print(f"stopped at --max-attempts with {summary['accepted']} of {args.n} tasks", file=sys.stderr)
        return 1
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    """One agent episode on TASK: the workspace, trajectory.jsonl and result.json land in --out."""
    from cuda_agent.agent.loop import run_episode
    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.tasks import load_task

    config = _config(args)
    config.device = resolve_device(config.device)
    client, cfg = _agent(args, config)
    if (args.out / "trajectory.jsonl").exists():
        raise CudaAgentError(f"{args.out} already holds an episode (trajectory.jsonl); pass another --out")
    with _stdout_reserved(args.json):
        ep = run_episode(load_task(args.task), args.out, client, cfg)
    summary = {"stop": ep.stop, "turns": ep.turns, "tokens": ep.tokens, "wall_s": round(ep.wall_s, 1),
               "eval_s": round(ep.eval_s, 1), "invalid_tool_calls": ep.invalid_tool_calls,
               "reward": ep.result.reward, "correct": ep.result.correct, "speedup_eager": ep.result.speedup_eager,
               "speedup_compile": ep.result.speedup_compile, "out": str(args.out)}
    if args.json:
        print(json.dumps(summary))
    else:
        print(" ".join(f"{k}={v}" for k, v in summary.items() if k != "tokens")
              + f" tokens={ep.tokens.get('total_tokens', 0)}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """A trajectory as a readable transcript."""
    path = Path(args.trajectory)
    if path.is_dir():
        path = path / "trajectory.jsonl"
    if not path.is_file():
        raise CudaAgentError(f"{path}: no trajectory here; pass a trajectory.jsonl or the --out folder of `solve`")
    clip = args.width

    def short(text: Any) -> str:
        text = "" if text is None else str(text)
        return text if len(text) <= clip else text[:clip] + f" ... [{len(text) - clip} more characters]"

    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            r = json.loads(line)
        except ValueError:
            raise CudaAgentError(f"{path}:{n}: not a JSON line; is this a trajectory?") from None
        kind = r.get("type")
        if kind == "meta":
            print(f"# {r['task']} with {r['model']} (sandbox: {r['isolation']['level']}), started {r['started']}\n")
        elif kind == "message":
            m = r["message"]
            if m["role"] in ("system", "user") and not args.prompts:
                print(f"[{m['role']}: {len(m['content'])} characters; --prompts shows them]")
            elif m.get("content"):
                print(f"[turn {r['turn']}] {m['role']}: {short(m['content'])}")
            for c in m.get("tool_calls") or []:
                print(f"[turn {r['turn']}] -> {c['function']['name']} {short(c['function']['arguments'])}")
        elif kind == "tool":
            mark = "" if r["ok"] else " (invalid)"
            print(f"[turn {r['turn']}] <- {r['name']}{mark} in {r['seconds']} s:\n{short(r['result'])}\n")
        elif kind == "elided":
            print(f"[turn {r['turn']}] ({r['messages']} old tool outputs elided for the context budget)")
        elif kind == "error":
            print(f"[turn {r['turn']}] error: {r['error']}")
        elif kind == "final":
            res = r["result"]
            print(f"\n# {r['stop']} after {r['turns']} turns, {r['wall_s']} s ({r['eval_s']} s evaluating), "
                  f"{r['tokens'].get('total_tokens', 0)} tokens, {r['invalid_tool_calls']} invalid tool calls")
            print(f"# final evaluation: reward {res['reward']}, correct {res['correct']}, "
                  f"vs eager {_fmt_x(res.get('speedup_eager'))}, vs compile {_fmt_x(res.get('speedup_compile'))}"
                  + (f", reasons: {', '.join(x['code'] for x in res['reasons'])}" if res.get("reasons") else ""))
    return 0


def cmd_train_rft(args: argparse.Namespace) -> int:
    """RFT data: the trajectories that pass the filter, in verl's multi-turn SFT format."""
    from cuda_agent.rl.rft import RFTFilter, build_rft

    try:
        flt = RFTFilter(min_reward=args.min_reward, max_invalid_tool_calls=args.max_invalid_tool_calls,
                        loop_repeats=args.loop_repeats, loop_max_period=args.loop_max_period)
    except ValueError as exc:
        raise CudaAgentError(str(exc)) from None
    report = build_rft(args.trajectories, args.out, flt)
    if args.json:
        print(json.dumps(report.to_json()))
        return 0
    from rich.table import Table

    console = _console()
    table = Table(title=f"RFT data from {args.trajectories}", title_justify="left")
    table.add_column("")
    table.add_column("trajectories", justify="right")
    table.add_row("read", str(report.trajectories))
    for reason, n in report.rejected.items():
        table.add_row(f"rejected: {reason}", str(n))
    table.add_row("[bold]kept[/]", f"[bold]{report.kept}[/]")
    console.print(table)
    t = report.thresholds
    console.print(f"kept when: reward > {t['min_reward']}, at most {t['max_invalid_tool_calls']} invalid tool "
                  f"calls, no block of 1-{t['loop_max_period']} turns repeated {t['loop_repeats']} times in a row"
                  f"\nkept by reward: {report.kept_by_reward or '-'}; with elided context: "
                  f"{report.kept_with_elided_context}")
    for line in report.unreadable[:5]:
        console.print(f"[red]unreadable[/] {line}", highlight=False)
    console.print(f"wrote {report.out} and {Path(report.out).with_suffix('.report.json')}")
    return 0


def cmd_train_prompts(args: argparse.Namespace) -> int:
    """verl prompt rows (single-turn) for a task set."""
    from cuda_agent.rl.data import write_prompts
    from cuda_agent.tasks import load_taskset

    tasks = load_taskset(args.taskset, args.level)
    if not tasks:
        raise CudaAgentError(f"{args.taskset}: no tasks found (levels {args.level or 'all'})")
    n = write_prompts(tasks, args.out, "cuda_agent" if args.agentic else "single_turn_agent")
    print(json.dumps({"prompts": n, "out": str(args.out)}) if args.json else f"wrote {n} prompts to {args.out}")
    return 0


def cmd_train_values(args: argparse.Namespace) -> int:
    """The critic's offline warm-up targets for RFT trajectories."""
    from cuda_agent.rl.values import write_value_rows

    n = write_value_rows(args.data, args.tokenizer, args.out, gamma=args.gamma, lam=args.lam,
                         max_length=args.max_length)
    print(json.dumps({"rows": n, "out": str(args.out)}) if args.json else f"wrote value targets of {n} trajectories to {args.out}")
    return 0


def cmd_train_launch(args: argparse.Namespace) -> int:
    """A stage's verl launch: the resolved config and launch script in --out, then verl (unless --dry-run)."""
    import subprocess

    from cuda_agent.rl import recipes

    out = args.out / (args.stage if args.step == "ppo" else "rft")
    if args.step == "ppo":
        fields = json.loads(args.eval_config) if args.eval_config else {}
        recipe = recipes.ppo_recipe(args.stage, args.model, str(args.data), out, str(args.val) if args.val else None,
                                    args.nnodes, args.gpus_per_node, fields, args.critic_model, args.critic_warmup,
                                    args.set)
    else:
        recipe = recipes.rft_recipe(args.model, str(args.data), out, str(args.val) if args.val else None,
                                    args.nnodes, args.gpus_per_node, args.set)
    written = recipes.write(recipe, out)
    if args.dry_run:
        print(written["config"].read_text(), end="")
        print(f"# wrote {', '.join(str(p) for p in written.values())}; launch: {written['launch']}", file=sys.stderr)
        return 0
    print(f"launching {recipe.module} ({written['launch']})", file=sys.stderr)
    return subprocess.call(recipe.argv(), env={**os.environ, **recipe.env})


EXAMPLES = {
    "eval": "cuda-agent eval task.py candidate.py --device cpu --json",
    "init-workspace": "cuda-agent init-workspace level1/19_ReLU.py ./ws --device cuda",
    "examples": "cuda-agent examples --device cpu",
    "baselines": "cuda-agent baselines KernelBench/ --level 1 --device cuda --out results/timing",
    "bench": "cuda-agent bench KernelBench/ --level 1 --solutions runs/my_model/ --device cuda --run my_model",
    "report": "cuda-agent report my_model --compare baseline_model",
    "solve": "cuda-agent solve level1/19_ReLU.py --base-url http://localhost:8000/v1 --model my-model --out ep1/",
    "replay": "cuda-agent replay ep1/trajectory.jsonl",
    "synth": "cuda-agent synth --out data/ops --n 500 --device cuda --seed 0 --kernelbench KernelBench/",
    "train rft": "cuda-agent train rft --trajectories runs/agent/episodes --out data/rft.parquet",
    "train prompts": "cuda-agent train prompts data/ops/tasks.parquet --out data/single_turn.parquet",
    "train ppo": "cuda-agent train ppo --stage agentic --model ckpt/rft --data data/agentic.parquet --dry-run",
    "train sft": "cuda-agent train sft --model ckpt/single_turn --data data/rft.parquet --out runs/",
    "train values": "cuda-agent train values --data data/rft.parquet --tokenizer Qwen/Qwen3-8B --out data/values.parquet",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuda-agent",
        description="Evaluate, generate and train on GPU kernels (an open implementation of CUDA Agent).",
    )
    parser.add_argument("--version", action="version", version=f"cuda-agent {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("eval", help="evaluate one candidate on one task",
                       description="Build, verify and time CANDIDATE against TASK and print the verdict "
                       "and the milestone reward. Exit 0 whenever the evaluation completed.",
                       epilog=f"example: {EXAMPLES['eval']}")
    p.add_argument("task", help="KernelBench-format task file (defines Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="a .py file defining ModelNew, or a workspace directory")
    _add_eval_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("init-workspace", help="write an agent workspace for a task",
                       description="Write a CUDA-Agent-compatible workspace for TASK into DIR: model.py, "
                       "SKILL.md, the fixed binding files and commands, and an example kernel.",
                       epilog=f"example: {EXAMPLES['init-workspace']}")
    p.add_argument("task", help="KernelBench-format task file")
    p.add_argument("dir", help="directory to create (must be empty or absent)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="backend the kernels are written for (default: auto)")
    p.set_defaults(func=cmd_init_workspace)

    p = sub.add_parser("workspace", help="run a workspace command (what utils/ in a workspace calls)",
                       description="The workspace's fixed commands: compile, verify, profile.")
    p.add_argument("command", choices=["compile", "verify", "profile"])
    p.add_argument("dir", nargs="?", default=".", help="workspace directory (default: .)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of the command (--device, --json, --trials)")
    p.set_defaults(func=cmd_workspace)

    p = sub.add_parser("examples", help="evaluate the bundled example kernels",
                       description="Evaluate every bundled example task with its candidates for the "
                       "device (single-file and workspace forms) and print a table.",
                       epilog=f"example: {EXAMPLES['examples']}")
    p.add_argument("--only", nargs="+", metavar="NAME", help="evaluate only these examples")
    p.add_argument("--form", choices=["single", "workspace"], default=None, help="only this candidate form")
    _add_eval_options(p)
    p.set_defaults(func=cmd_examples)

    p = sub.add_parser("baselines", help="measure and cache the eager and compile baselines of a task set",
                       description="Measure every task's eager and torch.compile timings (once per task, "
                       "device and software versions; later evaluations reuse them) and print them with a "
                       "self-check: the reference timed as a candidate, 1.00x when timing is fair.",
                       epilog=f"example: {EXAMPLES['baselines']}")
    p.add_argument("taskset", help="a KernelBench checkout, its KernelBench/ folder or a folder of level1/..., "
                   "or `examples` for the bundled example tasks")
    p.add_argument("--level", type=int, nargs="+", choices=[1, 2, 3, 4], default=None,
                   help="only these KernelBench levels")
    p.add_argument("--out", type=Path, default=None,
                   help="also write KernelBench's results/timing layout under this folder")
    _add_eval_options(p)
    p.set_defaults(func=cmd_baselines)

    p = sub.add_parser("bench", help="evaluate solutions over a task set: metrics, run store, report",
                       description="Evaluate every solution of a task set (in parallel, over every GPU), keep "
                       "each verdict in a SQLite run store as it arrives (a run of the same name resumes), "
                       "print the metrics per level and write a Markdown report with plots.",
                       epilog=f"example: {EXAMPLES['bench']}")
    p.add_argument("taskset", help="`examples` (the bundled tasks), a KernelBench checkout, its KernelBench/ "
                   "folder or a folder of level1/..., a task file, or a dataset file (.jsonl, .parquet)")
    p.add_argument("--solutions", type=Path, default=None,
                   help="folder of candidates: one per task (level1/19_ReLU.py, 19_ReLU.py or a workspace "
                   "folder of that name) and/or KernelBench's level_L_problem_P_sample_S_kernel.py files; "
                   "default for `examples`: the bundled candidates")
    p.add_argument("--level", type=int, nargs="+", choices=[1, 2, 3, 4], default=None,
                   help="only these KernelBench levels")
    p.add_argument("--run", default=None, help="run name (default: <solutions folder>-<device>); the same "
                   "name with the same arguments resumes")
    p.add_argument("--rescore", action="store_true", help="evaluate every solution again with this evaluator")
    p.add_argument("--jobs", type=_positive(int), default=None,
                   help="evaluations at a time (default: 2 per GPU, 2 on the CPU backend)")
    _add_store_options(p, "where the run store and the reports go")
    p.add_argument("--no-report", action="store_true", help="do not write the report")
    p.add_argument("--agent", action="store_true", help="the solutions are written by the agent: one episode "
                   "per task with the model of --base-url/--model (episodes under OUT/RUN/episodes/)")
    p.add_argument("--episodes", type=_positive(int), default=4, help="agent episodes at a time (default 4)")
    _add_agent_options(p, required=False)
    _add_eval_options(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("report", help="write the Markdown report of a run (or two, side by side)",
                       description="Write report.md with tables and PNG plots (speedups per level, fast_p "
                       "curves, failures by reason) for RUN, compared with RUN2 when given.",
                       epilog=f"example: {EXAMPLES['report']}")
    p.add_argument("run", help="a run name from `cuda-agent bench`")
    p.add_argument("--compare", metavar="RUN2", default=None, help="a second run, side by side")
    _add_store_options(p, "the folder of the run store; the report goes to OUT/RUN")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("solve", help="run the agent on one task with an OpenAI-compatible model",
                       description="An agent episode: the model works in a fresh workspace through sandboxed "
                       "tools (Bash, Read, Write, Edit, ...) until it stops calling them or a budget runs out; "
                       "the final workspace is then evaluated afresh. OUT gets workspace/, trajectory.jsonl "
                       "and result.json.", epilog=f"example: {EXAMPLES['solve']}")
    p.add_argument("task", help="KernelBench-format task file")
    p.add_argument("--out", type=Path, required=True, help="folder for the workspace, trajectory and result")
    _add_agent_options(p, required=True)
    _add_eval_options(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("synth", help="make a dataset of training tasks: compose operators, filter, decontaminate",
                       description="Compose 1-5 catalogued operators into KernelBench-format tasks (offline, or "
                       "written by an LLM), keep those that run in eager and torch.compile and agree, are "
                       "deterministic, give non-constant input-dependent output and take a time inside the "
                       "window, drop those too similar to KernelBench or to each other. OUT gets tasks.jsonl, "
                       "tasks.parquet, rejections.jsonl and stats.md; the same OUT resumes.",
                       epilog=f"example: {EXAMPLES['synth']}")
    p.add_argument("--out", type=Path, required=True, help="output folder (a run there resumes)")
    p.add_argument("--n", type=_positive(int), required=True, help="tasks to accept")
    p.add_argument("--device", default="auto", help="cuda, cpu or auto (default: cuda when there is a GPU)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: attempt i draws from (seed, i) (default 0)")
    p.add_argument("--composer", choices=["offline", "llm"], default="offline",
                   help="offline (shape-aware, default) or llm (--base-url/--model write the tasks)")
    p.add_argument("--kernelbench", type=Path, default=None,
                   help="a KernelBench checkout: drafts at or over --threshold AST similarity to its levels 1-3 are dropped")
    p.add_argument("--threshold", type=float, default=0.9, help="decontamination threshold (default 0.9)")
    p.add_argument("--window", default=None, help="eager time per call to keep, LO,HI in ms "
                   "(default 1,100 on cuda, 0.5,50 on cpu)")
    p.add_argument("--mix", default=None, help="share of tasks by operator count, e.g. 1:0.05,2:0.838,3:0.07,4:0.03,5:0.012 "
                   "(the default, close to the paper's)")
    p.add_argument("--workers", type=_positive(int), default=None,
                   help="probe processes (default 4 per GPU, 2 on the CPU backend)")
    p.add_argument("--timeout", type=_positive(float), default=300.0, help="seconds one draft may take (default 300)")
    p.add_argument("--max-attempts", type=_positive(int), default=None, help="give up after this many drafts (default 50 x N)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    p.add_argument("--base-url", default=None, help="--composer llm: the chat-completions endpoint (…/v1)")
    p.add_argument("--model", default=None, help="--composer llm: the model name")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="--composer llm: variable holding the API key")
    p.add_argument("--request-timeout", type=_positive(float), default=600.0, help="--composer llm: seconds per request")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("train", help="training on verl: RFT data, prompts, and each stage's launch",
                       description="The paper's recipe on verl: `prompts` writes a task set's prompt rows; "
                       "`ppo --stage single-turn` trains on them; `rft` filters agent trajectories into "
                       "multi-turn SFT data, `sft` fine-tunes the actor on it and `values` gives the critic's "
                       "warm-up targets for it; `ppo --stage agentic` trains the agent with the critic warmed up.")
    train = p.add_subparsers(dest="stage", metavar="STEP", required=True)
    q = train.add_parser("rft", help="agent trajectories -> rejection fine-tuning data (Parquet)",
                         description="Keep the trajectories whose final evaluation earned a reward above "
                         "--min-reward, with at most --max-invalid-tool-calls invalid tool calls and no "
                         "redundant loop, and write them in verl's multi-turn SFT format (messages and tool "
                         "schemas as JSON text), with a report of what was dropped and why beside it.",
                         epilog=f"example: {EXAMPLES['train rft']}")
    q.add_argument("--trajectories", type=Path, required=True,
                   help="a folder searched for trajectory.jsonl files (solve's and bench --agent's), or one file")
    q.add_argument("--out", type=Path, required=True, help="the Parquet file to write (report: .report.json beside it)")
    q.add_argument("--min-reward", type=float, default=0.0, help="keep rewards strictly above this (default 0)")
    q.add_argument("--max-invalid-tool-calls", type=int, default=0, help="invalid tool calls allowed (default 0)")
    q.add_argument("--loop-repeats", type=int, default=3,
                   help="a block of turns repeated this many times in a row is a redundant loop (default 3)")
    q.add_argument("--loop-max-period", type=int, default=3, help="longest block of turns looked for (default 3)")
    q.add_argument("--json", action="store_true", help="print the report as one JSON object on stdout")
    q.set_defaults(func=cmd_train_rft)
    q = train.add_parser("prompts", help="a task set -> single-turn PPO prompts (Parquet)",
                         description="One verl prompt row per task (RLHFDataset format), carrying the task's "
                         "source for the reward (cuda_agent.rl.reward.compute_score).",
                         epilog=f"example: {EXAMPLES['train prompts']}")
    q.add_argument("taskset", help="a KernelBench checkout or folder, a task file, or a dataset file (.jsonl, .parquet)")
    q.add_argument("--level", type=int, nargs="+", choices=[1, 2, 3, 4], default=None, help="only these levels")
    q.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    q.add_argument("--agentic", action="store_true", help="rows for the agentic stage (agent loop cuda_agent)")
    q.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    q.set_defaults(func=cmd_train_prompts)
    q = train.add_parser("values", help="RFT data -> the critic's warm-up targets per token (Parquet)",
                         description="Tokenize each RFT trajectory as verl's SFT trainer does and write, per "
                         "token, the policy mask and the critic's first-round target: GAE returns with the "
                         "outcome reward on the last policy token (gamma 1, lambda 0.95: lambda^k R).",
                         epilog=f"example: {EXAMPLES['train values']}")
    q.add_argument("--data", type=Path, required=True, help="the output of `train rft`")
    q.add_argument("--tokenizer", required=True, help="the policy model's folder or Hugging Face name")
    q.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    q.add_argument("--gamma", type=float, default=1.0, help="discount (default 1, the paper's)")
    q.add_argument("--lam", type=float, default=0.95, help="GAE lambda (default 0.95, the paper's)")
    q.add_argument("--max-length", type=_positive(int), default=131072, help="tokens a trajectory may have")
    q.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    q.set_defaults(func=cmd_train_values)
    for step in ("ppo", "sft"):
        what = ("PPO with a learned critic (the paper's hyper-parameters), single-turn or agentic" if step == "ppo"
                else "rejection fine-tuning of the actor on `train rft` data (verl's SFT trainer)")
        q = train.add_parser(step, help=what, description=f"{what[0].upper()}{what[1:]}: write the resolved verl "
                             "config and a launch script into OUT/STAGE, then launch verl (--dry-run: print the "
                             "config and stop).", epilog=f"example: {EXAMPLES['train ' + step]}")
        if step == "ppo":
            q.add_argument("--stage", choices=["single-turn", "agentic"], required=True)
            q.add_argument("--critic-model", default=None,
                           help="the critic's starting checkpoint (default: --model; a value-pretrained one)")
            q.add_argument("--critic-warmup", type=int, default=None,
                           help="critic-only steps before the actor trains (agentic default 10)")
            q.add_argument("--eval-config", default=None,
                           help='EvalConfig fields of the reward\'s evaluations, as JSON (default {"device": "cuda"})')
        q.add_argument("--model", required=True, help="the actor's checkpoint (a Hugging Face model folder or name)")
        q.add_argument("--data", type=Path, required=True,
                       help="training rows: `train prompts` output for ppo, `train rft` output for sft")
        q.add_argument("--val", type=Path, default=None, help="validation rows (default: the training rows for ppo)")
        q.add_argument("--out", type=Path, default=Path("cuda-agent-train"), help="folder for configs, checkpoints "
                       "and trajectories (default ./cuda-agent-train)")
        q.add_argument("--nnodes", type=_positive(int), default=1, help="machines (a Ray cluster for ppo; default 1)")
        q.add_argument("--gpus-per-node", type=_positive(int), default=8, help="GPUs per machine (default 8)")
        q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="any verl config override, repeatable (wins over the recipe's)")
        q.add_argument("--dry-run", action="store_true", help="print the resolved config and write the files; launch nothing")
        q.set_defaults(func=cmd_train_launch, step=step)

    p = sub.add_parser("replay", help="show a trajectory as a readable transcript",
                       epilog=f"example: {EXAMPLES['replay']}")
    p.add_argument("trajectory", help="trajectory.jsonl, or the --out folder of `solve`")
    p.add_argument("--width", type=_positive(int), default=1500, help="characters shown of each text (default 1500)")
    p.add_argument("--prompts", action="store_true", help="also show the system and first user prompts")
    p.set_defaults(func=cmd_replay)
    return parser


def _add_store_options(p: argparse.ArgumentParser, out_help: str) -> None:
    """--out and --db of `bench` and `report` (read by _store_path)."""
    p.add_argument("--out", type=Path, default=Path("cuda-agent-runs"), help=f"{out_help} (default: ./cuda-agent-runs)")
    p.add_argument("--db", type=Path, default=None, help="the run store (default: OUT/bench.sqlite)")


def _store_path(args: argparse.Namespace) -> Path:
    return args.db or args.out / "bench.sqlite"


def _add_agent_options(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--base-url", required=required, help="the chat-completions endpoint (…/v1): vLLM, SGLang, an API")
    p.add_argument("--model", required=required, help="the model name the endpoint serves")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (default OPENAI_API_KEY; '' for none)")
    p.add_argument("--max-turns", type=_positive(int), default=200, help="turn limit (default 200)")
    p.add_argument("--context-tokens", type=_positive(int), default=131072,
                   help="context budget; the oldest tool outputs are elided to stay within it (default 131072)")
    p.add_argument("--wall-time", type=_positive(float), default=4 * 3600.0,
                   help="wall-clock limit of the episode, seconds (default 4 h)")
    p.add_argument("--request-timeout", type=_positive(float), default=600.0,
                   help="limit of one model request, seconds (retried with backoff; default 600)")
    p.add_argument("--unsandboxed", action="store_true",
                   help="run the agent's commands without isolation where namespaces are unavailable")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # `kill` and `timeout` send SIGTERM: unwind as for Ctrl-C so that pools close their processes and runs
    # record where they stopped (synth's wall time, bench's partial results) instead of dying mid-write.
    on_main = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main else None
    try:
        return args.func(args)
    except CudaAgentError as exc:
        print(f"cuda-agent {args.subcommand}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
