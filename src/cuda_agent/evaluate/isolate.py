"""The candidate's process in an operating-system sandbox (`cuda_agent.sandbox`), and its builds.

A `CandidateBox` is one candidate process's sandbox: a folder of its own (`work`: the staged
sources, its temporary files, its build folders), a shared-memory folder for the buffers the judge
maps (`shm`), a cgroup where the machine allows, and the view of the machine it gets: everything
read-only, the evaluator's cache hidden but for the built libraries and precompiled headers it may
load (read-only), the home folders and the service's socket hidden, no network, a PID namespace
of its own. Spares of a warm pool get theirs when they start (a `sandbox.Holder` that the zygote's
fork enters); a cold candidate starts in its own with bwrap.

Builds never run in the candidate's process: what it compiled there, it could have rewritten, so
it could not be shared with later candidates. Its `load_inline`/`load` calls ask the harness
instead (`worker.serve.request`, answered by `Builds.handle` during the `load` command):

- `ninja`: the harness copies the build folder's sources and ninja file, keys them (with the
  folder's path inside the sandbox, the same for every candidate, and the toolchain), and either
  finds that key built in `cache/builds/inline/` or runs ninja on the copy in a sandbox of its own
  whose only writable folder is the copy, then publishes it; it then puts the outputs into the
  candidate's folder, and torch imports them from there.
- `pch`: a precompiled torch/extension.h for the host unit's flags, built by the harness with its
  own compiler in a sandbox whose only writable folder is the header's, and published under the
  digest the harness computes (`inline_build.flags_digest`).

A key covers everything a build reads that could differ between two candidates: the candidate's own
folder is in a build's view only where its sources or ninja file name it, and that path is unique
to one sandbox, so such a key is never found by another candidate.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent import sandbox
from cuda_agent.evaluate.build import tool_version, torch_version
from cuda_agent.evaluate.cache_layout import BUILDS_INLINE, PCH, PCH_NVCC, VIEWS
from cuda_agent.evaluate.worker import inline_build, nvcc_pch
from cuda_agent.text import clip

if TYPE_CHECKING:
    from cuda_agent.evaluate.config import EvalConfig

BUILDS_INSIDE = "/tmp/cuda-agent-builds"  # where a candidate's build folders are, inside its sandbox
DISK_BYTES = 2 << 30  # what a candidate's folders may hold on disk, and its largest file
MAX_INPUT_BYTES = 64 << 20  # the sources and ninja file of one build
OUTPUT_SUFFIXES = (".o", ".so", ".ninja_log", ".ninja_deps", ".lock", ".gch")
NOT_INPUTS = {"lock", ".cuda-agent.lock", ".ninja_log", ".ninja_deps", ".cuda-agent-pch"}
LOG_LIMIT = 20000
PCH_REQUESTS = ".cuda-agent-pch"  # in a build's folder: its requests for nvcc's headers (nvcc_pch.ask)


VIEWS_PARENT = "/var/tmp"  # where they move when the sandbox's user cannot enter the cache (hidden inside)


def cache_views(cache_dir: Path, uid: int | None = None) -> list[str]:
    """The cache folders a candidate reads (read-only): workspace builds, precompiled headers.

    Where bwrap runs as the sandbox's own user (`uid`, sandbox.Support.bwrap_uid: a root caller
    without setpriv) and that user cannot enter the cache folder (root's default cache under its
    0700 home; pytest's 0700 temporary root), bwrap could not bind them: each then lives under
    VIEWS_PARENT in a folder of this cache's own
    (`cuda-agent-views-<caller's uid>/<digest of the cache's path>`), and the cache keeps a link to
    it, so the harness writes where sandboxes read. Sandboxes still see them at the cache's path,
    and never VIEWS_PARENT (hidden, as /tmp is)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    if uid is not None and sandbox.unreachable(cache_dir, uid) is not None:
        _move_views(str(cache_dir.resolve()), uid)
    out = []
    for name in VIEWS:
        d = cache_dir / name
        d.mkdir(parents=True, exist_ok=True)
        out.append(str(d))
    return out


@functools.cache
def _move_views(cache_dir: str, uid: int) -> None:
    """Make each of the cache's VIEWS a link to a folder `uid` can reach (cache_views), once per
    process; a folder already there is moved aside and dropped (its builds are made again)."""
    digest = hashlib.sha256(cache_dir.encode()).hexdigest()[:16]
    parent = Path(VIEWS_PARENT) / f"cuda-agent-views-{os.geteuid()}"
    home = parent / digest
    home.mkdir(parents=True, exist_ok=True)
    for d in (parent, home):
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return  # made by someone else in a folder all may write: not ours to build in
        os.chmod(d, 0o755)
    if sandbox.unreachable(home, uid) is not None:
        return  # nowhere better: starting a sandbox says what it cannot reach
    for name in VIEWS:
        link, target = Path(cache_dir) / name, home / name
        target.mkdir(exist_ok=True)
        if link.is_symlink() and os.path.realpath(link) == str(target.resolve()):
            continue
        if link.exists() or link.is_symlink():
            aside = link.with_name(f".{name}.moved-{os.getpid()}")
            try:
                os.rename(link, aside)
            except OSError:
                continue  # (another process moved it meanwhile)
            shutil.rmtree(aside, ignore_errors=True) if aside.is_dir() and not aside.is_symlink() else aside.unlink()
        try:
            os.symlink(target, link)
        except FileExistsError:
            pass  # another process linked it


def hidden_folders(cache_dir: Path) -> list[str]:
    """The evaluator's own folders a sandbox must not see: its cache and the service's sockets."""
    from cuda_agent.evaluate.service import socket_path

    return [str(cache_dir), str(Path(socket_path()).parent)]


def build_spec(folder: Path, cache_dir: Path, inside: str | None = None, readable: tuple[str, ...] = (),
               uid: int | None = None) -> sandbox.Spec:
    """A build's sandbox: only its own `folder` writable (seen at `inside` where given), the cache's
    built libraries and headers and `readable` read-only, no GPU. `uid`: the user bwrap binds
    them as (`Support.bwrap_uid`; None: one who reaches them)."""
    cwd = inside or str(folder)
    return sandbox.Spec(mapped=[(str(folder), cwd)], readable=[*cache_views(Path(cache_dir), uid), *readable],
                        hidden=hidden_folders(Path(cache_dir)), cwd=cwd,
                        limits=sandbox.Limits(memory_bytes=memory_limit(), pids=4096))


def memory_limit() -> int:
    """A candidate's host memory: three quarters of the machine's, at most 64 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 64 << 30
    return min(64 << 30, total * 3 // 4)


def candidate_env(tmp: Path) -> dict[str, str]:
    """What a candidate's process gets beside the evaluation's environment. torch.compile's Inductor
    would start a pool of compile processes and threads that outlive the call, which the guard
    rightly reads as hidden work (guard.py); it compiles in the calling thread instead (tqdm's
    monitor thread: worker/runner.py, quiet_libraries). Inductor's and Triton's caches are the
    candidate's own (under `tmp`), never shared with other candidates nor read from the user's home.
    So is the header Inductor precompiles for its C++ kernels (under the temporary folder, `tmp`),
    which would be built for this one process: that costs more than the kernels of one model save
    with it (docs/measured/2026-12-07-ci-durations.md, "Fourth session"), so it is not made. The
    kernels compiled are the same."""
    return {"TORCHINDUCTOR_COMPILE_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp / "torchinductor"),
            "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0", "TRITON_CACHE_DIR": str(tmp / "triton")}


class CandidateBox:
    """The sandbox of one candidate process (module docstring)."""

    def __init__(self, sup: sandbox.Support, cache_dir: Path, work_dir: Path | None, gpu: bool):
        pid = os.getpid()
        self.sup, self.cache_dir = sup, Path(cache_dir)
        self.work = Path(tempfile.mkdtemp(prefix=f"cuda-agent-eval-{pid}-", dir=work_dir))
        shm_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.shm = Path(tempfile.mkdtemp(prefix=f"cuda-agent-shm-{pid}-", dir=work_dir or shm_root))
        self.sup = sup = sandbox.reaching(sup, [self.work, self.shm], "the candidate")
        self.stage, self.tmp, self.builds = self.work / "stage", self.work / "tmp", self.work / "builds"
        for d in (self.stage, self.tmp, self.builds):
            d.mkdir()
        if sup.uid is not None:
            for d in (self.work, self.stage, self.tmp, self.builds, self.shm):
                os.chown(d, sup.uid, sup.uid)
        limits = sandbox.Limits(memory_bytes=memory_limit(), file_bytes=DISK_BYTES, disk_bytes=DISK_BYTES)
        self.cgroup = sandbox.Cgroup(limits) if sup.cgroup else None
        self.quota: sandbox.Quota | None = None
        self.spec = sandbox.Spec(writable=[str(self.work), str(self.shm)], mapped=[(str(self.builds), BUILDS_INSIDE)],
                                 readable=cache_views(self.cache_dir, sup.bwrap_uid), hidden=hidden_folders(self.cache_dir),
                                 gpu=gpu, limits=limits)
        self.holder: sandbox.Holder | None = None
        self.builds_service: Builds | None = None
        self.roots: list[int] = []  # the sandbox's process trees: the holder's, the worker's (`attach`)
        self.known: set[int] = set()  # its processes before candidate code ran (`settle`)

    def env(self) -> dict[str, str]:
        """The candidate's environment beside the evaluation's."""
        return {"TMPDIR": str(self.tmp), "TORCH_EXTENSIONS_DIR": f"{BUILDS_INSIDE}/torch_extensions",
                "HOME": str(self.tmp), **candidate_env(self.tmp)}

    def hold(self) -> sandbox.Holder:
        """An empty sandbox for a zygote's fork to enter."""
        self.holder = sandbox.Holder(self.spec, self.sup, self.cgroup)
        self.roots.append(self.holder.proc.pid)
        return self.holder

    def attach(self, pid: int) -> None:
        """The worker's process (bwrap's, for a cold start; the zygote's fork that entered the held
        sandbox) is a root of the sandbox's processes."""
        self.roots.append(pid)

    def settle(self) -> None:
        """Remember the sandbox's processes now, before the candidate's code runs: the worker, its
        launcher and the holder. Any other process alive later was started by the candidate. And
        from now on, watch the disk its folders take: past the limit, everything in it is killed."""
        self.known = sandbox.tree(self.roots)
        if self.quota is None and self.spec.limits.disk_bytes:
            # (buffers in /dev/shm are memory, which the cgroup counts: a CPU task's inputs may be large)
            on_disk = [str(self.work)] + ([] if str(self.shm).startswith("/dev/shm/") else [str(self.shm)])
            self.quota = sandbox.Quota(on_disk, self.spec.limits.disk_bytes, lambda what: sandbox.kill(self.roots))

    def limits_hit(self) -> list[str]:
        """The limits the sandbox ran into so far: `memory`, `pids` (its cgroup's counts), `disk`."""
        hit = self.cgroup.hit() if self.cgroup else []
        return sorted(hit + (["disk"] if self.quota is not None and self.quota.hit else []))

    def limit_message(self, hit: list[str]) -> str:
        lim, quota = self.spec.limits, self.quota
        what = {"memory": f"memory ({_size(lim.memory_bytes or 0)} of host memory)",
                "pids": f"processes ({lim.pids} at once)",
                "disk": f"disk ({_size(lim.disk_bytes or 0)}, or {quota.max_entries if quota else 0} "
                        "files and folders, in its folders)"}
        return ("the candidate hit its sandbox's limit on " + " and ".join(what.get(h, h) for h in hit)
                + ": its processes were stopped; use less")

    def strays(self) -> list[str]:
        """The processes alive in the sandbox that the candidate started and left running (a
        detached or double-forked one included: the PID namespace keeps it in the tree)."""
        return [sandbox.describe(pid) for pid in sorted(sandbox.tree(self.roots) - self.known)]

    @contextlib.contextmanager
    def frozen(self):
        """Every process of the sandbox stopped for the duration, not only the worker's process
        group: a process that left the group (a new session) must not run while the baselines
        are timed or the judge reads the candidate's buffers."""
        stopped = sandbox.stop(self.roots)
        try:
            yield
        finally:
            sandbox.cont(stopped)

    def enter_args(self) -> dict[str, Any]:
        """What the zygote's child needs to enter the held sandbox (zygote.py)."""
        return {"pid": self.holder.pid, "uid": self.sup.uid,
                "cgroups": [str(d) for d in self.cgroup.dirs] if self.cgroup else []}

    def start(self, argv: list[str], **popen: Any) -> subprocess.Popen:
        """A cold process in the sandbox."""
        return sandbox.start(self.spec, argv, self.sup, self.cgroup, **popen)

    def isolation(self) -> dict[str, Any]:
        rec = sandbox.record(self.sup, self.spec, self.cgroup)
        rec["builds"] = "in sandboxes of their own, by the harness"
        if self.cgroup:
            rec["limits_hit"] = self.cgroup.hit()
        return rec

    def builds_for(self, timeout_s: float) -> "Builds":
        self.builds_service = Builds(self, timeout_s)
        return self.builds_service

    def close(self) -> None:
        """End the sandbox (what still runs in it dies) and remove its folders."""
        try:
            if self.quota is not None:
                self.quota.close()
            if self.builds_service is not None:
                self.builds_service.close()
            if self.holder is not None:
                self.holder.close()
            if self.cgroup is not None:
                self.cgroup.close()
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
            shutil.rmtree(self.shm, ignore_errors=True)


@contextlib.contextmanager
def _dir_fd(root: Path, rel: Path):
    """A descriptor of `root/rel`, every component opened without following a symbolic link (the
    candidate owns the tree; the harness must not be led out of it)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in rel.parts:
            if part in ("", ".", ".."):
                raise OSError(f"bad path component {part!r}")
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


@functools.cache
def toolchain() -> list[str]:
    """What a build's output depends on beside its inputs (build.py's notion of it, for a ninja
    file that may name either compiler), and this package's version."""
    try:
        ours = metadata.version("cuda-agent")
    except metadata.PackageNotFoundError:
        ours = ""
    return [sys.version, torch_version(), tool_version(os.environ.get("CXX", "c++"), "--version"),
            tool_version("nvcc", "--version"), os.environ.get("TORCH_CUDA_ARCH_LIST") or "", ours]


