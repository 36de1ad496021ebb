"""Workers forked from a warm interpreter, instead of each one importing torch afresh.

Importing torch and warming the op guard (torch._dynamo, sympy) cost a fresh worker many CPU-seconds,
which a machine running many evaluations pays for every worker it starts. A *zygote* does that work
once per warm pool: it imports torch, warms the op guard, never touches the GPU, and forks a worker
on request; the child starts with everything imported and creates its own CUDA context (a context
cannot cross a fork, so the zygote must never make one).

    python -m cuda_agent.evaluate.zygote     (started by `Zygote`, one per WarmPool)

Protocol, over a SOCK_SEQPACKET socket pair (one message per send, JSON):
- harness -> zygote: {"flags": [...]} with three file descriptors attached (the worker's channel,
  stdout and stderr); the zygote forks, the child becomes `worker.serve.main(["spare", *flags])` in a
  session of its own, and the zygote answers {"pid": PID};
- zygote -> harness: {"ready": true} once warm; {"exit": PID, "code": C} when a child it forked has
  exited (C as `subprocess.Popen.returncode`: negative for a signal). The zygote is the children's
  parent, so only it can read their exit status.

The harness side (`Zygote`, `ForkedProcess`) gives a forked worker the part of `subprocess.Popen`'s
interface `process.Worker` uses (pid, poll, wait, returncode, stdout, stderr).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import IO

from cuda_agent.evaluate.locks import proc_stat

MAX_REQUEST = 1 << 16
REPORT_GRACE_S = 5.0  # a reaped child's exit code reaches the harness within milliseconds on an idle host;
# on a loaded one (an evaluation building or running on every core) the zygote may not be scheduled for a while


# --- the zygote process ----------------------------------------------------------------------------

def _enter(enter: dict, chan: int) -> None:
    """Move this fresh fork into the candidate's sandbox (isolate.py, `CandidateBox.hold`): its
    cgroup, then its namespaces, root and user (`sandbox.enter`), with no descriptor of the
    zygote's left open but the channel and the output pipes; then fork, so that the worker is in
    the sandbox's PID namespace. This process stays outside, waits for the worker and exits as it
    did; the harness's process-group kill reaches both."""
    from cuda_agent import sandbox

    for d in enter.get("cgroups") or []:
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    keep = {0, 1, 2, chan}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    sandbox.enter(int(enter["pid"]), enter.get("uid"))
    pid = os.fork()
    if pid == 0:
        return
    for fd in (0, 1, 2, chan):
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _child(sock: socket.socket, wake: tuple[int, int], fds: list[int], flags: list[str],
           enter: dict | None = None) -> None:
    """In the forked child: become a spare worker on the given channel and output pipes (in the
    sandbox `enter` names, where it names one)."""
    try:
        signal.set_wakeup_fd(-1)
        for fd in wake:
            os.close(fd)
        sock.close()
        os.setsid()  # a process group of its own: the harness kills the whole group
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        chan, out, err = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        if enter is not None:
            _enter(enter, chan)
        os.environ["CUDA_AGENT_CHANNEL_FD"] = str(chan)
        from cuda_agent.evaluate.worker import serve

        serve.main(["spare", *flags])
    except BaseException:  # noqa: BLE001 - into the worker's stderr, which the harness reads
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # never back into the zygote's loop


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def main() -> None:
    sock = socket.socket(fileno=int(os.environ.pop("CUDA_AGENT_ZYGOTE_FD")))
    import torch  # noqa: F401

    from cuda_agent.evaluate.worker import judge, runner  # noqa: F401  (imported once, for every child)
    from cuda_agent.evaluate.worker.common import name_process
    from cuda_agent.evaluate.worker.serve import warm_guard

    name_process("zygote")
    warm_guard()  # on the CPU: the zygote never makes a CUDA context, which a fork cannot carry
    if torch.cuda.is_initialized():
        sys.exit("cuda-agent zygote: CUDA was initialised while warming up; workers cannot be forked")
    sock.send(json.dumps({"ready": True}).encode())
    wake_r, wake_w = os.pipe()  # SIGCHLD wakes the loop (its handler writes a byte)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    while True:
        ready = select.select([sock, wake_r], [], [], 1.0)[0]
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock, children)
        if sock not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 3)
        except OSError:
            msg, fds = b"", []
        if not msg:  # the harness is gone: so are its evaluations
            for pid in children:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os._exit(0)
        request = json.loads(msg)
        flags, enter = request.get("flags", []), request.get("enter")
        if len(fds) != 3 or not all(isinstance(f, str) for f in flags):
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": None}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(sock, (wake_r, wake_w), fds, flags, enter)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        sock.send(json.dumps({"pid": pid}).encode())


