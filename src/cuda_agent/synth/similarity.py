"""AST similarity between KernelBench-format tasks, for decontamination and deduplication.

The CUDA Agent paper drops every synthesised task whose AST similarity to a KernelBench task is 0.9 or
more, and the dataset is deduplicated within itself. This module defines that similarity precisely.

The measure, step by step (enough to reproduce a number by hand):

1. **Fingerprint** (`fingerprint`). The module is parsed with `ast.parse` and walked depth-first in
   source order (each node's fields in `ast` field order), emitting one string token per step:

   - a statement or expression node emits its class name (`Assign`, `Call`, `Return`, `For`,
     `Subscript`, `Tuple`, ...); an operator node is folded into one token: `BinOp` emits the operator's
     class name (`Add`, `MatMult`), `UnaryOp` likewise (`USub`), `BoolOp` likewise (`And`), `AugAssign`
     emits `AugAssign.<op>`, and `Compare` emits `Compare` followed by each comparison operator
     (`Lt`, `Is`, ...) before its right operand. Expression contexts (load/store) emit nothing;
   - names that carry meaning are kept, imports resolved to full dotted paths: `F.relu`,
     `torch.nn.functional.relu` and `relu` after `from torch.nn.functional import relu` all emit the one
     token `torch.nn.functional.relu`; `nn.Conv2d` emits `torch.nn.Conv2d`. Names bound nowhere in the
     module (builtins such as `super`, `len`, `range`) are kept as written; so are the protocol names
     `Model`, `ModelNew`, `forward`, `get_inputs`, `get_init_inputs` and every `__dunder__`;
   - user-chosen identifiers are renamed by order of first use: a local variable or parameter of a
     function (or lambda) becomes `v0`, `v1`, ... (numbered afresh in each function), a module-level
     variable, function or class `g0`, `g1`, ..., an attribute that the module assigns (`self.conv = ...`)
     or a method or class attribute it defines `a0`, `a1`, ... (module-wide), and a keyword argument of
     a call to a callable the module defines `k0=`, `k1=`, .... Attributes the module never assigns keep
     their name with a leading dot (`.view`, `.weight`, `.shape`), as do keywords of calls to library
     functions (`dim=`, `keepdim=`);
   - a function definition emits `FunctionDef` (or `AsyncFunctionDef`), its name, its defaults, its
     decorators, then its parameters (`*`/`**` prefixed for `*args`/`**kwargs`) and its body; a class
     definition emits `ClassDef`, its name, its bases and keywords, its decorators, then its body; a
     call emits `Call`, the callee, the positional arguments, then for each keyword argument `<name>=`
     (or `**`) and its value;
   - numeric literals (int, float, complex) all emit `Num`: sizes and hyper-parameters do not make two
     tasks different. `True`, `False`, `None` emit themselves and `...` emits `...`; a string literal
     emits `Str:` followed by its `repr` (modes such as `'bilinear'` and einsum equations carry meaning);
   - ignored entirely: comments, docstrings and every other statement that is only a string literal,
     `import` statements (they only feed the name resolution), `global`/`nonlocal`, and type
     annotations (parameter and return annotations; an annotated assignment without a value).

   So a task with renamed variables, attributes, functions, parameters and classes and different
   sizes has exactly the same fingerprint as the original.

2. **Operator sequence** of a fingerprint: its subsequence of tokens that name an operation, i.e. every
   token except AST node class names, canonical identifiers (`v3`, `g0`, `a2`, `*v1`, `k0=`), `Num`,
   literals (`True`, `False`, `None`, `...`, `Str:...`), keyword tokens (ending in `=`), `**`, the
   boilerplate every task has (`Model`, `ModelNew`, `forward`, `get_inputs`, `get_init_inputs`, `super`,
   `torch.nn.Module`, dunders with or without a leading dot). What remains are library paths, builtins,
   attribute names such as `.view`, and operator tokens (`Add`, `AugAssign.Add`, `Lt`); each is
   normalised to its last dotted component, lower-cased, so that spellings of one operator agree
   (`torch.relu`, `torch.nn.functional.relu`, `torch.nn.ReLU`, `.relu` -> `relu`; `Add`,
   `AugAssign.Add` -> `add`).

3. **Similarity** (`similarity`) of fingerprints `a` and `b` is `min(R(a, b), R(ops(a), ops(b)))`,
   where `R(x, y)` is the `difflib.SequenceMatcher` ratio `2 * M / (len(x) + len(y))` (1.0 when both are
   empty) computed as `SequenceMatcher(None, x, y, autojunk=False).ratio()` with the two sequences
   ordered so that `(len(x), x) <= (len(y), y)` (tuples compared in Python's order). The ordering makes
   `R` symmetric (SequenceMatcher breaks ties between equally long matching blocks by position, so its
   ratio can depend on argument order); `autojunk=False` keeps every token (autojunk would ignore tokens
   that are frequent in a long sequence). The similarity is 1.0 exactly when the fingerprints are equal.

Why this measure: it is the paper's notion (similar AST structure, threshold 0.9) made invariant to what
does not change the computation (names, sizes, constants, comments, docstrings, annotations). The
structural ratio alone is too lenient with KernelBench-style tasks: their boilerplate (`get_inputs`,
`super().__init__()`, size constants) is most of the tokens, so Matmul+Sigmoid+Sum and Matmul+GELU+Softmax
score 0.96 and 44 of the 100 level-2 tasks score >= 0.9 against another KernelBench task. Requiring the
operator sequence to agree as well (same operators, same order; an alignment, so Conv2d -> ReLU and
ReLU -> Conv2d differ) keeps copies with renamed variables, changed sizes, an added comment or a
re-spelt operator at or near 1.0 while compositions with different operators fall below 0.9. For scale:
substituting one operator in a sequence of n scores at most (n - 1) / n on the operator side, adding one
2n / (2n + 1); the operator sequence of a KernelBench level-2 task has 4 to 12 entries, median 6 (`rand` from
`get_inputs` and `parameter`/`randn` of a bias included).

Speed (`SimilarityIndex.max_similarity`): an exact fingerprint match answers at once; otherwise every
entry gets the upper bound `min(Q(a, b), Q(ops(a), ops(b)))` with `Q(x, y) = 2 * |bag(x) & bag(y)| /
(len(x) + len(y))` (difflib's `quick_ratio`, for all entries at once through inverted indexes of token
counts), and exact similarities are computed in decreasing order of that bound until the bound is below
the best score found. The result equals comparing with every entry (the maximum score and, among the
entries with that score, the one added first), only faster.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from difflib import SequenceMatcher
from pathlib import Path

from cuda_agent import pyparse
from cuda_agent.errors import TaskError

__all__ = ["fingerprint", "similarity", "SimilarityIndex", "kernelbench_index"]

Fingerprint = tuple[str, ...]

_PROTOCOL = frozenset({"Model", "ModelNew", "forward", "get_inputs", "get_init_inputs"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_FOLDED_OPS = (ast.BinOp, ast.UnaryOp, ast.BoolOp)


def _kept(name: str) -> bool:
    """Names kept verbatim even when the module binds them: the task protocol and dunders."""
    return name in _PROTOCOL or (name.startswith("__") and name.endswith("__"))


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


# --------------------------------------------------------------------------------------------------
# Pre-pass: imports, bindings per scope, attributes the module defines
# --------------------------------------------------------------------------------------------------


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> full dotted path, for every import anywhere in the module."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:  # `import torch.nn` binds `torch`
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    return aliases


def _scope_children(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes evaluated in the scope that `node` opens (or, for a module, the module's scope)."""
    if isinstance(node, ast.Lambda):
        yield node.body
    elif isinstance(node, _SCOPES):
        yield from node.body
    else:
        yield from ast.iter_child_nodes(node)


