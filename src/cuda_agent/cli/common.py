"""What the commands share: the consoles, the one progress bar, stdout kept for --json, number
formats, exit codes and the error line. Imports nothing heavy: rich is loaded when a command runs."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

# 0: the command did its work (a failing candidate is a verdict, still 0); 1: it stopped short of its
# goal (synth at --max-attempts); 2: a user error, with a message; 130: interrupted (Ctrl-C, SIGTERM).
EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130


def console(stderr: bool = False):
    """A rich console; when the stream is not a terminal (a pipe, a log), lines are not wrapped at
    80 columns, so tables stay readable in logs."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=160)


def progress_bar(on: Any, *counters: str):
    """The progress bar of every command that shows one, drawn on the console `on` (stderr) and
    gone when done: description, bar, done of total, one column `{N} COUNTER` per counter (a field
    of the bar's task, e.g. `correct`), time left."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    *(TextColumn(f"{{task.fields[{c}]}} {c}") for c in counters), TimeRemainingColumn(),
                    console=on, transient=True)


@contextlib.contextmanager
def stdout_reserved(active: bool) -> Iterator[None]:
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


def fmt_ms(stats) -> str:
    """A TimeStats' median in ms, `-` for none."""
    return "-" if stats is None else f"{stats.median:.4g}"


def fmt_x(x: float | None) -> str:
    """A speedup, `-` for none."""
    return "-" if x is None else f"{x:.2f}x"


def print_error(command: str, message: Any) -> None:
    """The line a user error ends a command with (exit status EXIT_USAGE)."""
    print(f"cuda-agent {command}: error: {message}", file=sys.stderr)