# --- the harness side ------------------------------------------------------------------------------

class Zygote:
    """A zygote process and what it reports. `fork` returns None until it is warm, or once it has
    died: the caller then starts a worker the ordinary way."""

    def __init__(self, env: dict[str, str], cwd: str | os.PathLike):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.evaluate.zygote"], pass_fds=(child.fileno(),), cwd=cwd,
            env={**env, "CUDA_AGENT_ZYGOTE_FD": str(child.fileno())},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        child.close()
        self.sock = parent
        self.ready = threading.Event()
        self.dead = False
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self._pid: list[int | None] = []  # the answer to the request in flight
        self._request = threading.Lock()  # one fork request at a time
        threading.Thread(target=self._read, name="cuda-agent-zygote", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MAX_REQUEST)
                msg = json.loads(data) if data else None
            except (OSError, ValueError):
                msg = None
            with self._cond:
                if msg is None:
                    self.dead = True
                    self._cond.notify_all()
                    return
                if msg.get("ready"):
                    self.ready.set()
                elif "exit" in msg:
                    self._exits[int(msg["exit"])] = int(msg["code"])
                elif "pid" in msg:
                    self._pid.append(msg["pid"])
                self._cond.notify_all()

    def fork(self, flags: list[str], chan: int, stdout: int, stderr: int,
             timeout: float = 10.0, enter: dict | None = None) -> int | None:
        """A worker forked with these fds as its channel, stdout and stderr (in the sandbox `enter`
        names: `_enter`); its pid, or None (the zygote not warm yet, or gone)."""
        if not self.ready.is_set() or self.dead:
            return None
        with self._request:
            try:
                socket.send_fds(self.sock, [json.dumps({"flags": flags, "enter": enter}).encode()],
                                [chan, stdout, stderr])
            except OSError:
                return None
            with self._cond:
                if not self._cond.wait_for(lambda: self._pid or self.dead, timeout):
                    self.dead = True  # not answering: its late answer must not go to a later request
                    return None
                return self._pid.pop() if self._pid else None

    def returncode(self, pid: int, timeout: float | None = 0.0) -> int | None:
        """The exit code of a child, once the zygote has reaped it; None while it runs. A child that
        is gone (or a zombie) without a report for `REPORT_GRACE_S`, or after the zygote's end,
        counts as killed: its status is lost (a candidate may stop or kill its zygote)."""
        end = None if timeout is None else time.monotonic() + timeout
        gone_at = None
        with self._cond:
            while True:
                if pid in self._exits:
                    return self._exits.pop(pid)
                if not _exists(pid):
                    gone_at = gone_at or time.monotonic()
                    if self.dead or time.monotonic() - gone_at > REPORT_GRACE_S:
                        return -signal.SIGKILL
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(0.05 if left is None else min(left, 0.05))

    def close(self) -> None:
        self.dead = True
        try:
            self.sock.close()  # the zygote exits (and kills what it forked and still runs)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _exists(pid: int) -> bool:
    """Is `pid` a live process (not gone, not a zombie waiting for a reaper)?"""
    fields = proc_stat(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


class ForkedProcess:
    """The part of `subprocess.Popen` that `process.Worker` uses, for a worker forked by a zygote."""

    def __init__(self, zygote: Zygote, pid: int, stdout: IO[bytes], stderr: IO[bytes]):
        self.zygote, self.pid = zygote, pid
        self.stdout, self.stderr = stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.returncode(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return self.returncode


def spawn(zygote: Zygote, flags: list[str], enter: dict | None = None) -> tuple[ForkedProcess, socket.socket] | None:
    """A spare worker forked by `zygote` (into the sandbox `enter` names): (its process, the
    harness's end of its channel), or None."""
    parent, child = socket.socketpair()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = zygote.fork(flags, child.fileno(), out_w, err_w, enter=enter)
    finally:
        child.close()
        os.close(out_w)
        os.close(err_w)
    if pid is None:
        parent.close()
        os.close(out_r)
        os.close(err_r)
        return None
    return ForkedProcess(zygote, pid, os.fdopen(out_r, "rb", buffering=0), os.fdopen(err_r, "rb", buffering=0)), parent


if __name__ == "__main__":
    main()
