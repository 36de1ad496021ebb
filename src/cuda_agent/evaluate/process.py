"""Worker processes seen from the harness: start one, call its commands, stop it, tear it down.

A worker is `python -m cuda_agent.evaluate.worker ROLE` (or a fork of a warm zygote, zygote.py) in a
process group of its own, with a scrubbed environment (`scrubbed_env`: no secrets), a private
socket for its commands (`channel.Channel`) and its stdout and stderr read into bounded buffers
(`OutputReader`) or appended to a log file. Every command has a deadline. A worker that hangs,
dies or breaks the protocol raises `WorkerFailure` with a reason code, and its whole process group
is killed: nothing it started outlives it. The evaluator (evaluation.py, pool.py) and the task
filter (synth/filters.py) both drive their workers through `Worker`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable

from cuda_agent.evaluate.build import package_root
from cuda_agent.evaluate.channel import Channel, ChannelClosed, ChannelError, ChannelTimeout
from cuda_agent.evaluate.isolate import CandidateBox
from cuda_agent.evaluate.locks import DeviceLock
from cuda_agent.evaluate.result import Code
from cuda_agent.evaluate.zygote import Zygote
from cuda_agent.evaluate.zygote import spawn as zygote_spawn

ENV_KEEP = ("PATH", "HOME", "USER", "LANG", "TMPDIR", "LD_LIBRARY_PATH", "CC", "CXX",
            "TORCH_CUDA_ARCH_LIST", "TORCHINDUCTOR_CACHE_DIR")
ENV_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "LC_", "OMP_", "MKL_", "OPENBLAS_", "NCCL_")


class WorkerFailure(Exception):
    """A command of a worker did not complete: `code` says why (the worker's own verdict, or the
    harness's: timeout, crash, protocol violation). `role`: the worker whose command it was, where
    a worker's (`Worker.call`)."""

    def __init__(self, code: Code, message: str, role: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.role = role


class OutputReader(threading.Thread):
    """Drains a pipe, keeping its first and last `limit/2` bytes: floods cost memory no more."""

    def __init__(self, pipe: IO[bytes], limit: int):
        super().__init__(daemon=True)
        self.pipe, self.half = pipe, max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.start()

    def run(self) -> None:
        while chunk := self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536):
            self.total += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        kept = len(self.head) + len(self.tail)
        middle = f"\n[... {self.total - kept} bytes dropped ...]\n" if self.total > kept else ""
        return self.head.decode(errors="replace") + middle + self.tail.decode(errors="replace")


class _Discarded:
    """The output of a worker whose stdout and stderr go to a log file: nothing is kept here."""

    total = 0

    def text(self) -> str:
        return ""

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        pass


def scrubbed_env(extra: dict[str, str]) -> dict[str, str]:
    """Workers get no secrets: only what compilers, CUDA and Python need (STYLE: pop, not unsetenv)."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)) and not k.startswith("CUDA_AGENT_")}
    env.update(PYTHONPATH=package_root(), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", **extra)
    # The judge and the candidate take turns on the CPU; OpenMP threads that spin-wait after their
    # turn would steal cores from the other process's timed calls.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


class Worker:
    def __init__(self, role: str, cwd: Path, env: dict[str, str], output_limit: int, *flags: str,
                 zygote: Zygote | None = None, log: Path | None = None, box: CandidateBox | None = None):
        """A fresh interpreter serving `role` in `cwd` with the environment `env` (already
        scrubbed), or for a spare, a fork of `zygote` when it is warm (zygote.py). `flags`: the
        worker's command-line options (worker/serve.py). `log`: append the process's stdout and
        stderr to this file instead of keeping their head and tail (`output_limit` bytes).
        `box`: the process runs in this sandbox (isolate.py), which it owns and closes."""
        self.role, self.cwd, self.box = role, cwd, box
        forked = None
        if zygote is not None and role == "spare":
            enter = None
            if box is not None:
                try:
                    box.hold()
                    enter = box.enter_args()
                except OSError:
                    zygote = None  # (a cold start in the sandbox below)
            forked = zygote_spawn(zygote, list(flags), enter) if zygote is not None else None
            if forked is None and box is not None and box.holder is not None:
                box.holder.close()  # (the zygote is not warm: a cold start below, in a sandbox of its own)
                box.holder = None
        self.forked = forked is not None
        if forked is not None:
            self.proc, parent = forked
        else:
            parent, child = socket.socketpair()
            sink = open(log, "ab") if log is not None else None
            argv = [sys.executable, "-m", "cuda_agent.evaluate.worker", role, *flags]
            popen: dict[str, Any] = dict(
                pass_fds=(child.fileno(),), cwd=box.work if box else cwd,
                env={**env, "CUDA_AGENT_CHANNEL_FD": str(child.fileno())},
                stdin=subprocess.DEVNULL, stdout=sink or subprocess.PIPE,
                stderr=sink or subprocess.PIPE, start_new_session=True)
            try:
                self.proc = box.start(argv, **popen) if box is not None else subprocess.Popen(argv, **popen)
            finally:
                child.close()
                if sink is not None:
                    sink.close()
        self.chan = Channel(parent)
        self._frozen = 0
        if box is not None:
            box.attach(self.proc.pid)
        if self.proc.stdout is not None:
            self.stdout: OutputReader | _Discarded = OutputReader(self.proc.stdout, output_limit)
            self.stderr: OutputReader | _Discarded = OutputReader(self.proc.stderr, output_limit)
        else:
            self.stdout = self.stderr = _Discarded()
        self.log = log
        self.ready = False
        self.seq = 0
        # what the worker may ask of the harness in any command (the candidate's builds: an
        # extension built lazily, on forward's first call, asks for them in `run`), unless a call names its own
        self.requests: Callable[[str, dict], dict] | None = None
        self.guard_warm = role == "candidate" or "--warm-guard" in flags  # the op guard warmed at start

    def started(self) -> bool:
        """True once the process has said it is ready (its greeting is waiting or was read): for a
        spare, torch imported and, on a GPU, its CUDA context made. Does not block."""
        if self.proc.poll() is not None:
            return False
        if self.ready:
            return True
        try:
            return bool(select.select([self.chan.sock], [], [], 0)[0])
        except (OSError, ValueError):  # closed
            return False

    def become(self, role: str, cwd: Path, env: dict[str, str], timeout: float) -> "Worker":
        """Give a spare its role, directory and the evaluation's environment (worker/serve.py)."""
        self.call("become", timeout, role=role, cwd=str(cwd), env=env)
        self.role, self.cwd = role, cwd
        return self

    def call(self, cmd: str, timeout: float, requests: Callable[[str, dict], dict] | None = None,
             **args: Any) -> dict[str, Any]:
        """Run the command `cmd` with `args` in the worker; its reply. Raises `WorkerFailure` when
        the worker reports a failure, misses the deadline (killed), dies or breaks the protocol.
        `requests(kind, args)`: answers what the worker asks of the harness during this command
        (worker/serve.py, `request`; time spent answering does not count against `timeout`);
        default: the worker's own `requests`."""
        requests = requests if requests is not None else self.requests
        try:
            if not self.ready:
                hello = self.chan.recv(timeout=max(timeout, 0.01))
                if hello.get("ready") != self.role:
                    raise ChannelError("bad greeting")
                self.ready = True
            self.seq += 1
            self.chan.send({"cmd": cmd, "args": args, "seq": self.seq})
            end = time.monotonic() + timeout
            while True:
                reply = self.chan.recv(timeout=max(end - time.monotonic(), 0.01))
                if "request" not in reply:
                    break
                if requests is None or not isinstance(reply.get("args"), dict):
                    raise ChannelError(f"a request ({str(reply.get('request'))[:40]!r}) where none may be made")
                t0 = time.monotonic()
                self.chan.send({"response": requests(str(reply["request"]), reply["args"])})
                end += time.monotonic() - t0
            if reply.get("seq") != self.seq:
                raise ChannelError(f"reply out of sequence to `{cmd}` (a forged or stale message)")
        except ChannelTimeout:
            self.kill()
            raise WorkerFailure(self._fault(Code.TIMEOUT), f"{self.role}: `{cmd}` did not finish within {timeout:.0f} s "
                                "(hang, deadlock or far too slow); the process was killed", self.role) from None
        except (ChannelClosed, BrokenPipeError, ConnectionResetError):
            message = self._death(cmd)  # first: it reaps the process, whose status _fault reads
            raise WorkerFailure(self._fault(Code.CRASH), message, self.role) from None
        except ChannelError as exc:
            self.kill()
            raise WorkerFailure(Code.PROTOCOL_VIOLATION, f"{self.role}: {exc}", self.role) from None
        if reply.get("ok") is True:
            return reply
        try:
            code = Code(reply.get("code"))
        except ValueError:
            raise WorkerFailure(Code.PROTOCOL_VIOLATION, f"{self.role}: unknown reason code", self.role) from None
        raise WorkerFailure(code, str(reply.get("message", ""))[:20000], self.role)

    def _fault(self, code: Code) -> Code:
        """A hang or crash of the judge is the evaluator's failure, not the candidate's; so is one of
        a spare, which has run no candidate code yet (its CUDA context could not be made on a full
        GPU, say): infra, which an `Evaluator` runs again alone."""
        if self.role in ("judge", "spare"):
            return Code.INFRA_ERROR
        if code is Code.CRASH and self.proc.poll() == 0:
            return Code.EARLY_EXIT  # exited "successfully" in the middle of a command
        return code

    def _death(self, cmd: str) -> str:
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.returncode
        if rc is not None and rc < 0:
            how = f"was killed by signal {signal.Signals(-rc).name}"
        else:
            how = f"exited with status {rc}"
        self.stderr.join(timeout=2)
        tail = self.stderr.text()[-3000:]
        where = f"; stderr:\n{tail}" if tail else (f"; its output is in {self.log}" if self.log else "")
        return f"{self.role} process {how} during `{cmd}` without answering{where}"

    @contextlib.contextmanager
    def frozen(self):
        """Stop the worker (SIGSTOP) for the duration: no thread it started can finish work late,
        or touch its buffers, while the judge reads them or the baselines are timed. In a sandbox,
        every process in it (`CandidateBox.frozen`), else the worker's process group. Nested uses
        stop it once."""
        self._frozen += 1
        try:
            if self._frozen > 1:
                yield
                return
            if self.box is not None:
                with self.box.frozen():
                    yield
                return
            try:
                os.killpg(self.proc.pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            try:
                yield
            finally:
                try:
                    os.killpg(self.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        finally:
            self._frozen -= 1

    def strays(self) -> list[str]:
        """Processes the candidate started and left running in its sandbox (none known without one:
        the guard's own check of its children is what remains)."""
        return self.box.strays() if self.box is not None else []

    def kill_group(self) -> None:
        """SIGKILL the whole process group, even when the worker itself has exited: whatever it
        started (a background thread's subprocess, a compiler) must not outlive the evaluation."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.kill_group()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.chan.close()
        if self.box is not None:  # its sandbox ends: whatever its processes left running dies with it
            self.box.close()

    def close(self) -> None:
        """Ask the worker to exit, then kill its process group (nothing the candidate started
        survives) and collect its output."""
        if self.proc.poll() is None:
            try:
                self.chan.send({"cmd": "exit"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self.stdout.join(timeout=2)
        self.stderr.join(timeout=2)


_TEARDOWNS: set[threading.Thread] = set()  # teardowns still reaping their processes (wait_teardowns)
_TEARDOWNS_LOCK = threading.Lock()


def wait_teardowns(timeout: float | None = None) -> None:
    """Wait until every evaluation's workers have exited (their CUDA contexts are gone)."""
    with _TEARDOWNS_LOCK:
        threads = list(_TEARDOWNS)
    end = None if timeout is None else time.monotonic() + timeout
    for t in threads:
        t.join(None if end is None else max(end - time.monotonic(), 0.0))


def close_all(workers: list[Worker], lock: DeviceLock | None,
              then: Callable[[], object] | None = None) -> threading.Thread:
    """Close an evaluation's workers together; returns once their output is complete. `then` runs
    once the processes are gone (their device memory freed): where the evaluation gives back the
    memory it was admitted with, which its processes hold until they exit.

    Each worker is asked to exit; it closes its stdout and stderr before it exits (worker/serve.py),
    so the output is whole before its CUDA context goes, the slow part of an exit
    (docs/measured/2026-11-30-speed-h200-x2.md, "Background teardown"). Then every process group is
    killed (whatever the candidate started goes too), and the returned thread goes on to reap the
    processes. All of it holds the device lock shared (contexts are not destroyed during someone's
    timing). Join the thread, or `wait_teardowns`, to know the processes gone."""
    collected = threading.Event()

    def run() -> None:
        try:
            with lock.shared(30, required=False) if lock else contextlib.nullcontext():
                for w in workers:
                    if w.proc.poll() is None:
                        with contextlib.suppress(OSError):
                            w.chan.send({"cmd": "exit"})
                # Output complete (both pipes at EOF), or the process gone (a child may hold its pipes).
                end = time.monotonic() + 5
                while time.monotonic() < end and not all(
                        w.proc.poll() is not None or not (w.stdout.is_alive() or w.stderr.is_alive())
                        for w in workers):
                    time.sleep(0.002)
                for w in workers:
                    w.kill_group()
                for w in workers:
                    w.stdout.join(timeout=2)
                    w.stderr.join(timeout=2)
                collected.set()
                end = time.monotonic() + 10
                for w in workers:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        w.proc.wait(timeout=max(end - time.monotonic(), 0.01))
                    w.kill()
        finally:
            collected.set()
            try:
                if then is not None:
                    then()
            finally:
                with _TEARDOWNS_LOCK:
                    _TEARDOWNS.discard(threading.current_thread())

    thread = threading.Thread(target=run, name="cuda-agent-teardown")
    with _TEARDOWNS_LOCK:
        _TEARDOWNS.add(thread)
    thread.start()
    collected.wait()
    return thread
