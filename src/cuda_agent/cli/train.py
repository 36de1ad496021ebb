"""`train`: RFT data, prompts, the critic's warm-up targets, and each stage's verl launch."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cuda_agent.cli.common import console
from cuda_agent.cli.options import add_level_option, load_tasks, positive
from cuda_agent.errors import CudaAgentError
from cuda_agent.rl.recipes import CONTEXT_TOKENS, STAGES


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

    out = console()
    table = Table(title=f"RFT data from {args.trajectories}", title_justify="left")
    table.add_column("")
    table.add_column("trajectories", justify="right")
    table.add_row("read", str(report.trajectories))
    for reason, n in report.rejected.items():
        table.add_row(f"rejected: {reason}", str(n))
    table.add_row("[bold]kept[/]", f"[bold]{report.kept}[/]")
    out.print(table)
    t = report.thresholds
    out.print(f"kept when: reward > {t['min_reward']}, at most {t['max_invalid_tool_calls']} invalid tool "
              f"calls, no block of 1-{t['loop_max_period']} turns repeated {t['loop_repeats']} times in a row"
              f"\nkept by reward: {report.kept_by_reward or '-'}; with elided context: "
              f"{report.kept_with_elided_context}")
    for line in report.unreadable[:5]:
        out.print(f"[red]unreadable[/] {line}", highlight=False)
    out.print(f"wrote {report.out} and {Path(report.out).with_suffix('.report.json')}")
    return 0


def cmd_train_prompts(args: argparse.Namespace) -> int:
    """verl prompt rows (single-turn) for a task set."""
    from cuda_agent.rl.data import write_prompts

    tasks = load_tasks(args)
    n = write_prompts(tasks, args.out, "cuda_agent" if args.agentic else "single_turn_agent")
    print(json.dumps({"prompts": n, "out": str(args.out)}) if args.json else f"wrote {n} prompts to {args.out}")
    return 0


def cmd_train_values(args: argparse.Namespace) -> int:
    """The critic's offline warm-up targets for RFT trajectories."""
    from cuda_agent.rl.values import write_value_rows

    n = write_value_rows(args.data, args.tokenizer, args.out, gamma=args.gamma, lam=args.lam,
                         max_length=args.max_length)
    print(json.dumps({"rows": n, "out": str(args.out)}) if args.json
          else f"wrote value targets of {n} trajectories to {args.out}")
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


def add_parsers(sub) -> None:
    """train and its steps: rft, prompts, values, ppo, sft."""
    p = sub.add_parser("train", help="training on verl: RFT data, prompts, and each stage's launch",
                       description="The paper's recipe on verl: `prompts` writes a task set's prompt rows; "
                       "`ppo --stage single-turn` trains on them; `rft` filters agent trajectories into "
                       "multi-turn SFT data, `sft` fine-tunes the actor on it and `values` gives the critic's "
                       "warm-up targets for it; `ppo --stage agentic` trains the agent with the critic warmed up.")
    # dest "stage" is the step's name until `ppo --stage` overwrites it; cmd_train_launch reads `step`
    train = p.add_subparsers(dest="stage", metavar="STEP", required=True)
    q = train.add_parser("rft", help="agent trajectories -> rejection fine-tuning data (Parquet)",
                         description="Keep the trajectories whose final evaluation earned a reward above "
                         "--min-reward, with at most --max-invalid-tool-calls invalid tool calls and no "
                         "redundant loop, and write them in verl's multi-turn SFT format (messages and tool "
                         "schemas as JSON text), with a report of what was dropped and why beside it.",
                         epilog="example: cuda-agent train rft --trajectories runs/agent/episodes "
                         "--out data/rft.parquet")
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
                         epilog="example: cuda-agent train prompts data/ops/tasks.parquet "
                         "--out data/single_turn.parquet")
    q.add_argument("taskset",
                   help="a KernelBench checkout or folder, a task file, or a dataset file (.jsonl, .parquet)")
    add_level_option(q, help="only these levels")
    q.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    q.add_argument("--agentic", action="store_true", help="rows for the agentic stage (agent loop cuda_agent)")
    q.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    q.set_defaults(func=cmd_train_prompts)

    q = train.add_parser("values", help="RFT data -> the critic's warm-up targets per token (Parquet)",
                         description="Tokenize each RFT trajectory as verl's SFT trainer does and write, per "
                         "token, the policy mask and the critic's first-round target: GAE returns with the "
                         "outcome reward on the last policy token (gamma 1, lambda 0.95: lambda^k R).",
                         epilog="example: cuda-agent train values --data data/rft.parquet --tokenizer Qwen/Qwen3-8B "
                         "--out data/values.parquet")
    q.add_argument("--data", type=Path, required=True, help="the output of `train rft`")
    q.add_argument("--tokenizer", required=True, help="the policy model's folder or Hugging Face name")
    q.add_argument("--out", type=Path, required=True, help="the Parquet file to write")
    q.add_argument("--gamma", type=float, default=1.0, help="discount (default 1, the paper's)")
    q.add_argument("--lam", type=float, default=0.95, help="GAE lambda (default 0.95, the paper's)")
    q.add_argument("--max-length", type=positive(int), default=CONTEXT_TOKENS,
                   help=f"tokens a trajectory may have (default {CONTEXT_TOKENS}, the training context)")
    q.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    q.set_defaults(func=cmd_train_values)

    examples = {"ppo": "cuda-agent train ppo --stage agentic --model ckpt/rft --data data/agentic.parquet --dry-run",
                "sft": "cuda-agent train sft --model ckpt/single_turn --data data/rft.parquet --out runs/"}
    for step in ("ppo", "sft"):
        what = ("PPO with a learned critic (the paper's hyper-parameters), single-turn or agentic" if step == "ppo"
                else "rejection fine-tuning of the actor on `train rft` data (verl's SFT trainer)")
        q = train.add_parser(step, help=what, description=f"{what[0].upper()}{what[1:]}: write the resolved verl "
                             "config and a launch script into OUT/STAGE, then launch verl (--dry-run: print the "
                             "config and stop).", epilog=f"example: {examples[step]}")
        if step == "ppo":
            q.add_argument("--stage", choices=STAGES, required=True)
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
        q.add_argument("--nnodes", type=positive(int), default=1, help="machines (a Ray cluster for ppo; default 1)")
        q.add_argument("--gpus-per-node", type=positive(int), default=8, help="GPUs per machine (default 8)")
        q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="any verl config override, repeatable (wins over the recipe's)")
        q.add_argument("--dry-run", action="store_true",
                       help="print the resolved config and write the files; launch nothing")
        q.set_defaults(func=cmd_train_launch, step=step)
