"""The agent's file tools, with the names and arguments of the Claude Code tool set, so prompts and
trajectories carry over: Read, Write, Edit, MultiEdit, Glob, Grep. (Bash, BashOutput and KillBash
run commands through the sandbox: sandbox.py.)

Every path resolves inside the workspace: relative paths against its root, absolute paths only when
they lie inside it, symbolic links followed and checked. A tool never raises for what the model
asked: a mistake (a path outside, a missing file, an `old_string` that is not unique) comes back as
the text of the tool result, starting with "Error:", for the model to act on.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cuda_agent import sandbox
from cuda_agent.text import clip

READ_DEFAULT_LINES = 2000  # lines a Read returns without `limit`
READ_MAX_LINE = 2000  # characters kept of a longer line
MAX_WRITE_BYTES = 4 * 1024 * 1024
GREP_MAX_LINES = 1000  # result lines of one Grep


class ToolError(Exception):
    """A mistake the model can fix; its message becomes the tool result."""


def schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


SCHEMAS: dict[str, dict[str, Any]] = {
    "Read": {
        "description": "Read a file of the workspace. Returns its lines numbered like `cat -n` (up to "
                       f"{READ_DEFAULT_LINES} lines from `offset`; lines over {READ_MAX_LINE} characters are cut).",
        "parameters": schema({
            "file_path": {"type": "string", "description": "The file to read (relative to the workspace, or absolute inside it)"},
            "offset": {"type": "integer", "description": "The line number to start reading from (1-based)"},
            "limit": {"type": "integer", "description": "The number of lines to read"},
        }, ["file_path"]),
    },
    "Write": {
        "description": "Write a file of the workspace, replacing it if it exists (parent folders are created).",
        "parameters": schema({
            "file_path": {"type": "string", "description": "The file to write"},
            "content": {"type": "string", "description": "The content to write"},
        }, ["file_path", "content"]),
    },
    "Edit": {
        "description": "Replace `old_string` with `new_string` in a file. `old_string` must occur exactly once "
                       "unless `replace_all` is true.",
        "parameters": schema({
            "file_path": {"type": "string", "description": "The file to modify"},
            "old_string": {"type": "string", "description": "The text to replace"},
            "new_string": {"type": "string", "description": "The text to replace it with (must differ)"},
            "replace_all": {"type": "boolean", "default": False, "description": "Replace every occurrence"},
        }, ["file_path", "old_string", "new_string"]),
    },
    "MultiEdit": {
        "description": "Several edits of one file, applied in order; all succeed or none is applied.",
        "parameters": schema({
            "file_path": {"type": "string", "description": "The file to modify"},
            "edits": {"type": "array", "minItems": 1, "description": "Edits, applied in order", "items": schema({
                "old_string": {"type": "string"}, "new_string": {"type": "string"},
                "replace_all": {"type": "boolean", "default": False}}, ["old_string", "new_string"])},
        }, ["file_path", "edits"]),
    },
    "Glob": {
        "description": "Files of the workspace matching a glob pattern (`**/*.cu`), newest first.",
        "parameters": schema({
            "pattern": {"type": "string", "description": "The glob pattern"},
            "path": {"type": "string", "description": "The folder to search in (default: the workspace)"},
        }, ["pattern"]),
    },
    "Grep": {
        "description": "Search file contents with a regular expression (Python `re` syntax).",
        "parameters": schema({
            "pattern": {"type": "string", "description": "The regular expression"},
            "path": {"type": "string", "description": "File or folder to search (default: the workspace)"},
            "glob": {"type": "string", "description": "Only files matching this glob (`*.cu`, `**/*.py`)"},
            "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"],
                            "description": "Matching lines, the files with matches (default), or counts per file"},
            "-i": {"type": "boolean", "description": "Case insensitive"},
            "-n": {"type": "boolean", "description": "Line numbers (content mode)"},
            "-A": {"type": "integer", "description": "Lines after each match (content mode)"},
            "-B": {"type": "integer", "description": "Lines before each match (content mode)"},
            "-C": {"type": "integer", "description": "Lines before and after each match (content mode)"},
            "head_limit": {"type": "integer", "description": "Only the first N lines or entries"},
        }, ["pattern"]),
    },
}


@dataclass
class FileTools:
    """The file tools over one workspace. `call(name, args)` returns the tool result's text."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self._tools: dict[str, Callable[..., str]] = {
            "Read": self.read, "Write": self.write, "Edit": self.edit, "MultiEdit": self.multi_edit,
            "Glob": self.glob, "Grep": self.grep}

    def call(self, name: str, args: dict[str, Any]) -> str:
        fn = self._tools.get(name)
        if fn is None:
            raise KeyError(name)
        try:
            check_args(name, args)
            return fn(**{k.lstrip("-"): v for k, v in args.items()})  # Grep's -i, -n, -A, -B, -C
        except ToolError as exc:
            return f"Error: {exc}"

    # -- paths --
    def path(self, given: str, must_exist: bool = True) -> Path:
        """`given` as a path inside the workspace (symbolic links resolved), or ToolError."""
        if not isinstance(given, str) or not given.strip():
            raise ToolError("a path is required")
        p = Path(given)
        p = (p if p.is_absolute() else self.root / p).resolve()
        if p != self.root and self.root not in p.parents:
            raise ToolError(f"{given}: outside the workspace {self.root}; only files inside it can be used")
        if must_exist and not p.exists():
            raise ToolError(f"{given}: no such file or folder")
        return p

    def _rel(self, p: Path) -> str:
        return str(p.relative_to(self.root)) if p != self.root else "."

    # (The shell's background commands run while a tool does: a folder checked here may be a link
    # out of the workspace by the time the file is opened. So a read checks the file it opened, and
    # a write opens the folders on the way one by one, following no link, and writes in the last.)
    def _text(self, p: Path, given: str) -> str:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise ToolError(f"{given}: {exc.strerror}") from None
        try:
            if not self._inside(Path(sandbox.opened_path(fd, p))):
                raise ToolError(f"{given}: outside the workspace {self.root}; only files inside it can be used")
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise ToolError(f"{given}: is a folder; use Glob to list it")
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{given}: not a UTF-8 text file") from None

    def _write(self, p: Path, given: str, content: str) -> None:
        if len(content.encode()) > MAX_WRITE_BYTES:
            raise ToolError(f"{given}: content over {MAX_WRITE_BYTES} bytes; write smaller files")
        try:
            folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
            for part in p.parent.relative_to(self.root).parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=folder)
                try:
                    inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
                finally:
                    os.close(folder)
                folder = inner
            try:
                fd = os.open(p.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=folder)
            finally:
                os.close(folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
        except OSError as exc:
            link = exc.errno in (errno.ELOOP, errno.ENOTDIR)
            raise ToolError(f"{given}: {exc.strerror}" + (" (a link on the way: write the file it points to)"
                                                          if link else "")) from None

    # -- the tools --
    def read(self, file_path: str, offset: int | None = None, limit: int | None = None) -> str:
        p = self.path(file_path)
        lines = self._text(p, file_path).splitlines()
        start = max(int(offset or 1), 1)
        count = READ_DEFAULT_LINES if limit is None else max(int(limit), 0)
        if not lines:
            return f"({file_path} is empty)"
        if start > len(lines):
            raise ToolError(f"{file_path}: offset {start} is past the end ({len(lines)} lines)")
        out = []
        for i, line in enumerate(lines[start - 1:start - 1 + count], start):
            if len(line) > READ_MAX_LINE:
                line = clip(line, READ_MAX_LINE, keep="head")
            out.append(f"{i:6d}\t{line}")
        end = start - 1 + len(out)
        if end < len(lines):
            out.append(f"... [{len(lines) - end} more lines; read on with offset={end + 1}]")
        return "\n".join(out)

    def write(self, file_path: str, content: str) -> str:
        p = self.path(file_path, must_exist=False)
        if p.is_dir():
            raise ToolError(f"{file_path}: is a folder")
        existed = p.exists()
        self._write(p, file_path, content)
        return f"{'Overwrote' if existed else 'Created'} {self._rel(p)} ({len(content.splitlines())} lines)"

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        p = self.path(file_path)
        text = self._text(p, file_path)
        text, n = _replace(text, old_string, new_string, replace_all, file_path)
        self._write(p, file_path, text)
        return f"Edited {self._rel(p)}: {n} replacement{'s' if n != 1 else ''}"

    def multi_edit(self, file_path: str, edits: list[dict[str, Any]]) -> str:
        p = self.path(file_path)
        text = self._text(p, file_path)
        total = 0
        for i, e in enumerate(edits, 1):
            if not isinstance(e, dict) or not {"old_string", "new_string"} <= set(e):
                raise ToolError(f"edit {i}: needs old_string and new_string")
            try:
                text, n = _replace(text, e["old_string"], e["new_string"], bool(e.get("replace_all")), file_path)
            except ToolError as exc:
                raise ToolError(f"edit {i} of {len(edits)}: {exc} (no edit was applied)") from None
            total += n
        self._write(p, file_path, text)
        return f"Edited {self._rel(p)}: {len(edits)} edits, {total} replacements"

    def glob(self, pattern: str, path: str | None = None) -> str:
        base = self.path(path or ".")
        if not base.is_dir():
            raise ToolError(f"{path}: not a folder")
        found = [p for p in base.glob(pattern) if p.is_file() and self._inside(p)]
        found.sort(key=lambda p: -p.stat().st_mtime)
        return "\n".join(self._rel(p) for p in found) if found else "No files found"

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None,
             output_mode: str = "files_with_matches", i: bool = False, n: bool = False, A: int = 0,
             B: int = 0, C: int | None = None, head_limit: int | None = None) -> str:
        try:
            rx = re.compile(pattern, re.IGNORECASE if i else 0)
        except re.error as exc:
            raise ToolError(f"bad regular expression {pattern!r}: {exc}") from None
        if output_mode not in ("content", "files_with_matches", "count"):
            raise ToolError(f"output_mode {output_mode!r}: use content, files_with_matches or count")
        base = self.path(path or ".")
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file() and self._inside(p))
        if glob:
            files = [f for f in files if fnmatch.fnmatch(self._rel(f), glob) or fnmatch.fnmatch(f.name, glob)]
        before, after = (C, C) if C is not None else (B, A)
        out: list[str] = []
        for f in files:
            try:
                lines = self._text(f, str(f)).splitlines()
            except ToolError:
                continue  # binary, unreadable or gone out of the workspace: skipped, as grep does
            hits = [k for k, line in enumerate(lines) if rx.search(line)]
            if not hits:
                continue
            if output_mode == "files_with_matches":
                out.append(self._rel(f))
            elif output_mode == "count":
                out.append(f"{self._rel(f)}:{len(hits)}")
            else:
                shown: set[int] = set()
                for k in hits:
                    shown.update(range(max(k - before, 0), min(k + after + 1, len(lines))))
                last = None
                for k in sorted(shown):
                    if last is not None and k > last + 1:
                        out.append("--")
                    sep = ":" if k in hits else "-"
                    out.append(f"{self._rel(f)}{sep}{k + 1}{sep}{lines[k]}" if n else f"{self._rel(f)}{sep}{lines[k]}")
                    last = k
        limit = head_limit if head_limit is not None else GREP_MAX_LINES
        if len(out) > limit:
            out = out[:limit] + [f"... [{len(out) - limit} more lines]"]
        return "\n".join(out) if out else "No matches found"

    def _inside(self, p: Path) -> bool:
        r = p.resolve()
        return r == self.root or self.root in r.parents


