"""The command line's surface, frozen (STYLE practice 7).

`SURFACE` lists every command path of `cuda-agent` (subcommands and nested ones such as `train rft`)
with each of its options and positionals: option strings, dest, default, choices, required, nargs,
action kind, and whether the type is a plain class (int, float, Path) or a checking function. A
change of the command line, a flag added, renamed or given another default, must change this literal
deliberately in the same commit; this test fails on any change that was not meant. Help text is not
frozen: it is written for people and follows `EvalConfig`'s field docstrings.

Also here: the option types (positive numbers, seed lists), the evaluation options generated from
`EvalConfig` (its defaults, its field docstrings as help), and replay's errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import PurePath

import pytest

from cuda_agent.agent.config import EpisodeConfig
from cuda_agent.agent.replay import transcript
from cuda_agent.cli import build_parser
from cuda_agent.cli.options import EPISODE_FLAGS, config_kwargs, eval_config, field_docs
from cuda_agent.cli.synth import SYNTH_FLAGS
from cuda_agent.errors import CudaAgentError, UsageError
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.synth.config import WINDOWS, SynthConfig


def _kind(action: argparse.Action) -> str:
    name = type(action).__name__.strip("_").removesuffix("Action")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _value(v) -> str:
    return f"Path({str(v)!r})" if isinstance(v, PurePath) else repr(v)


def surface(parser: argparse.ArgumentParser, path: str = "cuda-agent") -> list[str]:
    """One line per option, positional, subcommand and set_defaults value of `parser` and of its
    subparsers, recursively: `PATH OPTION: KIND dest=D [default=] [nargs=] [choices=] [required]
    [type=]`, a field left out where it holds argparse's own default (None, False)."""
    lines = [f"{path} set_defaults {k}={_value(v)}" for k, v in parser._defaults.items() if k != "func"]
    for a in parser._actions:
        fields = [_kind(a), f"dest={a.dest}"]
        if a.default is not None:
            fields.append(f"default={_value(a.default)}")
        if a.nargs is not None and not (a.nargs == 0 and a.option_strings):
            fields.append(f"nargs={a.nargs!r}")
        if a.choices is not None and not isinstance(a, argparse._SubParsersAction):
            fields.append(f"choices={list(a.choices)!r}")
        if a.required:
            fields.append("required")
        if a.type is not None:
            fields.append(f"type={a.type.__name__ if isinstance(a.type, type) else 'checked'}")
        lines.append(f"{path} {'/'.join(a.option_strings) or a.dest.upper()}: {' '.join(fields)}")
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                lines.append(f"{path} {a.dest.upper()} {name}: sub_parser")
                lines += surface(sub, f"{path} {name}")
    return lines

