"""`ast.parse` that threads may call at once.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by the interpreter's
threads: two threads parsing at the same time can fail with "SystemError: AST constructor
recursion depth mismatch" (python/cpython#106905). The evaluator's policy checks run in an
`Evaluator`'s threads and the synth pipeline fingerprints drafts in threads; CI hit it once in
`test_a_run_resumes_where_it_stopped`. Parsing takes milliseconds, so one lock costs nothing.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)
