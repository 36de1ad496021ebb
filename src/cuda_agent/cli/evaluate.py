"""`eval`, `baselines`, `init-workspace`, `workspace`: one evaluation, a task set's baselines, and
the agent's workspace. (The bundled examples are a task set of `bench`: `cuda-agent bench examples`.)"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from cuda_agent.cli.common import EXIT_USAGE, console, fmt_ms, fmt_x, print_error, progress_bar, stdout_reserved
from cuda_agent.cli.options import (EVAL_FLAGS, add_config_options, add_eval_options, add_level_option,
                                    add_service_option, config_kwargs, eval_config, load_tasks, positive,
                                    service_client)
from cuda_agent.evaluate.config import DEVICES, EvalConfig
from cuda_agent.workspace.commands import COMMANDS


def sol_line(sol: dict | None) -> str | None:
    """The speed of light in a line: its time and bound, the candidate's fraction, or why not."""
    if not sol:
        return None
    if sol.get("time_ms") is None:
        return f"speed of light: unknown ({sol.get('why')})"
    line = f"speed of light: {sol['time_ms']:.4g} ms ({sol['bound']}-bound"
    line += ")" if sol.get("exact") else f"; at least: not counted {', '.join(sol.get('uncounted', [])[:3])})"
    if sol.get("fraction") is not None:
        return line + f"   candidate at {100 * sol['fraction']:.1f}% of it"
    return line + f"   ({sol.get('why')})"


def generalization_line(gen: dict | None) -> str | None:
    """What the shape trials (--shapes) found, in a line."""
    if not gen:
        return None
    verdict = {True: "generalizes", False: "does not generalize", None: "not told"}[gen.get("generalizes")]
    return f"other sizes: {verdict} ({gen.get('why')})"


def print_result(result, on=None) -> None:
    """A readable summary of one EvalResult on the console `on`: times, speedups, verdict, reasons."""
    from rich.table import Table

    on = on or console()
    table = Table(title=f"{result.task}  <-  {result.candidate}", title_justify="left")
    for col in ("", "median ms", "IQR ms", "calls", "speedup"):
        table.add_column(col, justify="right" if col else "left")
    for name, st in result.times_ms.items():
        sp = {"candidate": None, "eager": result.speedup_eager, "compile": result.speedup_compile}[name]
        table.add_row(name, fmt_ms(st), "-" if st is None else f"{st.iqr:.3g}",
                      "-" if st is None else str(st.n),
                      "" if name == "candidate" else ("-" if sp is None else f"candidate {fmt_x(sp)}"))
    on.print(table)
    colour = {-1: "red", 1: "yellow", 2: "green", 3: "bold green"}[result.reward]
    dev = result.device.get("name") or result.device.get("type")
    on.print(f"compiled: {result.compiled}   correct: {result.correct}   "
             f"reward: [{colour}]{result.reward}[/]   device: {dev}   "
             f"time: {result.phases_s.get('total', 0):.1f} s")
    for line in (sol_line(result.sol), generalization_line(result.generalization)):
        if line:
            on.print(line, highlight=False)
    for r in result.reasons:
        style = "dim" if r.kind.value == "info" else "red"
        msg = r.message if len(r.message) < 1500 else r.message[:700] + "\n[...]\n" + r.message[-700:]
        on.print(f"[{style}]{r.code.value}[/] ({r.kind.value}): ", msg, markup=True, highlight=False)


def cmd_eval(args: argparse.Namespace) -> int:
    from cuda_agent.evaluate import evaluate, load_candidate
    from cuda_agent.tasks import load_task

    config = eval_config(args)
    task = load_task(args.task)
    candidate = load_candidate(args.candidate)
    client = service_client(args, config)
    with stdout_reserved(args.json):
        if client is None:
            result = evaluate(task, candidate, config)
        else:
            with client:
                result = client.evaluate(task, candidate, config)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print_result(result)
    return 0


SERVICE_FLAGS = tuple(f for f in EVAL_FLAGS if f.field in ("device", "cache_dir", "isolation"))  # the service's own