SURFACE = [
    "cuda-agent --version: version dest=version default='==SUPPRESS=='",
    "cuda-agent -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent SUBCOMMAND baselines: sub_parser',
    'cuda-agent SUBCOMMAND bench: sub_parser',
    'cuda-agent SUBCOMMAND eval: sub_parser',
    'cuda-agent SUBCOMMAND init-workspace: sub_parser',
    'cuda-agent SUBCOMMAND replay: sub_parser',
    'cuda-agent SUBCOMMAND report: sub_parser',
    'cuda-agent SUBCOMMAND serve: sub_parser',
    'cuda-agent SUBCOMMAND solve: sub_parser',
    'cuda-agent SUBCOMMAND synth: sub_parser',
    'cuda-agent SUBCOMMAND train: sub_parser',
    'cuda-agent SUBCOMMAND workspace: sub_parser',
    "cuda-agent SUBCOMMAND: sub_parsers dest=subcommand nargs='A...' required",
    'cuda-agent baselines --atol: store dest=atol default=0.01 type=float',
    'cuda-agent baselines --cache-dir: store dest=cache_dir type=Path',
    "cuda-agent baselines --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    "cuda-agent baselines --isolation: store dest=isolation default='auto' choices=['auto', 'required', 'off']",
    'cuda-agent baselines --json: store_true dest=json default=False',
    "cuda-agent baselines --level: store dest=level nargs='+' choices=[1, 2, 3, 4] type=int",
    'cuda-agent baselines --no-baseline-cache: store_true dest=no_baseline_cache default=False',
    'cuda-agent baselines --no-compile-baseline: store_true dest=no_compile_baseline default=False',
    'cuda-agent baselines --no-timing: store_true dest=no_timing default=False',
    'cuda-agent baselines --out: store dest=out type=Path',
    "cuda-agent baselines --policy: store dest=policy default='strict' choices=['strict', 'kernelbench', 'none']",
    'cuda-agent baselines --require-generalization: store_true dest=require_generalization default=False',
    'cuda-agent baselines --rtol: store dest=rtol default=0.01 type=float',
    'cuda-agent baselines --seeds: store dest=seeds type=checked',
    'cuda-agent baselines --shapes: store dest=shapes default=0 type=int',
    'cuda-agent baselines --stress-trials: store dest=stress_trials default=2 type=int',
    'cuda-agent baselines --timeout: store dest=timeout default=300.0 type=checked',
    'cuda-agent baselines --trials: store dest=trials default=5 type=checked',
    "cuda-agent baselines -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent baselines TASKSET: store dest=taskset required',
    'cuda-agent bench --agent: store_true dest=agent default=False',
    "cuda-agent bench --api-key-env: store dest=api_key_env default='OPENAI_API_KEY'",
    'cuda-agent bench --atol: store dest=atol default=0.01 type=float',
    'cuda-agent bench --base-url: store dest=base_url',
    'cuda-agent bench --cache-dir: store dest=cache_dir type=Path',
    'cuda-agent bench --columns: store dest=columns',
    'cuda-agent bench --context-tokens: store dest=context_tokens default=131072 type=checked',
    'cuda-agent bench --db: store dest=db type=Path',
    "cuda-agent bench --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    'cuda-agent bench --episodes: store dest=episodes default=4 type=checked',
    "cuda-agent bench --isolation: store dest=isolation default='auto' choices=['auto', 'required', 'off']",
    'cuda-agent bench --jobs: store dest=jobs type=checked',
    'cuda-agent bench --json: store_true dest=json default=False',
    "cuda-agent bench --level: store dest=level nargs='+' choices=[1, 2, 3, 4] type=int",
    'cuda-agent bench --max-turns: store dest=max_turns default=200 type=checked',
    'cuda-agent bench --model: store dest=model',
    'cuda-agent bench --no-baseline-cache: store_true dest=no_baseline_cache default=False',
    'cuda-agent bench --no-compile-baseline: store_true dest=no_compile_baseline default=False',
    'cuda-agent bench --no-report: store_true dest=no_report default=False',
    'cuda-agent bench --no-timing: store_true dest=no_timing default=False',
    "cuda-agent bench --out: store dest=out default=Path('cuda-agent-runs') type=Path",
    "cuda-agent bench --policy: store dest=policy default='strict' choices=['strict', 'kernelbench', 'none']",
    'cuda-agent bench --request-timeout: store dest=request_timeout default=600.0 type=checked',
    'cuda-agent bench --require-generalization: store_true dest=require_generalization default=False',
    'cuda-agent bench --rescore: store_true dest=rescore default=False',
    "cuda-agent bench --reward: store dest=reward default='milestone' choices=['milestone', 'sol']",
    'cuda-agent bench --rtol: store dest=rtol default=0.01 type=float',
    'cuda-agent bench --run: store dest=run',
    'cuda-agent bench --seeds: store dest=seeds type=checked',
    "cuda-agent bench --service: store dest=service choices=['auto', 'start', 'off']",
    'cuda-agent bench --shapes: store dest=shapes default=0 type=int',
    'cuda-agent bench --solutions: store dest=solutions type=Path',
    "cuda-agent bench --split-by: store dest=split_by choices=['model']",
    'cuda-agent bench --stress-trials: store dest=stress_trials default=2 type=int',
    'cuda-agent bench --tasks-from-dump: store_true dest=tasks_from_dump default=False',
    'cuda-agent bench --timeout: store dest=timeout default=300.0 type=checked',
    'cuda-agent bench --trials: store dest=trials default=5 type=checked',
    'cuda-agent bench --unsandboxed: store_true dest=unsandboxed default=False',
    'cuda-agent bench --wall-time: store dest=wall_time default=14400.0 type=checked',
    "cuda-agent bench -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent bench TASKSET: store dest=taskset required',
    'cuda-agent eval --atol: store dest=atol default=0.01 type=float',
    'cuda-agent eval --cache-dir: store dest=cache_dir type=Path',
    "cuda-agent eval --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    "cuda-agent eval --isolation: store dest=isolation default='auto' choices=['auto', 'required', 'off']",
    'cuda-agent eval --json: store_true dest=json default=False',
    'cuda-agent eval --no-baseline-cache: store_true dest=no_baseline_cache default=False',
    'cuda-agent eval --no-compile-baseline: store_true dest=no_compile_baseline default=False',
    'cuda-agent eval --no-timing: store_true dest=no_timing default=False',
    "cuda-agent eval --policy: store dest=policy default='strict' choices=['strict', 'kernelbench', 'none']",
    'cuda-agent eval --require-generalization: store_true dest=require_generalization default=False',
    "cuda-agent eval --reward: store dest=reward default='milestone' choices=['milestone', 'sol']",
    'cuda-agent eval --rtol: store dest=rtol default=0.01 type=float',
    'cuda-agent eval --seeds: store dest=seeds type=checked',
    "cuda-agent eval --service: store dest=service choices=['auto', 'start', 'off']",
    'cuda-agent eval --shapes: store dest=shapes default=0 type=int',
    'cuda-agent eval --stress-trials: store dest=stress_trials default=2 type=int',
    'cuda-agent eval --timeout: store dest=timeout default=300.0 type=checked',
    'cuda-agent eval --trials: store dest=trials default=5 type=checked',
    "cuda-agent eval -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent eval CANDIDATE: store dest=candidate required',
    'cuda-agent eval TASK: store dest=task required',
    "cuda-agent init-workspace --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    "cuda-agent init-workspace -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent init-workspace DIR: store dest=dir required',
    'cuda-agent init-workspace TASK: store dest=task required',
    'cuda-agent replay --prompts: store_true dest=prompts default=False',
    'cuda-agent replay --width: store dest=width default=1500 type=checked',
    "cuda-agent replay -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent replay TRAJECTORY: store dest=trajectory required',
    'cuda-agent report --compare: store dest=compare',
    'cuda-agent report --db: store dest=db type=Path',
    "cuda-agent report --out: store dest=out default=Path('cuda-agent-runs') type=Path",
    "cuda-agent report -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent report RUN: store dest=run required',
    'cuda-agent serve --cache-dir: store dest=cache_dir type=Path',
    "cuda-agent serve --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    'cuda-agent serve --idle-exit: store dest=idle_exit type=checked',
    "cuda-agent serve --isolation: store dest=isolation default='required' choices=['auto', 'required', 'off']",
    'cuda-agent serve --jobs: store dest=jobs type=checked',
    'cuda-agent serve --json: store_true dest=json default=False',
    'cuda-agent serve --socket: store dest=socket type=Path',
    'cuda-agent serve --status: store_true dest=status default=False',
    'cuda-agent serve --stop: store_true dest=stop default=False',
    "cuda-agent serve -h/--help: help dest=help default='==SUPPRESS=='",
    "cuda-agent solve --api-key-env: store dest=api_key_env default='OPENAI_API_KEY'",
    'cuda-agent solve --atol: store dest=atol default=0.01 type=float',
    'cuda-agent solve --base-url: store dest=base_url required',
    'cuda-agent solve --cache-dir: store dest=cache_dir type=Path',
    'cuda-agent solve --context-tokens: store dest=context_tokens default=131072 type=checked',
    "cuda-agent solve --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    "cuda-agent solve --isolation: store dest=isolation default='required' choices=['auto', 'required', 'off']",
    'cuda-agent solve --json: store_true dest=json default=False',
    'cuda-agent solve --max-turns: store dest=max_turns default=200 type=checked',
    'cuda-agent solve --model: store dest=model required',
    'cuda-agent solve --no-baseline-cache: store_true dest=no_baseline_cache default=False',
    'cuda-agent solve --no-compile-baseline: store_true dest=no_compile_baseline default=False',
    'cuda-agent solve --no-timing: store_true dest=no_timing default=False',
    'cuda-agent solve --out: store dest=out required type=Path',
    "cuda-agent solve --policy: store dest=policy default='strict' choices=['strict', 'kernelbench', 'none']",
    'cuda-agent solve --request-timeout: store dest=request_timeout default=600.0 type=checked',
    'cuda-agent solve --require-generalization: store_true dest=require_generalization default=False',
    "cuda-agent solve --reward: store dest=reward default='milestone' choices=['milestone', 'sol']",
    'cuda-agent solve --rtol: store dest=rtol default=0.01 type=float',
    'cuda-agent solve --seeds: store dest=seeds type=checked',
    "cuda-agent solve --service: store dest=service choices=['auto', 'start', 'off']",
    'cuda-agent solve --shapes: store dest=shapes default=0 type=int',
    'cuda-agent solve --stress-trials: store dest=stress_trials default=2 type=int',
    'cuda-agent solve --timeout: store dest=timeout default=300.0 type=checked',
    'cuda-agent solve --trials: store dest=trials default=5 type=checked',
    'cuda-agent solve --unsandboxed: store_true dest=unsandboxed default=False',
    'cuda-agent solve --wall-time: store dest=wall_time default=14400.0 type=checked',
    "cuda-agent solve -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent solve TASK: store dest=task required',
    "cuda-agent synth --api-key-env: store dest=api_key_env default='OPENAI_API_KEY'",
    'cuda-agent synth --base-url: store dest=base_url',
    "cuda-agent synth --composer: store dest=composer default='offline' choices=['offline', 'llm']",
    "cuda-agent synth --device: store dest=device default='auto' choices=['auto', 'cuda', 'cpu']",
    "cuda-agent synth --isolation: store dest=isolation default='required' choices=['auto', 'required', 'off']",
    'cuda-agent synth --json: store_true dest=json default=False',
    'cuda-agent synth --kernelbench: store dest=kernelbench type=Path',
    'cuda-agent synth --max-attempts: store dest=max_attempts type=checked',
    'cuda-agent synth --mix: store dest=mix type=checked',
    'cuda-agent synth --model: store dest=model',
    'cuda-agent synth --n: store dest=n required type=checked',
    'cuda-agent synth --out: store dest=out required type=Path',
    'cuda-agent synth --request-timeout: store dest=request_timeout default=600.0 type=checked',
    'cuda-agent synth --seed: store dest=seed default=0 type=int',
    'cuda-agent synth --threshold: store dest=threshold default=0.9 type=float',
    'cuda-agent synth --timeout: store dest=timeout default=300.0 type=checked',
    'cuda-agent synth --window: store dest=window type=checked',
    'cuda-agent synth --workers: store dest=workers type=checked',
    "cuda-agent synth -h/--help: help dest=help default='==SUPPRESS=='",
    "cuda-agent train -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent train STAGE ppo: sub_parser',
    'cuda-agent train STAGE prompts: sub_parser',
    'cuda-agent train STAGE rft: sub_parser',
    'cuda-agent train STAGE sft: sub_parser',
    'cuda-agent train STAGE values: sub_parser',
    "cuda-agent train STAGE: sub_parsers dest=stage nargs='A...' required",
    'cuda-agent train ppo --critic-model: store dest=critic_model',
    'cuda-agent train ppo --critic-warmup: store dest=critic_warmup type=int',
    'cuda-agent train ppo --data: store dest=data required type=Path',
    'cuda-agent train ppo --dry-run: store_true dest=dry_run default=False',
    'cuda-agent train ppo --eval-config: store dest=eval_config',
    'cuda-agent train ppo --gpus-per-node: store dest=gpus_per_node default=8 type=checked',
    'cuda-agent train ppo --model: store dest=model required',
    'cuda-agent train ppo --nnodes: store dest=nnodes default=1 type=checked',
    "cuda-agent train ppo --out: store dest=out default=Path('cuda-agent-train') type=Path",
    'cuda-agent train ppo --set: append dest=set default=[]',
    "cuda-agent train ppo --stage: store dest=stage choices=['single-turn', 'agentic'] required",
    'cuda-agent train ppo --val: store dest=val type=Path',
    "cuda-agent train ppo -h/--help: help dest=help default='==SUPPRESS=='",
    "cuda-agent train ppo set_defaults step='ppo'",
    'cuda-agent train prompts --agentic: store_true dest=agentic default=False',
    'cuda-agent train prompts --json: store_true dest=json default=False',
    "cuda-agent train prompts --level: store dest=level nargs='+' choices=[1, 2, 3, 4] type=int",
    'cuda-agent train prompts --out: store dest=out required type=Path',
    "cuda-agent train prompts -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent train prompts TASKSET: store dest=taskset required',
    'cuda-agent train rft --json: store_true dest=json default=False',
    'cuda-agent train rft --loop-max-period: store dest=loop_max_period default=3 type=int',
    'cuda-agent train rft --loop-repeats: store dest=loop_repeats default=3 type=int',
    'cuda-agent train rft --max-invalid-tool-calls: store dest=max_invalid_tool_calls default=0 type=int',
    'cuda-agent train rft --min-reward: store dest=min_reward default=0.0 type=float',
    'cuda-agent train rft --out: store dest=out required type=Path',
    'cuda-agent train rft --trajectories: store dest=trajectories required type=Path',
    "cuda-agent train rft -h/--help: help dest=help default='==SUPPRESS=='",
    'cuda-agent train sft --data: store dest=data required type=Path',
    'cuda-agent train sft --dry-run: store_true dest=dry_run default=False',
    'cuda-agent train sft --gpus-per-node: store dest=gpus_per_node default=8 type=checked',
    'cuda-agent train sft --model: store dest=model required',
    'cuda-agent train sft --nnodes: store dest=nnodes default=1 type=checked',
    "cuda-agent train sft --out: store dest=out default=Path('cuda-agent-train') type=Path",
    'cuda-agent train sft --set: append dest=set default=[]',
    'cuda-agent train sft --val: store dest=val type=Path',
    "cuda-agent train sft -h/--help: help dest=help default='==SUPPRESS=='",
    "cuda-agent train sft set_defaults step='sft'",
    'cuda-agent train values --data: store dest=data required type=Path',
    'cuda-agent train values --gamma: store dest=gamma default=1.0 type=float',
    'cuda-agent train values --json: store_true dest=json default=False',
    'cuda-agent train values --lam: store dest=lam default=0.95 type=float',
    'cuda-agent train values --max-length: store dest=max_length default=131072 type=checked',
    'cuda-agent train values --out: store dest=out required type=Path',
    'cuda-agent train values --tokenizer: store dest=tokenizer required',
    "cuda-agent train values -h/--help: help dest=help default='==SUPPRESS=='",
    "cuda-agent workspace -h/--help: help dest=help default='==SUPPRESS=='",
    "cuda-agent workspace COMMAND: store dest=command choices=['compile', 'verify', 'profile'] required",
    "cuda-agent workspace DIR: store dest=dir default='.' nargs='?'",
    "cuda-agent workspace REST: store dest=rest nargs='...' required",
]


