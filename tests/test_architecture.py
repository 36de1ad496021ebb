"""The shape of the code: imports run one way through the layers of DESIGN section 2, no module
reaches into another's private names, and no module grows past what a reader takes in at once.

The import graph is read from the source with `ast` (imports inside functions included), so these
tests import nothing of the package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "cuda_agent"
# DESIGN section 2, bottom to top: a module may import its own layer and the layers below. Within a
# layer of several packages, each package keeps to itself (bench, synth and rl are peers).
LAYERS: list[set[str]] = [
    {"", "errors"},  # the package root and its exception tree
    {"sandbox_limits", "sandbox_enter", "sandbox_files"},  # a sandbox's limits, processes, entering one, its files (sandbox.py builds on them)
    {"pyparse", "parquet", "reporting", "sandbox", "text"},  # helpers shared by several layers
    {"examples"},  # the bundled example tasks and candidates (data)
    {"tasks"},
    {"evaluate"},
    {"workspace"},
    {"agent"},
    {"bench", "synth", "rl"},
    {"cli"},
    {"__main__"},
]
MAX_LINES = 600
DATA_TABLES: set[str] = set()  # modules exempt from MAX_LINES: data-like tables (none at present)


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _package(module: str) -> str:
    """The top-level package of a module under cuda_agent ("" for the package root itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _rank(module: str) -> int:
    top = _package(module)
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{module}: in no layer of LAYERS; add its package to the layer it belongs to")


def _imports(module: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names taken from it) for each import of a cuda_agent module."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "cuda_agent"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "cuda_agent":
                out.append((node.lineno, target, [a.name for a in node.names]))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_imports_run_one_way_through_the_layers():
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        for line, target, names in _imports(module, path):
            # `from cuda_agent.x import y` may name a submodule y: judge the deepest module named
            targets = [f"{target}.{n}" if f"{target}.{n}" in modules else target for n in names] or [target]
            for t in targets:
                if t == "cuda_agent" or _package(t) == _package(module):
                    continue
                if _rank(t) > _rank(module) or (_rank(t) == _rank(module) and _package(t) != _package(module)):
                    wrong.append(f"{path.relative_to(SRC)}:{line}: {module} imports {t}")
    assert not wrong, "imports against DESIGN section 2's layers:\n" + "\n".join(sorted(set(wrong)))


def test_no_module_imports_another_modules_private_names():
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        bound: dict[str, str] = {}  # local name -> a cuda_agent module it stands for
        for line, target, names in _imports(module, path):
            for n in names:
                if f"{target}.{n}" in modules:
                    bound[n] = f"{target}.{n}"
                elif _private(n) and target != module:
                    wrong.append(f"{path.relative_to(SRC)}:{line}: imports {n} from {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "cuda_agent" and a.asname:
                        bound[a.asname] = a.name
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and _private(node.attr)):
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno}: uses {bound[node.value.id]}.{node.attr}")
    assert not wrong, "private names used across modules:\n" + "\n".join(sorted(set(wrong)))


def test_no_module_is_longer_than_a_reader_takes_in_at_once():
    long = {m: n for m, p in _modules().items()
            if m not in DATA_TABLES and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them along their seams): {long}"


@pytest.mark.parametrize("source,imports", [
    ("from cuda_agent.evaluate import protocol\n", ["cuda_agent.evaluate.protocol"]),
    ("from .common import Failure\n", ["cuda_agent.evaluate.worker.common"]),
    ("import cuda_agent.tasks as t\n", ["cuda_agent.tasks"]),
])
def test_the_import_scan_resolves_absolute_relative_and_submodule_imports(tmp_path, source, imports):
    """The scan these tests rest on, on known input: a checker that saw no import would pass all."""
    path = tmp_path / "judge.py"
    path.write_text(source)
    modules = _modules()
    found = [f"{t}.{n}" if f"{t}.{n}" in modules else t
             for _, t, names in _imports("cuda_agent.evaluate.worker.judge", path) for n in (names or [""])]
    assert [f.rstrip(".") for f in found] == imports


def test_only_the_cache_layout_names_the_cache_s_folders():
    """evaluate/cache_layout.py names each folder of the evaluator's cache and says who writes it; a
    module that joins a literal name to a cache path keeps a second, unlisted layout."""
    literal = re.compile(r"cache(?:_dir)?\)?\s*/\s*f?[\"']")  # `cache_dir / "name"`, `Path(cache_dir) / "x"`
    found = [f"{p.relative_to(SRC)}:{n}: {line.strip()}" for m, p in _modules().items() if m != "cuda_agent.evaluate.cache_layout"
             for n, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert not found, "cache folders named outside evaluate/cache_layout.py:\n" + "\n".join(found)
