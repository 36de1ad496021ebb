"""pyparse.constant: the one reader of a module's size constants (shape trials, dumps' reference
comparison): what it evaluates, and that it evaluates nothing else."""

import ast

import pytest

from cuda_agent.pyparse import constant


def value(expr: str, known: dict | None = None):
    return constant(ast.parse(expr, mode="eval").body, known or {})


@pytest.mark.parametrize("expr,known,want", [
    ("2048 * 2", {}, 4096),
    ("4 * D // 3", {"D": 768}, 1024),
    ("N % 7 + 2 ** 10", {"N": 9}, 1026),
    ("(batch, 3, H)", {"batch": 16, "H": 224}, (16, 3, 224)),
    ("[1, -2]", {}, (1, -2)),
    ("'float32'", {}, "float32"),
    ("1.5 * N", {"N": 4}, 6.0),
])
def test_literals_known_names_and_arithmetic_are_evaluated(expr, known, want):
    got = value(expr, known)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("expr", [
    "f(3)", "torch.float32", "unknown * 2", "1 // 0", "10 ** 10 ** 10", "2 ** -1 ** 100",
    "2.0 ** 1000 * 2.0 ** 1000", "-'a'", "'a' * 3", "(1, g())", "N if N else 2",
])
def test_anything_else_is_none_and_nothing_runs(expr):
    assert value(expr, {"N": 2}) is None