def test_the_command_line_surface_is_unchanged():
    assert sorted(surface(build_parser())) == SURFACE


def test_the_surface_literal_is_sorted_and_has_no_repeats():
    assert SURFACE == sorted(set(SURFACE))


@pytest.mark.parametrize("argv,message", [
    (["eval", "t.py", "c.py", "--trials", "0"], "argument --trials: '0' must be > 0"),
    (["eval", "t.py", "c.py", "--timeout", "-1"], "argument --timeout: '-1' must be > 0"),
    (["eval", "t.py", "c.py", "--trials", "many"], "argument --trials: 'many' is not a number"),
    (["bench", "kb", "--jobs", "0"], "argument --jobs: '0' must be > 0"),
    (["eval", "t.py", "c.py", "--seeds", "1,x"], "--seeds '1,x': give integers separated by commas"),
])
def test_number_options_refuse_bad_values_with_exit_2_and_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_seeds_parse_to_a_list_of_integers():
    args = build_parser().parse_args(["eval", "t.py", "c.py", "--seeds", "1,2,3"])
    assert args.seeds == [1, 2, 3]
    assert build_parser().parse_args(["eval", "t.py", "c.py", "--seeds", "4 5"]).seeds == [4, 5]


def test_positive_numbers_keep_their_type():
    args = build_parser().parse_args(["eval", "t.py", "c.py", "--trials", "3", "--timeout", "2.5"])
    assert (args.trials, args.timeout) == (3, 2.5)
    assert isinstance(args.trials, int) and isinstance(args.timeout, float)


