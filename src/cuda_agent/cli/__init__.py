"""The `cuda-agent` command line: `build_parser` assembles the subcommands of the command-group
modules (evaluate, bench, agent, synth, train), `main` runs one. The commands parse, call the
library and print. Imports nothing heavy: torch is loaded by worker processes only, rich when a
command prints."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from cuda_agent import __version__
from cuda_agent.cli import agent, bench, evaluate, synth, train
from cuda_agent.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, print_error
from cuda_agent.errors import CudaAgentError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuda-agent",
        description="Evaluate, generate and train on GPU kernels (an open implementation of CUDA Agent).",
    )
    parser.add_argument("--version", action="version", version=f"cuda-agent {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    for group in (evaluate, bench, agent, synth, train):
        group.add_parsers(sub)
    return parser


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
        print_error(args.subcommand, exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