def cmd_serve(args: argparse.Namespace) -> int:
    from cuda_agent.evaluate import service

    path = args.socket or service.socket_path()
    if args.stop or args.status:
        try:
            if args.stop:
                pid = service.stop(path)
                print(json.dumps({"stopped": pid}) if args.json else f"stopped the service at {path} (pid {pid})")
            else:
                info = service.ping(path)
                info.pop("ok", None)
                print(json.dumps(info) if args.json else
                      "\n".join(f"{k}: {v}" for k, v in info.items()))
        except service.ServiceError as exc:
            print_error("serve", exc)
            return EXIT_USAGE if args.stop else 1
        return 0
    config = EvalConfig(**config_kwargs(args, SERVICE_FLAGS))
    try:
        service.serve(config, path, jobs=args.jobs, idle_exit_s=args.idle_exit)
    except service.ServiceError as exc:
        print_error("serve", exc)
        return EXIT_USAGE
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


@contextlib.contextmanager
def one_after_another(config, count: int) -> Iterator[Callable]:
    """`evaluate(task, candidate)` for a batch of `count` evaluations run one after another. For more
    than one, a warm `Evaluator`'s: its workers are forked from a zygote that imported torch once,
    and its judges are kept between evaluations, so each evaluation after the first starts without
    the two fresh interpreters (and their `import torch`) that the one-shot `evaluate` pays for. For
    one, the one-shot form: a zygote would cost more than it saves."""
    from cuda_agent.evaluate import Evaluator, evaluate

    if count < 2:
        yield lambda task, candidate: evaluate(task, candidate, config)
        return
    with Evaluator(config, jobs=1) as ev:
        yield ev.evaluate


def cmd_baselines(args: argparse.Namespace) -> int:
    """Measure (or read from the cache) every task's eager and compile baselines; print them with a
    self-check (the reference timed as a candidate: 1.00x when timing is fair); with --out, write
    KernelBench's results/timing layout."""
    from rich.table import Table

    from cuda_agent.bench.kernelbench_timing import write_kernelbench_timing
    from cuda_agent.evaluate.baselines import baseline_candidate
    from cuda_agent.evaluate.device import resolve_device

    config = eval_config(args)
    config.device = device = resolve_device(config.device)
    config.policy, config.trials, config.stress_trials = "none", 1, 0  # the reference is trusted code
    tasks = load_tasks(args)
    rows = []
    with stdout_reserved(args.json), progress_bar(console(stderr=True)) as progress, \
            one_after_another(config, len(tasks)) as evaluate:
        bar = progress.add_task(f"baselines on {device}", total=len(tasks))
        for task in tasks:
            progress.update(bar, description=task.id)
            res = evaluate(task, baseline_candidate(task.source, "eager"))
            rows.append((task, res))
            progress.advance(bar)
    written = write_kernelbench_timing(rows, args.out) if args.out else []
    if args.json:
        print(json.dumps({"device": device, "written": [str(p) for p in written], "tasks": [
            {"task": t.id, "level": t.level, "eager": _stats_json(r.times_ms.get("eager")),
             "compile": _stats_json(r.times_ms.get("compile")),
             **_cache_json((r.timing_check or {}).get("baselines", {})),
             "self_check": r.speedup_eager, "reasons": [x.code.value for x in r.reasons]}
            for t, r in rows]}))
        return 0
    table = Table(title=f"baselines on {device}", title_justify="left")
    for col in ("task", "eager ms", "compile ms", "source", "self-check", "reasons"):
        table.add_column(col)
    for t, r in rows:
        table.add_row(t.id, fmt_ms(r.times_ms["eager"]), fmt_ms(r.times_ms["compile"]),
                      _source_cell((r.timing_check or {}).get("baselines", {})), fmt_x(r.speedup_eager),
                      ", ".join(x.code.value for x in r.reasons) or "-")
    console().print(table)
    for p in written:
        print(f"wrote {p}")
    return 0


def _cache_json(b: dict[str, Any]) -> dict[str, Any]:
    """Where a task's baselines came from ("measured" or "cached"), whether a measured one was
    cached, and why not: a median known too loosely on a busy machine serves its own run only."""
    return {"source": b.get("source"), "cached": b.get("cached", b.get("source") == "cached"),
            "too_noisy": b.get("too_noisy", [])}


