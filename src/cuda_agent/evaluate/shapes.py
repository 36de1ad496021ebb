"""Which of a task's sizes can change, and to what: the size sets of shape generalisation
(`EvalConfig.shapes`).

A KernelBench task states its sizes as module-level integer constants (`batch_size = 16`,
`dim = 16384`) that `get_inputs()` reads when it is called. Setting such a constant in the judge's
task module changes the inputs without rebuilding anything, provided neither model was built from
it: so only the constants that `get_inputs` reads and nothing else does are scaled. Frozen are the
constants read by `get_init_inputs`, by any class (the `Model`: a buffer's size, a default
argument), by a function's default arguments, and by module-level statements other than integer
constants (`shape = (batch_size, dim)` is computed once, at import), each with the constants it
is computed from. Constants computed from scaled ones (`n = batch_size * dim`) are computed again.

Read from the task's source with `ast` (the harness never runs task code); only integer literals
and arithmetic on them (+ - * // % **) count as constants. Pure: no torch.
"""

from __future__ import annotations

import ast
import dataclasses

from cuda_agent import pyparse

# Scales tried in order. Larger first: a kernel that processes a fixed element count leaves the
# tail of a larger output unwritten (a mismatch), while on a smaller one it may write past the
# end unnoticed. Scaling up is dropped where the inputs would exceed the memory bound (the judge's
# `max_in_bytes`), so smaller sizes follow each larger one.
SCALES = (1.5, 0.5, 2.0, 0.25, 3.0, 0.125)
ALIGNMENTS = (32, 16, 8)  # a constant that is a multiple of one of these stays one when scaled
GROW_BYTES_FACTOR = 4  # a scaled input set may take at most this many times the task's inputs' bytes
GROW_MAX_BYTES = 256 << 20  # ... and only where the task's inputs take at most this; else never more

@dataclasses.dataclass(frozen=True)
class Sizes:
    """The task's integer constants: `values` (name -> value), `exprs` (their defining
    expressions, in module order), `scalable` (the constants shape trials may change) and, when
    none is, `why`."""

    values: dict[str, int]
    exprs: dict[str, ast.expr]
    scalable: tuple[str, ...]
    why: str | None

    def with_scale(self, scale: float) -> tuple[dict[str, int], dict[str, int]] | None:
        """(the scaled constants' new values, every constant that changes: those and the ones
        computed from them) at `scale`, or None when nothing changes or a value would be < 1."""
        new = {k: scaled(self.values[k], scale) for k in self.scalable}
        new = {k: v for k, v in new.items() if v != self.values[k]}
        if not new:
            return None
        env: dict[str, int] = {}
        for name, expr in self.exprs.items():
            env[name] = new[name] if name in new else _eval(expr, env)
            if env[name] is None or env[name] < 1 <= self.values[name]:
                return None  # a derived size would vanish or its arithmetic fails
        changed = {k: v for k, v in env.items() if v != self.values[k]}
        return new, changed


def scaled(value: int, scale: float) -> int:
    """`value * scale` rounded, at least 1; a multiple of 32, 16 or 8 stays a multiple of the
    largest of these that divides it and lands within a quarter of the scaled value (16 * 1.5 is
    24, a multiple of 8, not 32)."""
    raw = value * scale
    for m in ALIGNMENTS:
        if value % m == 0 and raw >= m and abs(round(raw / m) * m - raw) <= raw / 4:
            return round(raw / m) * m
    return max(1, round(raw))


def _eval(node: ast.expr, env: dict[str, int]) -> int | None:
    """An integer expression of literals and known constants, or None."""
    v = pyparse.constant(node, env)
    return v if type(v) is int else None


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _assigned(stmt: ast.stmt) -> list[tuple[str, ast.expr | None]]:
    """(name, value) of a module-level assignment: value None where it cannot be paired."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, stmt.value)]
    if isinstance(stmt, ast.Assign):
        out: list[tuple[str, ast.expr | None]] = []
        for t in stmt.targets:
            if isinstance(t, ast.Name):
                out.append((t.id, stmt.value))
            elif isinstance(t, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(t.elts) == len(stmt.value.elts):
                out += [(e.id, v) if isinstance(e, ast.Name) else ("", None) for e, v in zip(t.elts, stmt.value.elts)]
            else:
                out += [(n.id, None) for n in ast.walk(t) if isinstance(n, ast.Name)]
        return out
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return [(stmt.target.id, None)]
    return []


def _is_main(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`, which never runs in the judge."""
    t = stmt.test if isinstance(stmt, ast.If) else None
    return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
            and len(t.comparators) == 1 and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value == "__main__")


