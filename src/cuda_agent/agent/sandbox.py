"""The sandbox of the agent's shell: what `Bash` runs, runs here.

Each command runs in a sandbox of `cuda_agent.sandbox` (bubblewrap; the evaluator's candidates run in
the same kind): new user, PID, network, IPC and UTS namespaces; every mount read-only except the
workspace and a private `/tmp` (a folder of the sandbox's own, kept across its commands, removed
with it); the home folders, the evaluator's cache and the service's socket folder hidden; the GPU's
device nodes usable, so compilers and CUDA programs work; limits on CPU seconds, file size and open
files per process, and on memory and processes for the whole sandbox through a cgroup where the
machine lets us make one; the environment scrubbed to what compilers and CUDA need (no API keys,
no tokens). Where the caller is root, commands run as the sandbox's unprivileged user, and the
workspace is handed to that user before each command.

`isolation` says what held, and goes into every trajectory. Where no sandbox can be made the
sandbox refuses to start unless the caller passes `allow_unsandboxed=True`: then commands run as
plain child processes in the workspace, and `isolation["level"]` says "none".
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent import sandbox
from cuda_agent.errors import CudaAgentError
from cuda_agent.text import clip

OUTPUT_LIMIT = 30000  # characters of a command's output returned to the model (head and tail kept)
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


class SandboxUnavailable(CudaAgentError):
    """The machine does not allow the sandbox, and running unsandboxed was not asked for."""


@dataclass(frozen=True)
class Limits(sandbox.Limits):
    """The agent's shell: a sandbox's limits, with an hour of CPU per process."""

    memory_bytes: int | None = 32 << 30
    pids: int | None = 512
    file_bytes: int = 8 << 30
    cpu_s: int | None = 3600


def hidden_folders() -> list[str]:
    """What the agent's commands must not see besides the home folders: the evaluator's cache (its
    baselines' secret) and the evaluation service's socket folder."""
    from cuda_agent.evaluate.config import default_cache_dir
    from cuda_agent.evaluate.service import socket_path

    out = [str(default_cache_dir()), str(Path(socket_path()).parent)]
    return [p for p in out if os.path.isdir(p)]


@dataclass
class CommandResult:
    output: str
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0


class _Output:
    """A process's output as it arrives, capped (the oldest beyond `cap` is dropped), read either all
    at once or incrementally (BashOutput: what is new since the last read)."""

    def __init__(self, stream, cap: int = 4 << 20):
        self.buf = bytearray()
        self.dropped = 0
        self.cursor = 0
        self.cap = cap
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        while chunk := stream.read1(65536):
            with self.lock:
                self.buf += chunk
                if len(self.buf) > self.cap:
                    cut = len(self.buf) - self.cap
                    del self.buf[:cut]
                    self.dropped += cut
                    self.cursor = max(self.cursor - cut, 0)

    def new(self) -> str:
        with self.lock:
            out = bytes(self.buf[self.cursor:])
            self.cursor = len(self.buf)
        return out.decode(errors="replace")

    def all(self) -> str:
        with self.lock:
            return bytes(self.buf).decode(errors="replace")


@dataclass
class _Shell:
    proc: subprocess.Popen
    out: _Output
    command: str
    started: float = field(default_factory=time.monotonic)


class Sandbox:
    def __init__(self, workspace: str | Path, limits: Limits = Limits(), allow_unsandboxed: bool = False,
                 env: dict[str, str] | None = None):
        """`env`: variables to add to the scrubbed environment (e.g. the evaluator socket)."""
        self.root = Path(workspace).resolve()
        if not self.root.is_dir():
            raise CudaAgentError(f"{self.root}: the workspace is not a folder")
        self.limits = limits
        self.sup = sandbox.support()
        if not self.sup.ok and not allow_unsandboxed:
            raise SandboxUnavailable(f"cannot sandbox the agent's shell: {self.sup.error}. Or pass "
                                     "allow_unsandboxed=True (`--unsandboxed`) to run commands without isolation")
        self.namespaces = self.sup.ok
        self.tmp = Path(tempfile.mkdtemp(prefix="cuda-agent-sandbox-tmp-"))  # /tmp inside, for the episode
        if self.namespaces:
            self.sup = sandbox.reaching(self.sup, [self.root, self.tmp], "the agent's shell")
        self.cgroup = sandbox.Cgroup(limits) if self.namespaces and self.sup.cgroup else None
        self.env = {k: v for k, v in os.environ.items() if k in ENV_KEEP}
        self.env.update(HOME=str(self.root), TMPDIR="/tmp" if self.namespaces else str(self.root / ".tmp"),
                        TERM="dumb", PYTHONUNBUFFERED="1", PYTHONPATH=_package_folder(), **(env or {}))
        self.shells: dict[str, _Shell] = {}
        self._next = 1
        self.spec = sandbox.Spec(writable=[str(self.root)], mapped=[(str(self.tmp), "/tmp")],
                                 hidden=hidden_folders(), gpu=True, cwd=str(self.root), limits=limits)
        self.isolation: dict[str, Any] = (sandbox.record(self.sup, self.spec, self.cgroup) if self.namespaces
                                          else sandbox.record(None, why=self.sup.error))

    def visible(self, host_path: str | Path) -> str:
        """Where a file of the sandbox's /tmp folder (`self.tmp`) is seen from inside."""
        rel = Path(host_path).relative_to(self.tmp)
        return str(Path("/tmp") / rel) if self.namespaces else str(self.tmp / rel)

    # -- running --
    def _start(self, command: str) -> subprocess.Popen:
        popen: dict[str, Any] = dict(env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if not self.namespaces:
            (self.root / ".tmp").mkdir(exist_ok=True)
            lim = self.limits
            ulimits = f"ulimit -t {lim.cpu_s} -f {lim.file_bytes // 512} -n {lim.open_files}"
            return subprocess.Popen(["bash", "-c", f"{ulimits}; cd {_q(self.root)} && {command}"], cwd=self.root,
                                    **popen)
        for folder in (self.root, self.tmp):  # the model's file tools write as the caller between commands
            sandbox.hand_over(folder, self.sup)
        return sandbox.start(self.spec, ["bash", "-c", command], self.sup, self.cgroup, cwd=self.root, **popen)

    def run(self, command: str, timeout_s: float = 120.0) -> CommandResult:
        """Run `command` (bash) to completion or until `timeout_s`; then its whole process tree goes."""
        t0 = time.monotonic()
        proc = self._start(command)
        out = _Output(proc.stdout)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
        out.thread.join(timeout=5)
        text = out.all()
        return CommandResult(clip(text, OUTPUT_LIMIT), None if timed_out else proc.returncode, timed_out,
                             len(text) > OUTPUT_LIMIT or out.dropped > 0,
                             time.monotonic() - t0)

    def start(self, command: str) -> str:
        """Run `command` in the background; returns its shell id (for `output` and `kill`)."""
        proc = self._start(command)
        sid = f"bash_{self._next}"
        self._next += 1
        self.shells[sid] = _Shell(proc, _Output(proc.stdout), command)
        return sid

    def output(self, sid: str) -> tuple[str, str]:
        """(status, output new since the last call) of a background shell: status is `running`,
        `exited N` or `killed`."""
        sh = self._shell(sid)
        code = sh.proc.poll()
        if code is not None:
            sh.out.thread.join(timeout=2)
        status = "running" if code is None else ("killed" if code < 0 else f"exited {code}")
        return status, clip(sh.out.new(), OUTPUT_LIMIT)

    def kill(self, sid: str) -> None:
        _kill(self._shell(sid).proc)

    def _shell(self, sid: str) -> _Shell:
        if sid not in self.shells:
            known = ", ".join(self.shells) or "none"
            raise KeyError(f"no background shell {sid!r} (shells: {known})")
        return self.shells[sid]

    def close(self) -> None:
        """Kill every background shell and remove the cgroups."""
        for sh in self.shells.values():
            _kill(sh.proc)
        if self.cgroup:
            self.cgroup.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _package_folder() -> str:
    """The folder holding the cuda_agent package: the workspace's commands import it."""
    return str(Path(__file__).resolve().parents[2])


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # with --kill-child, the namespace's processes go too
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _q(s: object) -> str:
    return "'" + str(s).replace("'", "'\"'\"'") + "'"
