"""Options that several commands share, and what they turn into: the evaluation options (generated
from `EvalConfig`, which holds their defaults and help), the model endpoint and agent options, the
run store's, and the task set's levels."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

from cuda_agent.agent.llm import API_KEY_ENV, REQUEST_TIMEOUT_S
from cuda_agent.errors import CudaAgentError
from cuda_agent.evaluate.config import DEVICES, ISOLATION_MODES, POLICIES, REWARDS, SERVICE_MODES, EvalConfig, default_service_mode, field_help

LEVELS = (1, 2, 3, 4)  # KernelBench's levels


def seed_list(text: str) -> list[int]:
    """`--seeds`: integers separated by commas (or spaces)."""
    try:
        return [int(s) for s in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: give integers separated by commas") from None


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` (int, float) above 0."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
        return v
    return parse


class EvalFlag(NamedTuple):
    """An EvalConfig field exposed on the command line. A flag `--no-X` turns off a field that is on
    by default, a flag of a field off by default turns it on; any other flag takes the field's
    value, its default the field's (None where the field's default is made by a factory:
    EvalConfig then makes it)."""
    field: str
    flag: str
    type: Callable[[str], Any] | None = None
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None


EVAL_FLAGS = (
    EvalFlag("device", "--device", choices=DEVICES),
    EvalFlag("policy", "--policy", choices=POLICIES),
    EvalFlag("trials", "--trials", positive(int)),
    EvalFlag("stress_trials", "--stress-trials", int),
    EvalFlag("shapes", "--shapes", int, metavar="N"),
    EvalFlag("require_generalization", "--require-generalization"),
    EvalFlag("atol", "--atol", float),
    EvalFlag("rtol", "--rtol", float),
    EvalFlag("seeds", "--seeds", seed_list, metavar="SEED,SEED,..."),
    EvalFlag("timing", "--no-timing"),
    EvalFlag("compile_baseline", "--no-compile-baseline"),
    EvalFlag("baseline_cache", "--no-baseline-cache"),
    EvalFlag("timeout_s", "--timeout", positive(float)),
    EvalFlag("cache_dir", "--cache-dir", Path),
    EvalFlag("isolation", "--isolation", choices=ISOLATION_MODES),
    EvalFlag("reward", "--reward", choices=REWARDS),
)


def _negated(flag: EvalFlag) -> bool:
    return flag.flag.startswith("--no-")


def _dest(flag: EvalFlag) -> str:
    return flag.flag[2:].replace("-", "_")


def _help(flag: EvalFlag, field: dataclasses.Field) -> str:
    """The field's docstring, as help text (lower case, no final period), with its default."""
    doc = field_help()[flag.field].rstrip(".").replace("%", "%%")
    if doc[:2].istitle():  # "Backend: ..." but not "CUDA: ..."
        doc = doc[0].lower() + doc[1:]
    if _negated(flag):
        return f"turn off `{flag.field}`: {doc}"
    if field.default_factory is not dataclasses.MISSING:  # its docstring says what it makes
        return f"{doc} (default: {field.default_factory.__doc__.strip().rstrip('.')})"
    if field.default is None:
        return doc  # the docstring says what None means
    default = f"{field.default:g}" if isinstance(field.default, float) else field.default
    return f"{doc} (default {default})"


def add_eval_options(p: argparse.ArgumentParser, isolation: str | None = None, without: tuple[str, ...] = ()) -> None:
    """--json and the EVAL_FLAGS, with EvalConfig's defaults and its field docstrings as help.
    `isolation`: this command's default of --isolation where it differs from EvalConfig's
    (`required` for the commands that run model-written code unattended: solve, serve); `without`:
    fields this command has no use for (`baselines` gives no reward)."""
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    fields = {f.name: f for f in dataclasses.fields(EvalConfig)}
    if isolation is not None:
        import copy

        fields["isolation"] = copy.copy(fields["isolation"])
        fields["isolation"].default = isolation
    for flag in EVAL_FLAGS:
        if flag.field in without:
            continue
        field = fields[flag.field]
        if _negated(flag):
            assert field.default is True, flag  # a --no-X flag turns off what is on by default
            p.add_argument(flag.flag, action="store_true", help=_help(flag, field))
        elif field.default is False:  # a switch that turns the field on
            p.add_argument(flag.flag, action="store_true", help=_help(flag, field).removesuffix(" (default False)"))
        else:
            default = None if field.default is dataclasses.MISSING else field.default
            p.add_argument(flag.flag, type=flag.type, choices=flag.choices, default=default, metavar=flag.metavar,
                           help=_help(flag, field))


