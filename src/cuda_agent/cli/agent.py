"""`solve` and `replay`: one agent episode on a task, and its trajectory as a transcript."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from cuda_agent.cli.common import stdout_reserved
from cuda_agent.cli.options import (add_agent_options, add_eval_options, add_service_option, agent_setup, eval_config,
                                    positive, service_client)
from cuda_agent.errors import CudaAgentError


def cmd_solve(args: argparse.Namespace) -> int:
    """One agent episode on TASK: the workspace, trajectory.jsonl and result.json land in --out."""
    from cuda_agent.agent.loop import run_episode
    from cuda_agent.evaluate.device import resolve_device
    from cuda_agent.tasks import load_task

    config = eval_config(args)
    config.device = resolve_device(config.device)
    client, cfg = agent_setup(args, config)
    if (args.out / "trajectory.jsonl").exists():
        raise CudaAgentError(f"{args.out} already holds an episode (trajectory.jsonl); pass another --out")
    evaluator = service_client(args, config)  # the final verdict; the workspace commands find it themselves
    with stdout_reserved(args.json), evaluator or contextlib.nullcontext():
        ep = run_episode(load_task(args.task), args.out, client, cfg, evaluator=evaluator)
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
    from cuda_agent.agent.replay import transcript

    for entry in transcript(args.trajectory, width=args.width, prompts=args.prompts):
        print(entry)
    return 0


def add_parsers(sub) -> None:
    """solve, replay."""
    p = sub.add_parser("solve", help="run the agent on one task with an OpenAI-compatible model",
                       description="An agent episode: the model works in a fresh workspace through sandboxed "
                       "tools (Bash, Read, Write, Edit, ...) until it stops calling them or a budget runs out; "
                       "the final workspace is then evaluated afresh. OUT gets workspace/, trajectory.jsonl "
                       "and result.json.", epilog="example: cuda-agent solve level1/19_ReLU.py "
                       "--base-url http://localhost:8000/v1 --model my-model --out ep1/")
    p.add_argument("task", help="KernelBench-format task file")
    p.add_argument("--out", type=Path, required=True, help="folder for the workspace, trajectory and result")
    add_agent_options(p, required=True)
    add_eval_options(p, isolation="required")
    add_service_option(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("replay", help="show a trajectory as a readable transcript",
                       epilog="example: cuda-agent replay ep1/trajectory.jsonl")
    p.add_argument("trajectory", help="trajectory.jsonl, or the --out folder of `solve`")
    p.add_argument("--width", type=positive(int), default=1500, help="characters shown of each text (default 1500)")
    p.add_argument("--prompts", action="store_true", help="also show the system and first user prompts")
    p.set_defaults(func=cmd_replay)