# --- the evaluation options come from EvalConfig --------------------------------------------------

def test_every_eval_config_field_has_a_docstring_for_help():
    assert set(field_docs(EvalConfig)) == {f.name for f in dataclasses.fields(EvalConfig)}
    assert all(text and "\n" not in text for text in field_docs(EvalConfig).values())


def test_eval_options_left_alone_give_eval_config_s_defaults():
    assert eval_config(build_parser().parse_args(["eval", "t.py", "c.py"])) == EvalConfig()


def test_eval_options_map_onto_eval_config_fields(tmp_path):
    args = build_parser().parse_args(["eval", "t.py", "c.py", "--no-timing", "--no-baseline-cache", "--timeout", "7",
                                      "--policy", "kernelbench", "--device", "cpu", "--cache-dir", str(tmp_path),
                                      "--trials", "1", "--stress-trials", "0", "--seeds", "1,2,3"])
    config = eval_config(args)
    assert (config.timing, config.compile_baseline, config.baseline_cache) == (False, True, False)
    assert (config.timeout_s, config.policy, config.device, config.cache_dir) == (7.0, "kernelbench", "cpu", tmp_path)
    assert config.seeds == [1, 2, 3]


def test_an_eval_config_that_refuses_the_options_is_a_user_error():
    with pytest.raises(CudaAgentError, match="seeds: got 2, need 9"):
        eval_config(build_parser().parse_args(["eval", "t.py", "c.py", "--seeds", "1,2"]))


