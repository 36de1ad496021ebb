"""What a sandbox (`cuda_agent.sandbox`) may use, and its processes seen from outside.

`Limits` says what one sandbox may use; `Cgroup` enforces memory and process count where the
machine lets us make a cgroup; `Quota` watches the disk its writable folders take. `tree`,
`stop`, `cont` and `kill` act on a sandbox's processes from the harness: its PID namespace
reparents every orphan to the namespace's first process, so the tree under the sandbox's roots
holds all of them, a detached one included.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use. Memory and processes count the whole sandbox (a cgroup, where the
    machine lets us make one); file size and open files count each process (rlimits)."""

    memory_bytes: int | None = 64 << 30
    pids: int | None = 1024
    file_bytes: int = 16 << 30
    open_files: int = 4096
    cpu_s: int | None = None  # CPU seconds per process (rlimit); None: no limit
    disk_bytes: int | None = None  # what its writable folders may hold in all (`Quota`); None: no limit


class Quota:
    """A watchdog on the disk a sandbox's writable folders take (the blocks allocated, so sparse
    files count what they hold) and on how many files and folders they hold: past either, it calls
    `on_exceed("disk")` once. It polls every `interval_s` from a thread of its own; a sandbox
    writing at disk speed gets that far past the limit before it is stopped."""

    def __init__(self, folders: list[str], limit_bytes: int, on_exceed, max_entries: int = 100_000,
                 interval_s: float = 0.25):
        self.folders, self.limit, self.max_entries = folders, limit_bytes, max_entries
        self.on_exceed, self.interval_s = on_exceed, interval_s
        self.hit = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="cuda-agent-quota", daemon=True)
        self._thread.start()

    def usage(self) -> tuple[int, int]:
        """(bytes allocated, files and folders) under the folders, counting stopped past max_entries."""
        used = entries = 0
        todo = list(self.folders)
        while todo and entries <= self.max_entries:
            try:
                with os.scandir(todo.pop()) as it:
                    for e in it:
                        entries += 1
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        used += st.st_blocks * 512
                        if e.is_dir(follow_symlinks=False):
                            todo.append(e.path)
            except OSError:
                continue
        return used, entries

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            used, entries = self.usage()
            if used > self.limit or entries > self.max_entries:
                self.hit = True
                self.on_exceed("disk")
                return

    def close(self) -> None:
        self._stop.set()


class Cgroup:
    """A memory and pids cgroup for one sandbox (v2, else v1), where /sys/fs/cgroup lets us make one."""

    ROOT = Path("/sys/fs/cgroup")

    @classmethod
    def kind(cls) -> str | None:
        if (cls.ROOT / "cgroup.controllers").exists():
            return "v2" if os.access(cls.ROOT, os.W_OK) else None
        return "v1" if os.access(cls.ROOT / "pids", os.W_OK) else None

    def __init__(self, limits: Limits):
        self.dirs: list[Path] = []
        self.enforced: list[str] = []
        name = f"cuda-agent-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if (self.ROOT / "cgroup.controllers").exists():
            self._make(self.ROOT / name, {"memory.max": limits.memory_bytes, "pids.max": limits.pids})
        else:
            self._make(self.ROOT / "memory" / name, {"memory.limit_in_bytes": limits.memory_bytes})
            self._make(self.ROOT / "pids" / name, {"pids.max": limits.pids})

    def _make(self, d: Path, values: dict[str, int | None]) -> None:
        try:
            d.mkdir()
        except OSError:
            return
        for k, v in values.items():
            if v is None:
                continue
            try:
                (d / k).write_text(str(v))
                self.enforced.append(k.split(".")[0])
            except OSError:
                pass
        self.dirs.append(d)

    def add(self, pid: int) -> None:
        for d in self.dirs:
            try:
                (d / "cgroup.procs").write_text(str(pid))
            except OSError:
                pass

    def hit(self) -> list[str]:
        """The limits the sandbox ran into (`memory`, `pids`)."""
        out = []
        for d in self.dirs:
            for name, key in (("memory.events", "oom_kill"), ("pids.events", "max"),
                              ("memory.failcnt", None)):
                try:
                    text = (d / name).read_text()
                except OSError:
                    continue
                if key is None:
                    count = int(text.strip() or 0)
                else:
                    count = next((int(line.split()[1]) for line in text.splitlines() if line.split()[0] == key), 0)
                if count:
                    out.append(name.split(".")[0])
        return sorted(set(out))

    def close(self) -> None:
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    try:
                        (d / "cgroup.kill").write_text("1")
                    except OSError:
                        pass
                    time.sleep(0.02)


def tree(roots: list[int]) -> set[int]:
    """The processes of the trees rooted at `roots` (pids as the host sees them), zombies left out.
    A sandbox is such a tree: its PID namespace reparents every orphan to the namespace's first
    process, so a process that detaches (double fork, new session) stays in it."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
            if state(pid) in ("Z", "X", None):
                continue
        except OSError:
            continue
        seen.add(pid)
        for tid in tids:
            try:
                todo += [int(k) for k in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except OSError:
                pass
    return seen


def state(pid: int) -> str | None:
    """The process's state letter (R, S, T, Z, ...), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def describe(pid: int) -> str:
    """`pid (command line)`, for a verdict's message."""
    try:
        cmd = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
    except OSError:
        cmd = ""
    return f"{pid} ({cmd[:80]})" if cmd else str(pid)


def stop(roots: list[int], settle_s: float = 1.0) -> set[int]:
    """SIGSTOP every process of the trees at `roots`, again until no running one is left (a
    process may fork between a listing and its stop; a stopped one cannot), and wait up to
    `settle_s` for each to be stopped. Returns the pids stopped, for `cont`."""
    stopped: set[int] = set()
    for _ in range(64):
        fresh = tree(roots) - stopped
        if not fresh:
            break
        for pid in fresh:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
            except OSError:
                pass
    end = time.monotonic() + settle_s
    for pid in stopped:
        while state(pid) not in ("T", "t", "Z", "X", None) and time.monotonic() < end:
            time.sleep(0.0002)
    return stopped


def kill(roots: list[int]) -> None:
    """SIGKILL every process of the trees at `roots` (stopped first, so none forks meanwhile)."""
    for pid in stop(roots, settle_s=0):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def cont(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