def analyse(source: str) -> Sizes:
    """The task's integer constants and which of them shape trials may scale."""
    try:
        tree = pyparse.parse(source)
    except SyntaxError as exc:
        return Sizes({}, {}, (), f"the task does not parse: {exc}")
    values: dict[str, int] = {}
    exprs: dict[str, ast.expr] = {}
    deps: dict[str, set[str]] = {}
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    frozen_reads: set[str] = set()  # names read where a change would not reach, or would break a model
    seen: set[str] = set()
    twice: set[str] = set()

    def drop(name: str) -> None:
        for d in (values, exprs, deps):
            d.pop(name, None)

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[stmt.name] = stmt
            for d in stmt.decorator_list + stmt.args.defaults + [d for d in stmt.args.kw_defaults if d]:
                frozen_reads |= _loads(d)
            continue
        if isinstance(stmt, ast.ClassDef):
            frozen_reads |= _loads(stmt)
            continue
        pairs = _assigned(stmt)
        for name, value in pairs:
            (twice if name in seen else seen).add(name)
            v = _eval(value, values) if value is not None else None
            if v is not None and name not in twice:
                values[name], exprs[name], deps[name] = v, value, _loads(value) & set(values)
            else:
                drop(name)
                if value is not None:
                    frozen_reads |= _loads(value)
        if not pairs and not isinstance(stmt, (ast.Import, ast.ImportFrom)) and not _is_main(stmt):
            frozen_reads |= _loads(stmt)
    for name in twice:
        drop(name)
    # `global x` in a function: the constant is assigned at run time, so it is not one
    for fn in functions.values():
        for n in ast.walk(fn):
            if isinstance(n, ast.Global):
                frozen_reads |= set(n.names)
                for name in n.names:
                    drop(name)
    if "get_inputs" not in functions:
        return Sizes(values, exprs, (), "the task has no get_inputs function")

    def reads(fn_name: str) -> set[str]:
        """Names read by the function's body and the module-level functions it reaches."""
        out: set[str] = set()
        todo, done = [fn_name], set()
        while todo:
            f = todo.pop()
            if f in done or f not in functions:
                continue
            done.add(f)
            names = set().union(*(_loads(s) for s in functions[f].body))
            out |= names
            todo += [n for n in names if n in functions]
        return out

    def closure(names: set[str]) -> set[str]:
        out, todo = set(), [n for n in names if n in values]
        while todo:
            n = todo.pop()
            if n not in out:
                out.add(n)
                todo += list(deps.get(n, ()))
        return out

    used = closure(reads("get_inputs"))
    init_reads = reads("get_init_inputs") if "get_init_inputs" in functions else set()
    for f in functions:  # a function reached from a class's code (rare) is the class's too
        if f in frozen_reads:
            init_reads |= reads(f)
    frozen = closure(frozen_reads | init_reads)
    leaves = [n for n in values if not deps[n] and n in used and n not in frozen and values[n] > 1]
    why = None
    if not leaves:
        if not used:
            why = "get_inputs() reads no module-level integer constant (its sizes are literals)"
        elif not used - frozen:
            why = (f"every size get_inputs() reads ({', '.join(sorted(used))}) also builds the model "
                   "(get_init_inputs or the Model class reads it): changing it would change the task")
        else:
            why = f"no size get_inputs() reads can be scaled ({', '.join(sorted(used - frozen))}: 0 or 1)"
    return Sizes(values, exprs, tuple(leaves), why)


def size_sets(sizes: Sizes) -> list[tuple[float, dict[str, int], dict[str, int]]]:
    """(scale, the scaled constants, every changed constant) for each scale of SCALES that changes
    something, in SCALES's order, without repeats."""
    out, seen = [], set()
    for s in SCALES:
        got = sizes.with_scale(s)
        if got is None:
            continue
        key = tuple(sorted(got[1].items()))
        if key not in seen:
            seen.add(key)
            out.append((s, *got))
    return out


def max_in_bytes(task_in_bytes: int) -> int:
    """The most bytes one scaled input set may take: GROW_BYTES_FACTOR times the task's own inputs
    where these are small (at most GROW_MAX_BYTES), else no more than the task's own (only
    smaller sizes), so that shape trials stay within the memory the evaluation was admitted with."""
    return task_in_bytes * GROW_BYTES_FACTOR if task_in_bytes <= GROW_MAX_BYTES else task_in_bytes