# --- the agent's and synth's options come from EpisodeConfig and SynthConfig ----------------------

@pytest.mark.parametrize("cls, flags", [(EpisodeConfig, EPISODE_FLAGS), (SynthConfig, SYNTH_FLAGS)])
def test_every_field_on_the_command_line_has_a_docstring_for_help(cls, flags):
    docs = field_docs(cls)
    assert {f.field for f in flags} <= set(docs) == {f.name for f in dataclasses.fields(cls)}
    assert all(text and "\n" not in text for text in docs.values())


def test_agent_options_left_alone_give_episode_config_s_defaults():
    args = build_parser().parse_args(["solve", "t.py", "--out", "o", "--base-url", "u", "--model", "m"])
    assert EpisodeConfig(**config_kwargs(args, EPISODE_FLAGS)) == EpisodeConfig()
    args = build_parser().parse_args(["solve", "t.py", "--out", "o", "--base-url", "u", "--model", "m",
                                      "--max-turns", "3", "--wall-time", "60", "--unsandboxed"])
    cfg = EpisodeConfig(**config_kwargs(args, EPISODE_FLAGS))
    assert (cfg.max_turns, cfg.wall_s, cfg.allow_unsandboxed) == (3, 60.0, True)


def test_synth_options_left_alone_give_synth_config_s_defaults(tmp_path):
    args = build_parser().parse_args(["synth", "--out", str(tmp_path), "--n", "5", "--device", "cpu"])
    assert SynthConfig(**config_kwargs(args, SYNTH_FLAGS)) == SynthConfig(out=tmp_path, n=5, device="cpu")
    args = build_parser().parse_args(["synth", "--out", str(tmp_path), "--n", "5", "--device", "cpu",
                                      "--window", "2,20", "--mix", "2:1,3:1", "--timeout", "9"])
    cfg = SynthConfig(**config_kwargs(args, SYNTH_FLAGS))
    assert (cfg.window_ms, cfg.mix, cfg.timeout_s) == ((2.0, 20.0), {2: 0.5, 3: 0.5}, 9.0)
    for device, (lo, hi) in WINDOWS.items():  # the help's default is the one the run takes
        assert f"{lo:g},{hi:g} on {device}" in field_docs(SynthConfig)["window_ms"]


