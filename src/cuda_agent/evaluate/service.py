"""The warm evaluation service: one process that keeps an `Evaluator` (its warm pools, caches and GPU
locks) for every command of one user, on a local socket.

    cuda-agent serve &                              # or: started on demand (`connect(..., "start")`)
    client, how = connect(EvalConfig(), "auto")     # None when no service runs: evaluate in-process
    with client:
        result = client.evaluate(task, candidate)

The socket lives in a directory only its user can enter (`private_dir`: mode 0700, checked, not
assumed), is itself mode 0600, and the service answers only peers of its own uid (SO_PEERCRED). One
request per connection, a JSON line each way: `ping`, `evaluate` (a task, a candidate and an
`EvalConfig`) or `stop`. Evaluations run in the service's `Evaluator` exactly as in-process ones do:
the same workers, scrubbed environment, guards and verdicts, so a crashing, hanging or hostile
candidate costs its own verdict and nothing else. A queued evaluation whose client went away is
cancelled. The service exits when told (`stop`, SIGTERM, SIGINT) or after `idle_exit_s` without
work, closing its pools and removing its socket.

Its trust boundary is an in-process evaluation's: candidates run as the same user in either case,
kept off the socket, as off every other file, by the static policy and the worker's guards.

The service serves one cache directory and one device: a client whose config names others, or which
runs other code than the service (`code_digest`), evaluates in-process and is told why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import select
import signal
import socket
import socketserver
import stat
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from cuda_agent.errors import CudaAgentError
from cuda_agent.evaluate.build import package_root
from cuda_agent.evaluate.cache_layout import SERVICE_LOG
from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.device import resolve_device
from cuda_agent.evaluate.evaluator import Evaluator, EvaluatorBase
from cuda_agent.evaluate.process import scrubbed_env
from cuda_agent.evaluate.result import Code, EvalResult
from cuda_agent.tasks import Task

IDLE_EXIT_S = 1800.0  # a service started on demand exits after this long without work
START_TIMEOUT_S = 300.0  # a service started on demand must answer within this (imports, CUDA, warm pool)
MAX_REQUEST = 64 << 20  # bytes of one request line (a candidate's sources are at most a few MB)
REFUSE_WAIT_S = 2.0  # how long a refused caller gets to finish sending its request


class ServiceError(CudaAgentError, RuntimeError):
    """The service could not be reached, started or used; the message says what to do."""


def socket_path() -> Path:
    """`$CUDA_AGENT_SOCKET`, else `$XDG_RUNTIME_DIR/cuda-agent/service.sock`, else
    `/tmp/cuda-agent-<uid>/service.sock`: one service per user."""
    if env := os.environ.get("CUDA_AGENT_SOCKET"):
        return Path(env)
    if run := os.environ.get("XDG_RUNTIME_DIR"):
        return Path(run) / "cuda-agent" / "service.sock"
    return Path(f"/tmp/cuda-agent-{os.getuid()}") / "service.sock"


def private_dir(path: Path) -> Path:
    """Create `path` (mode 0700) or check that it is a directory of this user that nobody else may
    enter: the socket's permissions alone are not honoured on every system."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ServiceError(f"{path}: the service's socket directory must be a directory of uid {os.getuid()} "
                           f"with mode 0700 (it is uid {st.st_uid}, mode {st.st_mode & 0o777:o}); remove it "
                           "or choose another socket with --socket or $CUDA_AGENT_SOCKET")
    return path


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED: pid, uid, gid)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def code_digest() -> str:
    """A digest of this installation's source files (names, sizes, modification times): a client
    and a service with different digests run different evaluator code."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _send(sock: socket.socket, doc: dict[str, Any]) -> None:
    sock.sendall(json.dumps(doc).encode() + b"\n")


def _recv(sock: socket.socket) -> dict[str, Any] | None:
    """One JSON line, or None when the other end closed first."""
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = sock.recv(1 << 20)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > MAX_REQUEST:
            raise ValueError(f"a message over {MAX_REQUEST} bytes")
    return json.loads(buf)


def _gone(sock: socket.socket) -> bool:
    """Has the client closed its end (or died)? Readable with nothing to read means end of file."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _task_json(task: Task) -> dict[str, Any]:
    return {"name": task.name, "source": task.source, "origin": task.origin, "level": task.level,
            "problem_id": task.problem_id}