def _replace(text: str, old: str, new: str, replace_all: bool, given: str) -> tuple[str, int]:
    if not isinstance(old, str) or not isinstance(new, str):
        raise ToolError("old_string and new_string must be strings")
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to change")
    if old == "":
        raise ToolError("old_string is empty; use Write to create or replace a whole file")
    n = text.count(old)
    if n == 0:
        raise ToolError(f"{given}: old_string not found (it must match the file exactly, whitespace included)")
    if n > 1 and not replace_all:
        raise ToolError(f"{given}: old_string occurs {n} times; give more context to make it unique, or set "
                        "replace_all")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1), n if replace_all else 1


def check_args(name: str, args: dict[str, Any], schemas: dict[str, dict[str, Any]] | None = None) -> None:
    """Arguments against the tool's schema: required ones present, no unknown ones, basic types."""
    if not isinstance(args, dict):
        raise ToolError(f"{name}: arguments must be a JSON object")
    spec = (schemas or SCHEMAS)[name]["parameters"]
    props = spec["properties"]
    missing = [k for k in spec["required"] if k not in args]
    if missing:
        raise ToolError(f"{name}: missing required argument(s) {', '.join(missing)}")
    unknown = [k for k in args if k not in props]
    if unknown:
        raise ToolError(f"{name}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(props)}")
    types = {"string": str, "integer": int, "boolean": bool, "array": list}
    for k, v in args.items():
        want = types.get(props[k].get("type"))
        if want is not None and v is not None and not (isinstance(v, want) and not (want is int and isinstance(v, bool))):
            raise ToolError(f"{name}: argument {k} must be a {props[k]['type']}, got {type(v).__name__}")


def openai_tools(names: list[str] | None = None) -> list[dict[str, Any]]:
    """The tools' schemas in the chat-completions `tools` format."""
    return [{"type": "function", "function": {"name": k, **v}} for k, v in SCHEMAS.items()
            if names is None or k in names]


__all__ = ["FileTools", "SCHEMAS", "ToolError", "check_args", "openai_tools", "schema"]