def _bindings(scope: ast.AST) -> set[str]:
    """Names bound in `scope` (not counting imports): assignment and loop targets, `except ... as`,
    nested function and class names, and parameters for a function; minus `global`/`nonlocal` names."""
    bound: set[str] = set()
    declared: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        for arg in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg):
            if arg is not None:
                bound.add(arg.arg)
    stack = list(_scope_children(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            # decorators, defaults and bases are evaluated in this scope, the body is not
            stack.extend(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                stack.extend(node.bases)
                stack.extend(k.value for k in node.keywords)
            else:
                stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        if isinstance(node, ast.Lambda):
            stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return bound - declared


def _defined_attributes(tree: ast.Module) -> set[str]:
    """Attribute names the module chooses: assigned or deleted attributes, methods and class-body names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            names |= _bindings(node)
    return {n for n in names if not _kept(n)}


# --------------------------------------------------------------------------------------------------
# The token walk
# --------------------------------------------------------------------------------------------------


class _Scope:
    __slots__ = ("is_class", "bound", "names")

    def __init__(self, is_class: bool, bound: set[str]):
        self.is_class = is_class
        self.bound = bound
        self.names: dict[str, str] = {}


class _Walker:
    def __init__(self, tree: ast.Module):
        self.aliases = _import_aliases(tree)
        self.module_bound = _bindings(tree)
        self.user_attrs = _defined_attributes(tree)
        self.globals: dict[str, str] = {}
        self.attrs: dict[str, str] = {}
        self.keywords: dict[str, str] = {}
        self.scopes: list[_Scope] = []
        self.out: list[str] = []

    # -- names ------------------------------------------------------------------------------------

    def _resolve(self, name: str) -> tuple[str, bool]:
        """(token, whether the module chose the name)."""
        if _kept(name):
            return name, False
        for depth, scope in enumerate(reversed(self.scopes)):
            if scope.is_class and depth > 0:  # a class body is not visible from its methods
                continue
            if name in scope.bound:
                if scope.is_class:
                    return self._attr(name), True
                return scope.names.setdefault(name, f"v{len(scope.names)}"), True
        if name in self.module_bound:
            return self.globals.setdefault(name, f"g{len(self.globals)}"), True
        if name in self.aliases:
            return self.aliases[name], False
        return name, False

    def _attr(self, attr: str) -> str:
        if attr in self.user_attrs:
            return self.attrs.setdefault(attr, f"a{len(self.attrs)}")
        return "." + attr

    def _module_path(self, node: ast.expr) -> str | None:
        """The dotted path when `node` is an attribute chain rooted at an imported name, else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        token, user = self._resolve(node.id)
        if user or node.id not in self.aliases:
            return None
        return ".".join([token, *reversed(parts)])

    def _callee_is_user(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):  # `Model(...)` counts: kept verbatim, yet defined here
            return self._resolve(func.id)[1] or func.id in self.module_bound
        if isinstance(func, ast.Attribute):
            return self._module_path(func) is None and func.attr in self.user_attrs
        return False

    # -- traversal --------------------------------------------------------------------------------

    def visit(self, node: ast.AST) -> None:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
            return
        if isinstance(node, _FOLDED_OPS):
            self.out.append(type(node.op).__name__)
        elif not isinstance(node, (ast.expr_context, ast.operator, ast.unaryop, ast.boolop)):
            self.out.append(type(node).__name__)
        self.generic(node)

    def generic(self, node: ast.AST) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                self.visit(value)
            elif isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.body(value)
            elif isinstance(value, list):
                self.many(value)

    def many(self, nodes: Iterable[ast.AST | None]) -> None:
        for n in nodes:
            if isinstance(n, ast.AST):
                self.visit(n)

    def body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if not _is_docstring(stmt):
                self.visit(stmt)

    def visit_Module(self, node: ast.Module) -> None:
        self.body(node.body)

    def visit_Import(self, node: ast.AST) -> None:
        pass

    visit_ImportFrom = visit_Global = visit_Nonlocal = visit_Import

    def visit_Name(self, node: ast.Name) -> None:
        self.out.append(self._resolve(node.id)[0])

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self._module_path(node)
        if path is not None:
            self.out.append(path)
            return
        self.visit(node.value)
        self.out.append(self._attr(node.attr))

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if v is Ellipsis:
            self.out.append("...")
        elif isinstance(v, bool) or v is None:
            self.out.append(repr(v))
        elif isinstance(v, (int, float, complex)):
            self.out.append("Num")
        else:
            self.out.append("Str:" + repr(v))

    def visit_Call(self, node: ast.Call) -> None:
        self.out.append("Call")
        self.visit(node.func)
        self.many(node.args)
        user = self._callee_is_user(node.func)
        for kw in node.keywords:
            if kw.arg is None:
                self.out.append("**")
            elif user:
                self.out.append(self.keywords.setdefault(kw.arg, f"k{len(self.keywords)}") + "=")
            else:
                self.out.append(kw.arg + "=")
            self.visit(kw.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.out.append("AugAssign." + type(node.op).__name__)
        self.visit(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:  # the annotation is ignored; a bare declaration emits nothing
            self.out.append("Assign")
            self.visit(node.target)
            self.visit(node.value)

    def visit_Compare(self, node: ast.Compare) -> None:
        self.out.append("Compare")
        self.visit(node.left)
        for op, right in zip(node.ops, node.comparators):
            self.out.append(type(op).__name__)
            self.visit(right)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self.out.append("ExceptHandler")
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.out.append(self._resolve(node.name)[0])
        self.body(node.body)

    def _arguments(self, args: ast.arguments) -> None:
        for arg in (*args.posonlyargs, *args.args):
            self.out.append(self._resolve(arg.arg)[0])
        if args.vararg is not None:
            self.out.append("*" + self._resolve(args.vararg.arg)[0])
        for arg in args.kwonlyargs:
            self.out.append(self._resolve(arg.arg)[0])
        if args.kwarg is not None:
            self.out.append("**" + self._resolve(args.kwarg.arg)[0])

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.out.append(type(node).__name__)
        self.out.append(self._resolve(node.name)[0])
        # defaults and decorators are evaluated in the enclosing scope
        self.many(node.args.defaults)
        self.many(node.args.kw_defaults)
        self.many(node.decorator_list)
        self.scopes.append(_Scope(False, _bindings(node)))
        self._arguments(node.args)
        self.body(node.body)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.out.append("Lambda")
        self.many(node.args.defaults)
        self.many(node.args.kw_defaults)
        self.scopes.append(_Scope(False, _bindings(node)))
        self._arguments(node.args)
        self.visit(node.body)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.out.append("ClassDef")
        self.out.append(self._resolve(node.name)[0])
        self.many(node.bases)
        for kw in node.keywords:
            self.out.append("**" if kw.arg is None else kw.arg + "=")
            self.visit(kw.value)
        self.many(node.decorator_list)
        self.scopes.append(_Scope(True, _bindings(node)))
        self.body(node.body)
        self.scopes.pop()


def fingerprint(source: str, origin: str = "<source>") -> Fingerprint:
    """The canonical token sequence of the task module `source` (see the module docstring).

    Raises `TaskError` (a `ValueError`) naming `origin` and the line when `source` does not parse.
    """
    try:
        tree = pyparse.parse(source, filename=origin)
    except SyntaxError as exc:
        raise TaskError(origin, f"syntax error: {exc.msg}; fix the Python syntax of the task module",
                        exc.lineno) from None
    except ValueError as exc:  # e.g. NUL bytes in the source
        raise TaskError(origin, f"cannot be parsed as Python: {exc}") from None
    walker = _Walker(tree)
    walker.visit(tree)
    return tuple(walker.out)


# --------------------------------------------------------------------------------------------------
# The measure and the index
# --------------------------------------------------------------------------------------------------


def _node_types() -> frozenset[str]:
    """Class names of AST nodes, which the walk emits as structure; not the operator classes, and not
    the few (deprecated) ones named like a builtin (`slice`, `Ellipsis`), so builtins stay operators."""
    folded = (ast.operator, ast.cmpop, ast.unaryop, ast.boolop, ast.expr_context)
    names: set[str] = set()
    stack = [ast.AST]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if not issubclass(cls, folded):
            names.add(cls.__name__)
    return frozenset(names - set(dir(builtins)))


_NODE_TYPES = _node_types()
_NOT_OPERATORS = _NODE_TYPES | _PROTOCOL | {"Num", "True", "False", "None", "...", "**", "super",
                                            "torch.nn.Module"}
_CANONICAL = re.compile(r"^\*{0,2}[vga]\d+$")


def _operators(fp: Fingerprint) -> Fingerprint:
    """The operator sequence of a fingerprint (module docstring, step 2)."""
    ops = []
    for token in fp:
        if (token in _NOT_OPERATORS or token.endswith("=") or token.startswith("Str:")
                or _CANONICAL.match(token) or _kept(token.lstrip("."))):
            continue
        ops.append(token.rsplit(".", 1)[-1].lower())
    return tuple(ops)


def _ratio(a: Fingerprint, b: Fingerprint) -> float:
    x, y = (a, b) if (len(a), a) <= (len(b), b) else (b, a)
    return SequenceMatcher(None, x, y, autojunk=False).ratio()


def similarity(a: Fingerprint, b: Fingerprint) -> float:
    """min(structural ratio, operator-sequence ratio) of two fingerprints, in [0, 1]; symmetric."""
    a, b = tuple(a), tuple(b)
    return min(_ratio(a, b), _ratio(_operators(a), _operators(b)))


class _Column:
    """One sequence per index entry (fingerprints, or operator sequences) with what speeds up `R`."""

    def __init__(self) -> None:
        self.seqs: list[Fingerprint] = []
        self.matchers: list[SequenceMatcher | None] = []  # the entry as seq2, built on first use
        self.postings: dict[str, list[tuple[int, int]]] = {}  # token -> [(entry, count)]

    def add(self, seq: Fingerprint) -> None:
        i = len(self.seqs)
        self.seqs.append(seq)
        self.matchers.append(None)
        for token, count in Counter(seq).items():
            self.postings.setdefault(token, []).append((i, count))

    def bounds(self, q: Fingerprint) -> list[float]:
        """`Q(q, entry)` for every entry (the same expression as difflib's ratio, so ties are exact)."""
        overlap = [0] * len(self.seqs)
        for token, count in Counter(q).items():
            for i, c in self.postings.get(token, ()):
                overlap[i] += count if count < c else c
        n = len(q)
        return [2.0 * m / (n + len(e)) if n + len(e) else 1.0 for m, e in zip(overlap, self.seqs)]

    def ratio(self, i: int, q: Fingerprint, query: dict[str, SequenceMatcher]) -> float:
        """`R(q, entry i)`, reusing the entry's matcher or the query's (cached in `query`)."""
        entry = self.seqs[i]
        if (len(q), q) <= (len(entry), entry):
            matcher = self.matchers[i]
            if matcher is None:
                matcher = self.matchers[i] = SequenceMatcher(None, (), entry, autojunk=False)
            matcher.set_seq1(q)
        else:
            matcher = query.get("m")
            if matcher is None:
                matcher = query["m"] = SequenceMatcher(None, (), q, autojunk=False)
            matcher.set_seq1(entry)
        return matcher.ratio()


class SimilarityIndex:
    """Fingerprints of tasks (e.g. KernelBench's) for `max_similarity` queries; grows with `add`."""

    def __init__(self, sources: Iterable[tuple[str, str]] = ()):
        self._ids: list[str] = []
        self._known: set[str] = set()
        self._exact: dict[Fingerprint, int] = {}  # fingerprint -> first entry holding it
        self._full = _Column()
        self._ops = _Column()
        for id_, source in sources:
            self.add(id_, source)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, id: str, source: str | Fingerprint) -> None:  # noqa: A002 - the documented name
        """Add a task (its source, or its fingerprint) under `id`, which must be new to the index."""
        if id in self._known:
            raise ValueError(f"{id}: already in the similarity index; give each task a unique id")
        fp = fingerprint(source, origin=id) if isinstance(source, str) else tuple(source)
        self._exact.setdefault(fp, len(self._ids))
        self._ids.append(id)
        self._known.add(id)
        self._full.add(fp)
        self._ops.add(_operators(fp))

    def max_similarity(self, source_or_fingerprint: str | Fingerprint) -> tuple[float, str | None]:
        """(best similarity, id of the entry it came from) over the index; (0.0, None) when empty.

        Among entries with the best score, the one added first is named. A `str` is a task's source
        (fingerprinted here); anything else is taken as a fingerprint.
        """
        q = source_or_fingerprint
        fp = fingerprint(q) if isinstance(q, str) else tuple(q)
        if not self._ids:
            return 0.0, None
        hit = self._exact.get(fp)
        if hit is not None:
            return 1.0, self._ids[hit]

        ops = _operators(fp)
        bounds = [min(f, o) for f, o in zip(self._full.bounds(fp), self._ops.bounds(ops))]
        best, best_i = -1.0, -1
        full_cache: dict[str, SequenceMatcher] = {}
        ops_cache: dict[str, SequenceMatcher] = {}
        for i in sorted(range(len(bounds)), key=lambda j: (-bounds[j], j)):
            if bounds[i] < best:
                break  # every later bound is lower still
            score = self._ops.ratio(i, ops, ops_cache)  # the cheap one first
            if score > best or (score == best and i < best_i):
                score = min(score, self._full.ratio(i, fp, full_cache))
                if score > best or (score == best and i < best_i):
                    best, best_i = score, i
        return best, self._ids[best_i]


def kernelbench_index(root: str | Path, levels: Iterable[int] = (1, 2, 3)) -> SimilarityIndex:
    """An index of the KernelBench tasks under `root`, ids like `level1/23_Softmax`."""
    from cuda_agent.tasks import load_kernelbench  # tasks stay unimported until an index is built

    return SimilarityIndex((task.id, task.source) for task in load_kernelbench(root, levels))