@pytest.mark.parametrize("flag, value, message", [("--mix", "7:1", "operator counts go from 1 to 5"),
                                                  ("--window", "5,1", "LO must be >= 0 and under HI"),
                                                  ("--device", "tpu", "invalid choice")])
def test_a_synth_option_out_of_range_is_refused_with_what_to_give(capsys, flag, value, message):
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["synth", "--out", "o", "--n", "1", flag, value])
    assert exit.value.code == 2
    assert message in capsys.readouterr().err


# --- replay ---------------------------------------------------------------------------------------

def test_replay_names_the_line_that_is_not_json(tmp_path):
    path = tmp_path / "trajectory.jsonl"
    path.write_text(json.dumps({"type": "elided", "turn": 3, "messages": 2}) + "\nnot json\n")
    entries = transcript(tmp_path)  # an episode's folder
    assert next(entries) == "[turn 3] (2 old tool outputs elided for the context budget)"
    with pytest.raises(UsageError, match=f"{path}:2: not a JSON line"):
        next(entries)
    with pytest.raises(UsageError, match="no trajectory here"):
        transcript(tmp_path / "absent")


def test_replay_reads_an_episode_cut_off_while_writing_as_read_trajectory_does(tmp_path):
    from cuda_agent.agent.trajectory import read_trajectory

    meta = {"type": "meta", "task": "t", "model": "m", "isolation": {"level": "none"}, "started": "now",
            "tool_specs": []}
    message = {"type": "message", "turn": 1, "message": {"role": "assistant", "content": "Thinking."}}
    path = tmp_path / "trajectory.jsonl"
    path.write_text(json.dumps(meta) + "\n" + json.dumps(message) + "\n" + '{"type": "tool", "tu')
    assert list(transcript(path))[1:] == ["[turn 1] assistant: Thinking."]
    assert not read_trajectory(path).finished
    path.write_text(json.dumps(meta) + "\n" + json.dumps(["a list"]) + "\n")
    with pytest.raises(UsageError, match=f"{path}:2: not a trajectory record"):
        list(transcript(path))
