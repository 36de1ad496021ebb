"""The sandbox of the agent's shell: what `Bash` runs, runs here.

On Linux with user namespaces (no privileges needed), each command runs in new user, network, mount
and PID namespaces (`unshare`):
- network: a namespace of its own holding only a loopback interface that is down: nothing reachable;
- files: every mount read-only except the workspace and a private `/tmp` (a folder of the sandbox's
  own, kept across its commands, removed with it); device nodes stay usable (`/dev/null`, the
  GPU's), so compilers and CUDA programs work;
- processes: a PID namespace (the command sees only its own), killed as a whole on timeout;
- limits: CPU seconds, file size and open files per process (`ulimit`), and memory and process
  count for the whole sandbox through a cgroup when the machine lets us create one;
- environment: scrubbed to what compilers and CUDA need (no API keys, no tokens).

`isolation` says what held, and goes into every trajectory. Where namespaces are not available the
sandbox refuses to start unless the caller passes `allow_unsandboxed=True`: then commands run as plain
child processes in the workspace, and `isolation["level"]` says "none".
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.errors import CudaAgentError

OUTPUT_LIMIT = 30000  # characters of a command's output returned to the model (head and tail kept)
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


class SandboxUnavailable(CudaAgentError):
    """The machine does not allow the sandbox, and running unsandboxed was not asked for."""


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 3600  # CPU seconds per process
    file_bytes: int = 8 << 30  # the largest file a process may write
    open_files: int = 4096
    memory_bytes: int = 32 << 30  # the whole sandbox (cgroup), when enforceable
    pids: int = 512  # processes of the whole sandbox (cgroup), when enforceable


# Runs inside the new namespaces before the command: mounts, then exec. Only the standard library.
_SETUP = r'''
import ctypes, os, sys
ws, tmp, cmd, keep = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
libc = ctypes.CDLL(None, use_errno=True)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, NOATIME, NODIRATIME, BIND, REC, PRIVATE, RELATIME = (
    1, 2, 4, 8, 32, 1024, 2048, 4096, 16384, 1 << 18, 1 << 21)
KEEP = {"nosuid": NOSUID, "nodev": NODEV, "noexec": NOEXEC, "noatime": NOATIME, "nodiratime": NODIRATIME,
        "relatime": RELATIME}
def mount(src, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    if libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")
mount(None, "/", None, REC | PRIVATE)
held = os.open(ws, os.O_PATH | os.O_DIRECTORY)     # the workspace and the sandbox's /tmp, reachable
held_tmp = os.open(tmp, os.O_PATH | os.O_DIRECTORY)  # after /tmp is covered
held_keep = {k: os.open(k, os.O_PATH | os.O_DIRECTORY) for k in keep}  # host folders under /tmp to keep
mount(f"/proc/self/fd/{held_tmp}", "/tmp", None, BIND)  # the sandbox's own /tmp, kept across commands
if os.path.isdir("/dev/shm"):
    mount("tmpfs", "/dev/shm", "tmpfs", NOSUID | NODEV, "mode=1777,size=1g")
os.makedirs(ws, exist_ok=True)                       # in the new /tmp when the workspace was under it
mount(f"/proc/self/fd/{held}", ws, None, BIND | REC)  # a mount of its own: stays writable
os.close(held)
for k, fd in held_keep.items():                      # the package and Python, when they live in /tmp
    os.makedirs(k, exist_ok=True)
    mount(f"/proc/self/fd/{fd}", k, None, BIND | REC)  # made read-only below with the rest
unescape = lambda s: s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
for line in open("/proc/self/mountinfo").read().splitlines():
    f = line.split()
    mp, opts = unescape(f[4]), f[5].split(",")
    if mp in ("/tmp", "/dev/shm") or mp == ws or mp.startswith(ws.rstrip("/") + "/"):
        continue
    flags = REMOUNT | BIND | RDONLY
    for o in opts:
        flags |= KEEP.get(o, 0)
    try:
        mount(None, mp, None, flags)
    except OSError:
        pass  # a mount we may not touch (already read-only, or not ours): left as it is
os.chdir(ws)
os.execvpe("bash", ["bash", "-c", cmd], os.environ)
'''


def _probe() -> str | None:
    """None when the namespaces work here; else why not."""
    if sys.platform != "linux":
        return f"no Linux namespaces on {sys.platform}"
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    try:
        r = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
                            "--kill-child", "--mount-proc", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    return None if r.returncode == 0 else f"user namespaces are not allowed here: {r.stderr.strip()[:300]}"


class _Cgroup:
    """A memory and pids cgroup for one sandbox (v2, else v1), when /sys/fs/cgroup lets us make one."""

    def __init__(self, limits: Limits):
        self.dirs: list[Path] = []
        self.enforced: list[str] = []
        name = f"cuda-agent-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        root = Path("/sys/fs/cgroup")
        if (root / "cgroup.controllers").exists():  # v2
            self._make(root / name, {"memory.max": limits.memory_bytes, "pids.max": limits.pids})
        else:
            self._make(root / "memory" / name, {"memory.limit_in_bytes": limits.memory_bytes})
            self._make(root / "pids" / name, {"pids.max": limits.pids})

    def _make(self, d: Path, values: dict[str, int]) -> None:
        try:
            d.mkdir()
        except OSError:
            return
        for k, v in values.items():
            try:
                (d / k).write_text(str(v))
                self.enforced.append(k.split(".")[0])
            except OSError:
                pass
        self.dirs.append(d)

    def join_command(self) -> str:
        """Shell that moves the current process into the cgroups (before it execs the sandbox)."""
        return "".join(f"echo $$ > {d / 'cgroup.procs'} 2>/dev/null; " for d in self.dirs)

    def close(self) -> None:
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass


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


def clip(text: str, limit: int = OUTPUT_LIMIT) -> tuple[str, bool]:
    """Head and tail of `text` within `limit` characters."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return text[:half] + f"\n... [{len(text) - 2 * half} characters dropped] ...\n" + text[-half:], True


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
        why = _probe()
        if why is not None and not allow_unsandboxed:
            raise SandboxUnavailable(f"cannot sandbox the agent's shell: {why}. Enable unprivileged user "
                                     "namespaces, or pass allow_unsandboxed=True (`--unsandboxed`) to run "
                                     "commands without isolation")
        self.namespaces = why is None
        self.cgroup = _Cgroup(limits) if self.namespaces else None
        self.env = {k: v for k, v in os.environ.items() if k in ENV_KEEP}
        self.env.update(HOME=str(self.root), TMPDIR="/tmp" if self.namespaces else str(self.root / ".tmp"),
                        TERM="dumb", PYTHONUNBUFFERED="1", PYTHONPATH=_package_folder(), **(env or {}))
        self.shells: dict[str, _Shell] = {}
        self.tmp = Path(tempfile.mkdtemp(prefix="cuda-agent-sandbox-tmp-"))  # /tmp inside, for the episode
        self._next = 1
        self.isolation: dict[str, Any] = {
            "level": "namespaces" if self.namespaces else "none",
            "network": "none (own network namespace)" if self.namespaces else "host",
            "filesystem": ("read-only except the workspace and a private /tmp" if self.namespaces
                           else "unrestricted"),
            "processes": "own PID namespace" if self.namespaces else "shared",
            "limits": {**asdict(limits), "enforced": ["cpu_s", "file_bytes", "open_files"]
                       + ([{"memory": "memory_bytes", "pids": "pids"}[e] for e in self.cgroup.enforced]
                          if self.cgroup else [])},
            "unavailable": why,
        }

    def visible(self, host_path: str | Path) -> str:
        """Where a file of the sandbox's /tmp folder (`self.tmp`) is seen from inside."""
        rel = Path(host_path).relative_to(self.tmp)
        return str(Path("/tmp") / rel) if self.namespaces else str(self.tmp / rel)

    # -- running --
    def _argv(self, command: str) -> list[str]:
        lim = self.limits
        ulimits = f"ulimit -t {lim.cpu_s} -f {lim.file_bytes // 512} -n {lim.open_files}"
        if not self.namespaces:
            return ["bash", "-c", f"{ulimits}; cd {_q(self.root)} && {command}"]
        join = self.cgroup.join_command() if self.cgroup else ""
        keep = " ".join(_q(k) for k in _kept_under_tmp())
        inner = (f"{join}{ulimits}; exec unshare --user --map-root-user --net --mount --pid --fork --kill-child "
                 f"--mount-proc {_q(sys.executable)} -I -c {_q(_SETUP)} {_q(self.root)} {_q(self.tmp)} "
                 f"{_q(command)} {keep}")
        return ["bash", "-c", inner]

    def _start(self, command: str) -> subprocess.Popen:
        if not self.namespaces:
            (self.root / ".tmp").mkdir(exist_ok=True)
        return subprocess.Popen(self._argv(command), cwd=self.root, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

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
        text, truncated = clip(out.all())
        return CommandResult(text, None if timed_out else proc.returncode, timed_out, truncated or out.dropped > 0,
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
        return status, clip(sh.out.new())[0]

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


def _kept_under_tmp() -> list[str]:
    """Host folders under /tmp that commands need (the package, the Python installation): the
    sandbox's own /tmp would hide them, so they are bound back, read-only."""
    tmp = Path(tempfile.gettempdir()).resolve()
    out = []
    for p in (Path(_package_folder()), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()):
        if (tmp in p.parents or Path("/tmp") in p.parents) and str(p) not in out:
            out.append(str(p))
    return out


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