def eval_config(args: argparse.Namespace) -> EvalConfig:
    """The EvalConfig of the parsed EVAL_FLAGS; a field's invalid value is a user error."""
    kw: dict[str, Any] = {}
    for flag in EVAL_FLAGS:
        if not hasattr(args, _dest(flag)):  # (a flag this command goes without)
            continue
        value = getattr(args, _dest(flag))
        if _negated(flag):
            kw[flag.field] = not value
        elif value is not None:
            kw[flag.field] = value
    try:
        return EvalConfig(**kw)
    except ValueError as exc:
        raise CudaAgentError(str(exc)) from None


def add_service_option(p: argparse.ArgumentParser) -> None:
    """--service: evaluate through the warm service (`cuda-agent serve`), read by `evaluator`."""
    p.add_argument("--service", choices=SERVICE_MODES, default=None,
                   help="evaluate through the warm evaluation service: `auto` when one is running (else "
                   "in-process), `start` starting one when none runs, `off` always in-process (default "
                   "$CUDA_AGENT_SERVICE, else auto); stderr says which")


def service_client(args: argparse.Namespace, config: EvalConfig):
    """A client of the warm service for `config`'s evaluations as --service asks, or None to
    evaluate in-process; a line on stderr says which."""
    from cuda_agent.evaluate.service import connect

    try:
        mode = getattr(args, "service", None) or default_service_mode()
    except ValueError as exc:
        raise CudaAgentError(str(exc)) from None
    client, how = connect(config, mode)
    print(f"cuda-agent: {how}", file=sys.stderr)
    return client


def add_level_option(p: argparse.ArgumentParser, help: str = "only these KernelBench levels") -> None:
    p.add_argument("--level", type=int, nargs="+", choices=LEVELS, default=None, help=help)


def load_tasks(args: argparse.Namespace) -> list:
    """The tasks of `args.taskset` at `args.level`; none is a user error."""
    from cuda_agent.tasks import load_taskset

    tasks = load_taskset(args.taskset, args.level)
    if not tasks:
        raise CudaAgentError(f"{args.taskset}: no tasks found (levels {args.level or 'all'})")
    return tasks


def add_store_options(p: argparse.ArgumentParser, out_help: str) -> None:
    """--out and --db of `bench` and `report` (read by store_path)."""
    p.add_argument("--out", type=Path, default=Path("cuda-agent-runs"), help=f"{out_help} (default: ./cuda-agent-runs)")
    p.add_argument("--db", type=Path, default=None, help="the run store (default: OUT/bench.sqlite)")


def store_path(args: argparse.Namespace) -> Path:
    return args.db or args.out / "bench.sqlite"


def add_endpoint_options(p: argparse.ArgumentParser, required: bool, when: str = "") -> None:
    """The model endpoint (read by chat_client); `when` starts each help text (e.g. `--composer llm: `)."""
    p.add_argument("--base-url", required=required,
                   help=f"{when}the chat-completions endpoint (…/v1): vLLM, SGLang, an API")
    p.add_argument("--model", required=required, help=f"{when}the model name the endpoint serves")
    p.add_argument("--api-key-env", default=API_KEY_ENV,
                   help=f"{when}environment variable holding the API key (default {API_KEY_ENV}; '' for none)")
    p.add_argument("--request-timeout", type=positive(float), default=REQUEST_TIMEOUT_S,
                   help=f"{when}limit of one model request, seconds (retried with backoff; default "
                   f"{REQUEST_TIMEOUT_S:g})")


def chat_client(args: argparse.Namespace):
    from cuda_agent.agent.llm import ChatClient  # imports openai when it is made

    return ChatClient(args.base_url, args.model, api_key_env=args.api_key_env or None,
                      timeout_s=args.request_timeout)


def add_agent_options(p: argparse.ArgumentParser, required: bool) -> None:
    """The endpoint and the episode's budgets and sandbox (read by agent_setup)."""
    add_endpoint_options(p, required)
    p.add_argument("--max-turns", type=positive(int), default=200, help="turn limit (default 200)")
    p.add_argument("--context-tokens", type=positive(int), default=131072,
                   help="context budget; the oldest tool outputs are elided to stay within it (default 131072)")
    p.add_argument("--wall-time", type=positive(float), default=4 * 3600.0,
                   help="wall-clock limit of the episode, seconds (default 4 h)")
    p.add_argument("--unsandboxed", action="store_true",
                   help="run the agent's commands without isolation where namespaces are unavailable")


def agent_setup(args: argparse.Namespace, config: EvalConfig):
    """The model client and the episode settings of `solve` and `bench --agent`."""
    from cuda_agent.agent.loop import EpisodeConfig

    cfg = EpisodeConfig(max_turns=args.max_turns, context_tokens=args.context_tokens, wall_s=args.wall_time,
                        device=config.device, allow_unsandboxed=args.unsandboxed, eval=config)
    return chat_client(args), cfg