class BuildRefused(Exception):
    """A request the harness will not carry out (malformed, outside the candidate's folder)."""


class Builds:
    """The harness's side of a sandboxed candidate's builds (module docstring): `handle` answers
    one request of the candidate's process."""

    def __init__(self, box: CandidateBox, timeout_s: float):
        self.box, self.timeout_s = box, timeout_s
        self.root = box.cache_dir / BUILDS_INLINE
        self.root.mkdir(parents=True, exist_ok=True)
        self.pch_root = box.cache_dir / PCH
        self.pending: list[threading.Thread] = []
        self.seconds, self.count = 0.0, 0

    def handle(self, kind: str, args: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        try:
            if kind == "ninja":
                return self._ninja(args.get("dir"))
            if kind == "pch":
                return self._pch(args.get("cflags"), args.get("post_cflags"))
            raise BuildRefused(f"unknown request {kind!r}")
        except BuildRefused as exc:
            return {"ok": False, "log": f"cuda-agent refused the build: {exc}"}
        finally:
            self.seconds += time.monotonic() - t0
            self.count += 1

    # -- ninja --
    def _ninja(self, inside: Any) -> dict[str, Any]:
        if not isinstance(inside, str) or not inside.startswith(BUILDS_INSIDE + "/"):
            raise BuildRefused(f"a build folder must be under {BUILDS_INSIDE}, not {inside!r}")
        rel = Path(inside).relative_to(BUILDS_INSIDE)
        try:
            inputs = self._read_inputs(rel)
        except OSError as exc:
            raise BuildRefused(f"{inside}: {exc}") from None
        key, plain = (hashlib.sha256(json.dumps([inside, sorted((n, hashlib.sha256(b).hexdigest()) for n, b in i.items()),
                      toolchain()]).encode()).hexdigest()[:32] for i in (inputs, inline_build.without_header(inputs)))
        key = plain if not (self.root / key).is_dir() and (self.root / plain).is_dir() else key  # (without_header)
        final, failed = self.root / key, self.root / f"{key}.failed"
        timed_out = None
        if not final.is_dir() and not failed.is_file():
            timed_out = self._build(inside, inputs, final, failed)
        self._finish_pch()
        if timed_out is not None:
            return {"ok": False, "log": timed_out}
        if failed.is_file() and not final.is_dir():
            return {"ok": False, "log": failed.read_text(errors="replace")}
        self._deliver(final, rel)
        log = (final / ".cuda-agent-log").read_text(errors="replace") if (final / ".cuda-agent-log").is_file() else ""
        return {"ok": True, "log": log}

    def _read_inputs(self, rel: Path) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        total = 0
        with _dir_fd(self.box.builds, rel) as dfd:
            for name in os.listdir(dfd):
                if name in NOT_INPUTS or name.endswith(OUTPUT_SUFFIXES):
                    continue
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
                except OSError:
                    continue  # a link or something not to read
                with os.fdopen(fd, "rb") as f:
                    if not _regular(fd):
                        continue
                    data = f.read(MAX_INPUT_BYTES + 1 - total)
                total += len(data)
                if total > MAX_INPUT_BYTES:
                    raise OSError(f"the build's inputs exceed {MAX_INPUT_BYTES >> 20} MiB")
                out[name] = data
        if "build.ninja" not in out:
            raise OSError("no build.ninja")
        return out

    def _build(self, inside: str, inputs: dict[str, bytes], final: Path, failed: Path) -> str | None:
        """Build into `final`, or record the compiler's failure in `failed` (the same sources fail
        the same way); a build cut by the time limit is not recorded: its message is returned."""
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
        try:
            for name, data in inputs.items():
                (staging / name).write_bytes(data)
            sandbox.hand_over(staging, self.box.sup)
            # The candidate's folder is readable where the inputs name it (`load` compiles its staged
            # files): its path is this sandbox's alone, so such a key is never another's. Unnamed
            # (a glob in the ninja file), it would make another candidate's files the output of
            # inputs that candidate may send too: it is not in view.
            named = any(self.box.work.name.encode() in data for data in inputs.values())
            spec = build_spec(staging, self.box.cache_dir, inside, readable=(str(self.box.stage),) if named else (),
                              uid=self.box.sup.bwrap_uid)
            argv = ["ninja", "-v"] + (["-j", os.environ["MAX_JOBS"]] if os.environ.get("MAX_JOBS", "").isdigit() else [])
            code, log = run(spec, argv, self.box.sup, self.timeout_s,
                            env={nvcc_pch.REQUESTS: f"{inside}/{PCH_REQUESTS}"})
            sandbox.drop_links(staging)  # (read, written and published below, outside the sandbox)
            if code is None:
                return f"the build did not finish within {self.timeout_s:.0f} s\n{log}"
            self._nvcc_headers(staging / PCH_REQUESTS)
            if code == 0:
                (staging / ".cuda-agent-log").write_text(log)
                with contextlib.suppress(OSError):
                    staging.rename(final)  # whole or not at all; a concurrent build of the key won
            else:
                failed.write_text(log)
            return None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _deliver(self, final: Path, rel: Path) -> None:
        """Copy the build's outputs into the candidate's folder (new files, renamed into place: a
        link the candidate left there is replaced, never followed)."""
        uid = self.box.sup.uid
        with _dir_fd(self.box.builds, rel) as dfd:
            for src in final.iterdir():
                if not src.name.endswith(OUTPUT_SUFFIXES) and src.name not in (".ninja_log", ".ninja_deps"):
                    continue
                tmp = f".cuda-agent-{os.getpid()}-{src.name}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755, dir_fd=dfd)
                with os.fdopen(fd, "wb") as out, open(os.open(src, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                    shutil.copyfileobj(f, out)
                    if uid is not None:
                        os.fchown(out.fileno(), uid, uid)
                os.replace(tmp, src.name, src_dir_fd=dfd, dst_dir_fd=dfd)

    def _nvcc_headers(self, requests: Path) -> None:
        """Build the headers for nvcc's final host compiles that the build asked for (nvcc_pch.ask):
        the key and the header's text are derived here again from the compile's command and
        cudafe++'s output (`nvcc_pch.split`), so what is published under a key is what its inputs
        make; a prefix is built the second time it is seen, as nvcc_pch does."""
        if not requests.is_dir():
            return
        from cuda_agent.evaluate.process import scrubbed_env

        root = self.box.cache_dir / PCH_NVCC
        try:
            asks = sorted(requests.glob("*.json"))[:4]
            for req in asks:
                try:
                    spec = json.loads(req.read_text())
                    argv, source = spec["argv"], spec["source"]
                    text = req.with_suffix(".cpp").read_bytes()
                except (OSError, ValueError, KeyError, TypeError):
                    continue
                if not (_strings(argv) and argv and isinstance(source, str)):
                    continue
                s = nvcc_pch.split(text, argv, source, scrubbed_env({}))
                if s is None or (root / s.key / f"{nvcc_pch.HEADER}.gch").is_file():
                    continue
                seen = root / f"{s.key}.seen"
                if not seen.exists():
                    seen.touch()
                    continue
                if (root / f"{s.key}.failed").exists():
                    continue
                self._header(root, s.key, nvcc_pch.HEADER, s.header_text + b"\n",
                             lambda header, a=argv, src=source: nvcc_pch.header_command(a, src, header),
                             nvcc_pch.KEEP)
        finally:
            shutil.rmtree(requests, ignore_errors=True)

    def _header(self, root: Path, key: str, name: str, text: bytes, command, keep: int) -> None:
        """Build a precompiled header `root/key/<name>.gch` from `text` by `command(header path)` in
        a sandbox whose only writable folder is the header's, and publish it whole (one rename over
        the empty mount point), keeping the `keep` most recently used; a failure leaves
        `root/key.failed`."""
        final = root / key
        try:
            final.mkdir(parents=True)  # the mount point of the build's folder; replaced by the rename
        except FileExistsError:
            return  # another evaluation is building it
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        try:
            (staging / name).write_bytes(text)
            sandbox.hand_over(staging, self.box.sup)
            spec = build_spec(staging, self.box.cache_dir, str(final), uid=self.box.sup.bwrap_uid)
            code, _ = run(spec, command(final / name), self.box.sup, nvcc_pch.BUILD_TIMEOUT_S)
            sandbox.drop_links(staging)
            if code == 0 and (staging / f"{name}.gch").is_file():
                os.chmod(staging, 0o755)
                staging.rename(final)  # over the empty mount point
                nvcc_pch.prune(root, keep)
            else:
                (root / f"{key}.failed").touch()
                final.rmdir()
        except OSError:
            with contextlib.suppress(OSError):
                final.rmdir()
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    # -- precompiled headers --
    def _pch(self, cflags: Any, post: Any) -> dict[str, Any]:
        if not (_strings(cflags) and _strings(post)):
            raise BuildRefused("cflags and post_cflags must be lists of strings")
        cxx = os.environ.get("CXX", "c++")
        digest = inline_build.flags_digest(cxx, cflags, post)
        final = self.pch_root / digest
        if (final / f"{inline_build.HEADER}.gch").is_file() or (self.pch_root / f"{digest}.failed").is_file():
            return {"ok": True, "path": str(final / inline_build.HEADER)}
        thread = threading.Thread(target=self._build_pch, args=(cxx, cflags, post, digest), daemon=True)
        thread.start()
        self.pending.append(thread)
        return {"ok": True, "path": str(final / inline_build.HEADER), "started": True}

    def _build_pch(self, cxx: str, cflags: list[str], post: list[str], digest: str) -> None:
        self._header(self.pch_root, digest, inline_build.HEADER, b"#pragma once\n#include <torch/extension.h>\n",
                     lambda header: inline_build.pch_command(cxx, cflags, post, header,
                                                             header.with_name(f"{header.name}.gch")),
                     inline_build.KEEP)

    def _finish_pch(self) -> None:
        """Wait for the headers this candidate's builds started: nothing of them runs once its
        build is done (its timing comes later)."""
        for t in self.pending:
            t.join(nvcc_pch.BUILD_TIMEOUT_S)
        self.pending.clear()

    def close(self) -> None:
        """Nothing to wait for: a header still building publishes itself whole, or not at all."""
        self.pending.clear()


def _size(n: int) -> str:
    return f"{n / 2**30:.0f} GiB" if n >= 1 << 30 else f"{n >> 20} MiB"


def _strings(x: Any) -> bool:
    return isinstance(x, list) and len(x) < 1000 and all(isinstance(s, str) and len(s) < 10000 for s in x)


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


def run(spec: sandbox.Spec, argv: list[str], sup: sandbox.Support, timeout_s: float,
        env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run `argv` in a sandbox of its own to its end or `timeout_s`: (exit code or None on timeout,
    its output, bounded). `env`: beside the workers' scrubbed environment."""
    from cuda_agent.evaluate.process import scrubbed_env

    cgroup = sandbox.Cgroup(spec.limits) if sup.cgroup else None
    try:
        proc = sandbox.start(spec, argv, sup, cgroup, env=scrubbed_env(env or {}), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
            code = None
    finally:
        if cgroup is not None:
            cgroup.close()
    return code, clip(out.decode(errors="replace"), LOG_LIMIT)


_WARNED: set[str] = set()


def isolation_support(cfg: "EvalConfig") -> sandbox.Support | None:
    """The sandbox this machine gives candidates under `cfg.isolation` (None: none); under
    `required` a machine without one raises `sandbox.IsolationUnavailable`. Warns once per process
    when `auto` finds none."""
    if cfg.isolation == "auto":
        sup = sandbox.support()
        if not sup.ok and "auto" not in _WARNED:
            _WARNED.add("auto")
            sandbox.resolve("auto", "the evaluator")
        sup = sup if sup.ok else None
    else:
        sup = sandbox.resolve(cfg.isolation, "the evaluator (EvalConfig.isolation='required')")
    if sup is not None and sup.bwrap_uid is not None:
        cache_views(cfg.cache_dir, sup.bwrap_uid)  # before the harness writes there (their folders may move)
    return sup


def isolation_unavailable(cfg: "EvalConfig") -> str:
    """Why an evaluation ran without a sandbox."""
    if cfg.isolation == "off":
        return "isolation is off (EvalConfig.isolation)"
    return sandbox.support().error or "unknown"