def _source_cell(b: dict[str, Any]) -> str:
    if b.get("too_noisy"):
        return f"{b['source']}, too noisy to cache"
    return b.get("source", "-")


def _stats_json(st) -> dict[str, Any] | None:
    from dataclasses import asdict

    return None if st is None else asdict(st)


def add_parsers(sub) -> None:
    """eval, init-workspace, workspace, baselines."""
    p = sub.add_parser("eval", help="evaluate one candidate on one task",
                       description="Build, verify and time CANDIDATE against TASK and print the verdict "
                       "and the milestone reward. Exit 0 whenever the evaluation completed.",
                       epilog="example: cuda-agent eval task.py candidate.py --device cpu --json")
    p.add_argument("task", help="KernelBench-format task file (defines Model, get_inputs, get_init_inputs)")
    p.add_argument("candidate", help="a .py file defining ModelNew, or a workspace directory")
    add_eval_options(p)
    add_service_option(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("serve", help="run the warm evaluation service (one per user)",
                       description="Keep warm workers, the caches and the GPU locks in one process that "
                       "eval, bench, the workspace commands, the agent and the RL reward use when it runs "
                       "(their --service option). It listens on a Unix socket only its user can reach, and "
                       "stops on SIGTERM, Ctrl-C, --stop, or after --idle-exit seconds without work.",
                       epilog="example: cuda-agent serve --device cuda &  then  cuda-agent eval task.py cand.py")
    add_config_options(p, EvalConfig, SERVICE_FLAGS, {"isolation": "required"})
    p.add_argument("--jobs", type=positive(int), default=None,
                   help="evaluations at once (default: 2 per GPU, 2 on the CPU backend)")
    p.add_argument("--socket", type=Path, default=None,
                   help="the socket (default: $CUDA_AGENT_SOCKET, else $XDG_RUNTIME_DIR/cuda-agent/service.sock, "
                   "else /tmp/cuda-agent-UID/service.sock)")
    p.add_argument("--idle-exit", type=positive(float), default=None, metavar="S",
                   help="exit after S seconds without work (default: never)")
    p.add_argument("--stop", action="store_true", help="stop the running service and exit")
    p.add_argument("--status", action="store_true", help="print the running service's state and exit (1: none)")
    p.add_argument("--json", action="store_true", help="with --status or --stop: one JSON object on stdout")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("init-workspace", help="write an agent workspace for a task",
                       description="Write a CUDA-Agent-compatible workspace for TASK into DIR: model.py, "
                       "SKILL.md, the fixed binding files and commands, and an example kernel.",
                       epilog="example: cuda-agent init-workspace level1/19_ReLU.py ./ws --device cuda")
    p.add_argument("task", help="KernelBench-format task file")
    p.add_argument("dir", help="directory to create (must be empty or absent)")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="backend the kernels are written for (default: auto)")
    p.set_defaults(func=cmd_init_workspace)

    p = sub.add_parser("workspace", help="run a workspace command (what utils/ in a workspace calls)",
                       description="The workspace's fixed commands: compile, verify, profile.")
    p.add_argument("command", choices=list(COMMANDS))
    p.add_argument("dir", nargs="?", default=".", help="workspace directory (default: .)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of the command (--device, --json, --trials)")
    p.set_defaults(func=cmd_workspace)

    p = sub.add_parser("baselines", help="measure and cache the eager and compile baselines of a task set",
                       description="Measure every task's eager and torch.compile timings (once per task, "
                       "device and software versions; later evaluations reuse them) and print them with a "
                       "self-check: the reference timed as a candidate, 1.00x when timing is fair.",
                       epilog="example: cuda-agent baselines KernelBench/ --level 1 --device cuda --out results/timing")
    p.add_argument("taskset", help="a KernelBench checkout, its KernelBench/ folder or a folder of level1/..., "
                   "or `examples` for the bundled example tasks")
    add_level_option(p)
    p.add_argument("--out", type=Path, default=None,
                   help="also write KernelBench's results/timing layout under this folder")
    add_eval_options(p, without=("reward",))
    p.set_defaults(func=cmd_baselines)
