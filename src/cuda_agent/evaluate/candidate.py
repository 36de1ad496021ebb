"""Candidates: a KernelBench single file defining `ModelNew`, or a workspace directory.

Only the trusted parts of a candidate are read: the single file itself, or a workspace's
`model_new.py` and the sources in `kernels/`. Everything else in a workspace (its `binding.cpp`, its
`utils/`, stray modules that could shadow `torch`) is ignored: the evaluator stages a fresh directory
holding only these files and builds with its own fixed binding files.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent import sandbox
from cuda_agent.errors import CandidateError

KERNEL_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
COMPILED_SUFFIXES = (".cu", ".cpp", ".cc")
MAX_SOURCE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Candidate:
    """A snapshot of a candidate's trusted sources, taken when it is loaded."""

    origin: str
    kind: str  # "file" or "workspace"
    model_new: str
    kernels: dict[str, str] = field(default_factory=dict)  # file name in kernels/ -> source

    @property
    def compiled_sources(self) -> list[str]:
        return sorted(n for n in self.kernels if n.endswith(COMPILED_SUFFIXES))

    @property
    def sha256(self) -> str:
        """Hash of the trusted sources: two candidates with the same sources are the same."""
        body = json.dumps({"model_new": self.model_new, "kernels": self.kernels}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()


def _read(path: Path, within: Path | None = None) -> str:
    """The text of `path`; with `within` (a workspace), only where the file opened lies in that
    folder. The evaluator reads a workspace outside any sandbox, so a `model_new.py` or `kernels/`
    linked to a file of the machine's (a key) would become the candidate's source, and an error
    quoting that source would show the file to the model writing the workspace. What is checked
    is the file opened, so a link swapped meanwhile changes nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise CandidateError(f"{path}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if within is not None:
            opened = sandbox.opened_path(fd, path)
            if not opened.startswith(os.path.realpath(within).rstrip("/") + "/"):
                raise CandidateError(f"{path}: a link to {opened}, outside the workspace {within}; the "
                                     "workspace's files must lie in it")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CandidateError(f"{path}: not a regular file")
        if st.st_size > MAX_SOURCE_BYTES:
            raise CandidateError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes; is this really source code?")
        data = f.read(MAX_SOURCE_BYTES + 1)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise CandidateError(f"{path}: not UTF-8 text") from None


def load_candidate(path: str | Path) -> Candidate:
    """Snapshot the candidate at `path` (a `.py` file or a workspace directory)."""
    p = Path(path)
    if not p.exists():
        raise CandidateError(f"{p}: no such file or directory; give a .py file defining ModelNew "
                             "or a workspace directory holding model_new.py")
    if p.is_file():
        if p.suffix != ".py":
            raise CandidateError(f"{p}: a single-file candidate must be a .py file defining ModelNew")
        return Candidate(origin=str(p), kind="file", model_new=_read(p))
    model_new = p / "model_new.py"
    if not model_new.is_file():
        raise CandidateError(f"{p}: a workspace directory must hold model_new.py (defining ModelNew); "
                             "create one with `cuda-agent init-workspace TASK DIR`")
    kernels: dict[str, str] = {}
    kdir = p / "kernels"
    if kdir.is_dir():
        for f in sorted(kdir.iterdir()):
            if f.is_file() and f.suffix in KERNEL_SUFFIXES and not f.is_symlink():
                kernels[f.name] = _read(f, within=p)
    return Candidate(origin=str(p), kind="workspace", model_new=_read(model_new, within=p), kernels=kernels)


def stage(candidate: Candidate, dest: Path) -> None:
    """Write the candidate's trusted sources into the fresh directory `dest`."""
    (dest / "model_new.py").write_text(candidate.model_new)
    if candidate.kernels:
        (dest / "kernels").mkdir()
        for name, src in candidate.kernels.items():
            (dest / "kernels" / name).write_text(src)
