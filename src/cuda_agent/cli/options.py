"""Options that several commands share, and what they turn into: the evaluation options (generated
from `EvalConfig`, which holds their defaults and help), the model endpoint and agent options, the
run store's, and the task set's levels."""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import functools
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, NamedTuple

from cuda_agent.agent.llm import API_KEY_ENV, REQUEST_TIMEOUT_S
from cuda_agent.errors import CudaAgentError, UsageError
from cuda_agent.evaluate.config import DEVICES, ISOLATION_MODES, POLICIES, REWARDS, SERVICE_MODES, EvalConfig, default_service_mode

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


def parsed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser of the library's that raises UsageError: its message becomes
    argparse's (which would otherwise say only "invalid value")."""
    def parse_arg(text: str):
        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse_arg.__name__ = parse.__name__
    return parse_arg


class Flag(NamedTuple):
    """A config dataclass's field exposed on the command line. A flag `--no-X` turns off a field
    that is on by default, a flag of a field off by default turns it on; any other flag takes the
    field's value, its default the field's (None where the field's default is made by a factory:
    the dataclass then makes it), required where the field has no default. Its help is the field's
    docstring (`field_docs`)."""
    field: str
    flag: str
    type: Callable[[str], Any] | None = None
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring of the dataclass `cls` (the string literal right after the field), its
    lines joined: the help text of the options made from it. Read from the class's source with ast
    (docstrings of attributes exist only there), once per class."""
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    docs = {}
    for field, after in zip(node.body, node.body[1:]):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[field.target.id] = " ".join(after.value.value.split())
    return docs


def _negated(flag: Flag) -> bool:
    return flag.flag.startswith("--no-")


def _dest(flag: Flag) -> str:
    return flag.flag[2:].replace("-", "_")


def _help(flag: Flag, field: dataclasses.Field, doc: str) -> str:
    """The field's docstring as help text (lower case, no final period), with its default."""
    doc = doc.rstrip(".").replace("%", "%%")
    if doc[:2].istitle():  # "Backend: ..." but not "CUDA: ..."
        doc = doc[0].lower() + doc[1:]
    if _negated(flag):
        return f"turn off `{flag.field}`: {doc}"
    if field.default_factory is not dataclasses.MISSING:  # its docstring says what it makes
        return f"{doc} (default: {field.default_factory.__doc__.strip().rstrip('.')})"
    if field.default is None or field.default is dataclasses.MISSING:
        return doc  # the docstring says what None means; a required option has no default
    default = f"{field.default:g}" if isinstance(field.default, float) else field.default
    return f"{doc} (default {default})"


def add_config_options(p: argparse.ArgumentParser, cls: type, flags: tuple[Flag, ...],
                       defaults: dict[str, Any] | None = None, without: tuple[str, ...] = (), when: str = "") -> None:
    """The `flags` of the dataclass `cls`, with its defaults (`defaults` overriding some for this
    command) and its field docstrings as help (each begun with `when`, e.g. "--composer llm: ");
    `without`: fields this command has no use for. Read back by `config_kwargs`."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, value in (defaults or {}).items():
        fields[name] = copy.copy(fields[name])
        fields[name].default = value
    docs = field_docs(cls)
    for flag in flags:
        if flag.field in without:
            continue
        field = fields[flag.field]
        text = when + _help(flag, field, docs[flag.field])
        if _negated(flag):
            assert field.default is True, flag  # a --no-X flag turns off what is on by default
            p.add_argument(flag.flag, action="store_true", help=text)
        elif field.default is False:  # a switch that turns the field on
            p.add_argument(flag.flag, action="store_true", help=text.removesuffix(" (default False)"))
        else:
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            default = None if field.default is dataclasses.MISSING else field.default
            p.add_argument(flag.flag, type=flag.type, choices=flag.choices, default=default, metavar=flag.metavar,
                           required=required, help=text)


def config_kwargs(args: argparse.Namespace, flags: tuple[Flag, ...]) -> dict[str, Any]:
    """The fields that `add_config_options` put on the command line, as parsed: keyword arguments
    of the dataclass (a value left at None is left out, for the dataclass's own default)."""
    kw: dict[str, Any] = {}
    for flag in flags:
        if not hasattr(args, _dest(flag)):  # (a flag this command goes without)
            continue
        value = getattr(args, _dest(flag))
        if _negated(flag):
            kw[flag.field] = not value
        elif value is not None:
            kw[flag.field] = value
    return kw


EVAL_FLAGS = (
    Flag("device", "--device", choices=DEVICES),
    Flag("policy", "--policy", choices=POLICIES),
    Flag("trials", "--trials", positive(int)),
    Flag("stress_trials", "--stress-trials", int),
    Flag("shapes", "--shapes", int, metavar="N"),
    Flag("require_generalization", "--require-generalization"),
    Flag("atol", "--atol", float),
    Flag("rtol", "--rtol", float),
    Flag("seeds", "--seeds", seed_list, metavar="SEED,SEED,..."),
    Flag("timing", "--no-timing"),
    Flag("compile_baseline", "--no-compile-baseline"),
    Flag("baseline_cache", "--no-baseline-cache"),
    Flag("timeout_s", "--timeout", positive(float)),
    Flag("cache_dir", "--cache-dir", Path),
    Flag("isolation", "--isolation", choices=ISOLATION_MODES),
    Flag("reward", "--reward", choices=REWARDS),
)


def add_eval_options(p: argparse.ArgumentParser, isolation: str | None = None, without: tuple[str, ...] = ()) -> None:
    """--json and the EVAL_FLAGS of `EvalConfig`. `isolation`: this command's default of
    --isolation where it differs from EvalConfig's (`required` for the commands that run
    model-written code unattended: solve, serve); `without`: fields this command has no use for
    (`baselines` gives no reward)."""
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_config_options(p, EvalConfig, EVAL_FLAGS, {"isolation": isolation} if isolation else None, without)


def eval_config(args: argparse.Namespace) -> EvalConfig:
    """The EvalConfig of the parsed EVAL_FLAGS; a field's invalid value is a user error."""
    try:
        return EvalConfig(**config_kwargs(args, EVAL_FLAGS))
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


EPISODE_FLAGS = (
    Flag("max_turns", "--max-turns", positive(int)),
    Flag("context_tokens", "--context-tokens", positive(int)),
    Flag("wall_s", "--wall-time", positive(float)),
    Flag("allow_unsandboxed", "--unsandboxed"),
)


def add_agent_options(p: argparse.ArgumentParser, required: bool) -> None:
    """The endpoint and the EPISODE_FLAGS of `EpisodeConfig` (read by agent_setup)."""
    from cuda_agent.agent.config import EpisodeConfig

    add_endpoint_options(p, required)
    add_config_options(p, EpisodeConfig, EPISODE_FLAGS)


def agent_setup(args: argparse.Namespace, config: EvalConfig):
    """The model client and the episode settings of `solve` and `bench --agent`."""
    from cuda_agent.agent.config import EpisodeConfig

    cfg = EpisodeConfig(**config_kwargs(args, EPISODE_FLAGS), device=config.device, eval=config)
    return chat_client(args), cfg
