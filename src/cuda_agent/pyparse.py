"""Python source as it comes: `ast.parse` that threads may call at once, the value of a
module-level constant (a task's sizes), and the module a model's reply holds in its fenced code
blocks.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by the interpreter's
threads: two threads parsing at the same time can fail with "SystemError: AST constructor
recursion depth mismatch" (python/cpython#106905). The evaluator's policy checks run in an
`Evaluator`'s threads and the synth pipeline fingerprints drafts in threads; CI hit it once in
`test_a_run_resumes_where_it_stopped`. Parsing takes milliseconds, so one lock costs nothing.
"""

from __future__ import annotations

import ast
import operator
import re
import textwrap
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)


# Arithmetic a size constant may use (`N = 2048 * 2`, `HIDDEN = 4 * D // 3`).
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
MAX_EXPONENT = 64  # `2 ** 30` is a size; `10 ** 10 ** 10` is a way to stop the parser's thread


def constant(node: ast.AST | None, known: dict[str, object]) -> object | None:
    """The value of a constant expression as a module defines its sizes: literals, tuples and lists
    of them, the names in `known` (constants defined before), signs, and arithmetic on numbers
    (exponents up to MAX_EXPONENT). None for anything else (a call, an attribute, a name not
    known), and where the arithmetic fails (division by zero, overflow). Nothing is executed."""
    try:
        return _constant(node, known)
    except (ArithmeticError, TypeError, ValueError, RecursionError):
        return None


def _constant(node: ast.AST | None, known: dict[str, object]) -> object | None:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_constant(e, known) for e in node.elts]
        return None if any(v is None for v in items) else tuple(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _constant(node.operand, known)
        return (-v if isinstance(node.op, ast.USub) else v) if _number(v) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        a, b = _constant(node.left, known), _constant(node.right, known)
        if not (_number(a) and _number(b)) or (isinstance(node.op, ast.Pow) and not 0 <= b <= MAX_EXPONENT):
            return None
        return _ARITHMETIC[type(node.op)](a, b)
    return None


def _number(v: object) -> bool:
    return type(v) in (int, float)


# An opening fence with its info string, the body, and a closing fence at the start of a line.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
_PYTHON_TAGS = frozenset({"", "python", "python3", "py"})


def extract_module(text: str, defines: str) -> str:
    """The Python module in a model's reply: among its fenced code blocks tagged python (or untagged),
    the longest that defines `class <defines>` (the last of equals), else the last one. ValueError,
    saying what the reply held, when there is none."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text.replace("\r\n", "\n"))]
    python = [textwrap.dedent(body).strip() for tag, body in blocks if tag in _PYTHON_TAGS]
    python = [b for b in python if b]
    if not python:
        others = sorted({tag for tag, _ in blocks if tag not in _PYTHON_TAGS})
        seen = f" (only blocks tagged {', '.join(others)})" if others else ""
        raise ValueError(f"the reply holds no closed ```python code block{seen}; the module must come "
                         "complete in a ```python ... ``` block")
    defining = [b for b in python if re.search(rf"^class {re.escape(defines)}\b", b, re.MULTILINE)]
    if not defining:
        return python[-1] + "\n"
    return max(reversed(defining), key=len) + "\n"  # max keeps the first of equals: the last in the reply