def _candidate_json(c: Candidate) -> dict[str, Any]:
    return {"origin": c.origin, "kind": c.kind, "model_new": c.model_new, "kernels": dict(c.kernels)}


def _config_json(cfg: EvalConfig) -> dict[str, Any]:
    return cfg.to_json()


def _config_from(d: dict[str, Any]) -> EvalConfig:
    d = dict(d)
    for k in ("cache_dir", "work_dir"):
        if d.get(k) is not None:
            d[k] = Path(d[k])
    known = {f.name for f in dataclasses.fields(EvalConfig)}
    return EvalConfig(**{k: v for k, v in d.items() if k in known})


class Service:
    """The server: `serve_forever` until stopped or idle. `jobs`, `gpus`, `warm` as for `Evaluator`."""

    def __init__(self, config: EvalConfig, path: Path | None = None, *, jobs: int | None = None,
                 gpus: list[int | str] | None = None, warm: int | None = None, idle_exit_s: float | None = None):
        self.config = dataclasses.replace(config, device=resolve_device(config.device))
        self.path = Path(path or socket_path())
        self.idle_exit_s = idle_exit_s
        self.digest = code_digest()
        private_dir(self.path.parent)
        self._claim_path()
        self.evaluator = Evaluator(self.config, jobs=jobs, gpus=gpus, warm=warm)
        self.in_flight = 0
        self.served = 0
        self.refused = 0
        self.cancelled = 0  # queued evaluations dropped because their client went away
        self._last = time.monotonic()
        self._lock = threading.Lock()
        service = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                service._handle(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        old = os.umask(0o177)  # the socket file is created 0600
        try:
            self.server = Server(str(self.path), Handler)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._inode = self.path.stat().st_ino  # close() removes this socket file, not a successor's

    def _claim_path(self) -> None:
        """Take the socket path: an answering service there is an error; a dead one's socket is
        removed."""
        if not self.path.exists() and not self.path.is_symlink():
            return
        if not stat.S_ISSOCK(self.path.lstat().st_mode):
            raise ServiceError(f"{self.path} exists and is not a socket; give the service another --socket")
        try:
            info = ping(self.path, timeout=5.0)
        except ServiceError:
            self.path.unlink(missing_ok=True)  # nobody answers: the socket of a service that died
            return
        raise ServiceError(f"a service (pid {info.get('pid')}) already listens at {self.path}; stop it with "
                           "`cuda-agent serve --stop`, or give this one another --socket")

    def info(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "socket": str(self.path), "device": self.config.device,
                "cache_dir": str(self.config.cache_dir), "jobs": self.evaluator.jobs, "code": self.digest,
                "in_flight": self.in_flight, "served": self.served, "refused": self.refused,
                "cancelled": self.cancelled,
                "idle_exit_s": self.idle_exit_s, "workers": self.evaluator.stats()}

    def serve_forever(self) -> None:
        """Serve until `stop` (from a request, a signal or idleness); then close the pools and
        remove the socket."""
        watcher = threading.Thread(target=self._watch_idle, daemon=True)
        watcher.start()
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self.close()

    def stop(self) -> None:
        """Ask `serve_forever` to return (from any thread but its own)."""
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def close(self) -> None:
        self.server.server_close()
        with contextlib.suppress(OSError):
            if self.path.stat().st_ino == self._inode:
                self.path.unlink()
        self.evaluator.close()

    def _watch_idle(self) -> None:
        while self.idle_exit_s:
            time.sleep(min(1.0, self.idle_exit_s / 4))
            with self._lock:
                idle = self.in_flight == 0 and time.monotonic() - self._last > self.idle_exit_s
            if idle:
                self.stop()
                return

    def _handle(self, sock: socket.socket) -> None:
        if peer_uid(sock) != os.getuid():  # the directory's mode should stop them first
            with self._lock:
                self.refused += 1
            # read (and ignore) their request first: closing on an unread request makes their send
            # fail with a broken pipe, and they would never read why they were refused
            sock.settimeout(REFUSE_WAIT_S)
            try:
                _recv(sock)
            except (ValueError, OSError):
                pass
            _send(sock, {"ok": False, "error": f"this service serves uid {os.getuid()} only"})
            return
        try:
            req = _recv(sock)
        except (ValueError, OSError) as exc:
            _send(sock, {"ok": False, "error": f"a malformed request: {exc}"})
            return
        if req is None:
            return
        op = req.get("op")
        if op == "ping":
            _send(sock, {"ok": True, **self.info()})
        elif op == "stop":
            _send(sock, {"ok": True, "stopping": True, "pid": os.getpid()})
            self.stop()
        elif op == "evaluate":
            self._evaluate(sock, req)
        else:
            _send(sock, {"ok": False, "error": f"unknown op {op!r}: use ping, evaluate or stop"})

    def _evaluate(self, sock: socket.socket, req: dict[str, Any]) -> None:
        try:
            task = Task(**req["task"])
            cand = Candidate(**req["candidate"])
            cfg = _config_from(req["config"])
        except (KeyError, TypeError, ValueError) as exc:
            _send(sock, {"ok": False, "error": f"a malformed evaluate request: {exc}"})
            return
        if cfg.cache_dir.resolve() != self.config.cache_dir.resolve():
            _send(sock, {"ok": False, "error": f"this service uses the cache {self.config.cache_dir}, not {cfg.cache_dir}"})
            return
        with self._lock:
            self.in_flight += 1
        result = None
        try:
            result = self._verdict(sock, self.evaluator.submit(task, cand, cfg))
        finally:
            with self._lock:  # before the answer: a caller's next ping must see it done
                self.in_flight -= 1
                self.served += result is not None
                self._last = time.monotonic()
        if result is not None:
            with contextlib.suppress(OSError):
                _send(sock, {"ok": True, "result": result.to_json()})

    def _verdict(self, sock: socket.socket, future: Future) -> EvalResult | None:
        """The evaluation's result, or None when its caller went away while it was still queued
        (it is cancelled then: nobody would read it)."""
        while True:
            try:
                return future.result(timeout=0.2)
            except TimeoutError:
                if _gone(sock):
                    if future.cancel():
                        with self._lock:
                            self.cancelled += 1
                    return None


def _request(path: Path, doc: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    """One request and its answer; ServiceError when nobody answers at `path`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise ServiceError(f"no service answers at {path} ({exc.strerror or exc}); start one with "
                               "`cuda-agent serve`") from None
        try:
            _send(sock, doc)
        except BrokenPipeError:
            pass  # it answered and closed before reading all of it: its answer says why
        try:
            answer = _recv(sock)
        except (OSError, ValueError) as exc:
            raise ServiceError(f"the service at {path} broke off: {exc}") from None
        if answer is None:
            raise ServiceError(f"the service at {path} closed the connection without an answer; "
                               "its log is service.log in its cache directory")
        if not answer.get("ok"):
            raise ServiceError(f"the service at {path} refused: {answer.get('error')}")
        return answer
    finally:
        sock.close()


def ping(path: Path | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """The service's `info()`; ServiceError when none answers."""
    return _request(Path(path or socket_path()), {"op": "ping"}, timeout)


def stop(path: Path | None = None, timeout: float = 60.0) -> int:
    """Stop the service at `path` and wait until its socket is gone; its pid."""
    p = Path(path or socket_path())
    pid = int(_request(p, {"op": "stop"}, 10.0)["pid"])
    deadline = time.monotonic() + timeout
    while p.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


class ServiceClient(EvaluatorBase):
    """An `EvaluatorBase` whose evaluations run in the service at `path`; up to `jobs` requests
    wait at once (the service queues them on its own pool). `config`: the default of every
    evaluation, as an Evaluator's (each call may pass its own)."""

    def __init__(self, path: Path | None = None, jobs: int = 64, config: EvalConfig | None = None):
        self.path = Path(path or socket_path())
        self.config = config or EvalConfig()
        self._executor = ThreadPoolExecutor(jobs, thread_name_prefix="cuda-agent-service")

    def submit(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> Future:
        return self._executor.submit(self._evaluate, task, candidate, config or self.config)

    def _evaluate(self, task: Task, candidate: Candidate, config: EvalConfig) -> EvalResult:
        req = {"op": "evaluate", "task": _task_json(task), "candidate": _candidate_json(candidate),
               "config": _config_json(config)}
        try:
            return EvalResult.from_json(_request(self.path, req, None)["result"])
        except ServiceError as exc:  # a verdict all the same: the machinery failed, not the candidate
            res = EvalResult(task=task.id, candidate=candidate.origin, config=config.to_json())
            res.add(Code.INFRA_ERROR, str(exc))
            return res

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def start(config: EvalConfig, path: Path | None = None, *, jobs: int | None = None,
          idle_exit_s: float = IDLE_EXIT_S, timeout: float = START_TIMEOUT_S) -> dict[str, Any]:
    """Start a service in the background (its own session, a scrubbed environment, its log at
    `<cache_dir>/service.log`) and wait until it answers; its `info()`."""
    p = Path(path or socket_path())
    config.cache_dir.mkdir(parents=True, exist_ok=True)
    log = config.cache_dir / SERVICE_LOG
    cmd = [sys.executable, "-m", "cuda_agent", "serve", "--device", config.device, "--cache-dir",
           str(config.cache_dir), "--socket", str(p), "--idle-exit", f"{idle_exit_s:g}"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    env = scrubbed_env({})
    env["PYTHONPATH"] = os.pathsep.join(x for x in (package_root(), os.environ.get("PYTHONPATH")) if x)
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").splitlines()[-5:]
            raise ServiceError(f"the service exited ({proc.returncode}) before answering; from {log}:\n"
                               + "\n".join(tail))
        with contextlib.suppress(ServiceError):
            return ping(p, timeout=5.0)
        time.sleep(0.2)
    proc.kill()
    raise ServiceError(f"the service did not answer at {p} within {timeout:.0f} s; see {log}")


def connect(config: EvalConfig, mode: str = "auto", path: Path | None = None) -> tuple[ServiceClient | None, str]:
    """A client of the service that can run `config`'s evaluations, or None to evaluate
    in-process; and a line saying which, and why. `mode`: `auto` uses a running service, `start`
    starts one when none runs (or restarts one running other code), `off` never uses one."""
    p = Path(path or socket_path())
    if mode == "off":
        return None, "evaluating in-process (--service off)"
    try:
        info = ping(p, timeout=5.0)
    except ServiceError:
        info = None
    if info is not None and info.get("code") != code_digest():
        if mode != "start":
            return None, (f"evaluating in-process: the service at {p} (pid {info.get('pid')}) runs other code; "
                          "restart it (`cuda-agent serve --stop`, then `cuda-agent serve`)")
        stop(p)
        info = None
    if info is None:
        if mode != "start":
            return None, f"evaluating in-process: no service at {p} (start one with `cuda-agent serve`)"
        try:
            info = start(config, p)
        except ServiceError as exc:
            return None, f"evaluating in-process: could not start the service: {exc}"
        how = f"started the service at {p} (pid {info['pid']}); evaluating through it"
    else:
        how = f"evaluating through the service at {p} (pid {info['pid']})"
    if Path(info["cache_dir"]).resolve() != config.cache_dir.resolve():
        return None, f"evaluating in-process: the service at {p} uses the cache {info['cache_dir']}, not {config.cache_dir}"
    if resolve_device(config.device) != info["device"]:
        return None, f"evaluating in-process: the service at {p} runs on {info['device']}, not {config.device}"
    return ServiceClient(p, config=config), how


@contextlib.contextmanager
def running(config: EvalConfig, path: Path | None = None, **kw: Any) -> Iterator[Service]:
    """A service in a thread of this process for the length of a `with` block (tests, benchmarks)."""
    service = Service(config, path, **kw)
    thread = threading.Thread(target=service.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        service.stop()
        thread.join(60)


def serve(config: EvalConfig, path: Path | None = None, **kw: Any) -> None:
    """Run a service in this process until it is stopped: `cuda-agent serve`. SIGTERM and SIGINT
    stop it cleanly (pools closed, socket removed)."""
    service = Service(config, path, **kw)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: service.stop())
    print(json.dumps({"serving": service.info()}), flush=True)
    service.serve_forever()
