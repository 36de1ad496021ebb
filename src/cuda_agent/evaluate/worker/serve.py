"""A worker process's life: start, warm up, serve commands over its channel, exit.

    python -m cuda_agent.evaluate.worker ROLE [--cuda] [--warm-device] [--warm-guard]
                                              [--lock BASE] [--cpus LIST] [--handler MODULE:CLASS]

ROLE is `judge`, `candidate`, `eager` or `compile` (judge.py, runner.py), `spare` (a worker started
ahead of need that learns its role from its first command, `become`), or any role served by the
class `--handler` names (the task filter's probe, synth/probe.py). The channel's file descriptor
comes in `CUDA_AGENT_CHANNEL_FD`; stdout and stderr are the harness's to read, never the protocol.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from cuda_agent.evaluate.channel import Channel, ChannelClosed
from cuda_agent.evaluate.result import Code
from cuda_agent.evaluate.worker.common import Failure, classify, enter, keep_warm_timer, name_process

ROLES = ("judge", "candidate", "eager", "compile")  # the evaluator's roles, which a spare may take
WARM_SEGMENT_BYTES = 256 << 20  # device memory a fully warmed spare leaves in torch's cache
HARNESS_WATCH_S = 1.0  # how often a worker looks whether the process that started it is alive


_CHANNEL: Channel | None = None  # this process's channel, for `request`


def request(kind: str, **args: Any) -> dict[str, Any]:
    """Ask the harness for something only it may do (a sandboxed candidate's builds: isolate.py,
    `Builds`), in the middle of a command, and wait for its answer. Raises RuntimeError where the
    harness refuses or the channel breaks."""
    if _CHANNEL is None:
        raise RuntimeError("no channel to the harness in this process")
    _CHANNEL.send({"request": kind, "args": args})
    msg = _CHANNEL.recv()
    if "response" not in msg or not isinstance(msg["response"], dict):
        raise RuntimeError(f"the harness did not answer the request {kind!r}")
    return msg["response"]


def serve(handler: Any, chan: Channel) -> None:
    """Answer the harness's commands with `handler.cmd_<name>(**args)` until `exit` or the channel
    closes. An exception becomes a failure reply with its reason code; the process lives on. A
    handler's `after_command()`, where it has one, runs after each command, before the reply, with
    what the command's frame held released (the judge's: its allocator's cache)."""
    while True:
        try:
            msg = chan.recv()
        except ChannelClosed:
            return
        cmd = msg.get("cmd")
        if cmd == "exit":
            return
        if cmd == "ping":  # wakes the process: a timed command then finds it as hot as the judge's
            chan.send({"ok": True, "seq": msg.get("seq")})
            continue
        if cmd == "memory":
            chan.send({"ok": True, "seq": msg.get("seq"), "reserved_peak": reserved_peak(handler)})
            continue
        fn = getattr(handler, f"cmd_{cmd}", None)
        try:
            if fn is None:
                raise Failure(Code.INFRA_ERROR, f"unknown command {cmd!r}")
            reply = {"ok": True, **fn(**msg.get("args", {}))}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from candidate code too
            code, message = classify(exc, getattr(handler, "code_root", None))
            reply = {"ok": False, "code": code.value, "message": message}
        if (after := getattr(handler, "after_command", None)) is not None:
            after()
        reply["seq"] = msg.get("seq")
        chan.send(reply)


def reserved_peak(handler: Any) -> int:
    """The most device memory torch's allocator has held in this process (since the handler's own
    last reset of the peak statistics, which it keeps as `reserved_peak`): what the process held
    at its peak, less its CUDA context. 0 where CUDA was never used."""
    torch = sys.modules.get("torch")
    try:
        now = torch.cuda.max_memory_reserved() if torch is not None and torch.cuda.is_initialized() else 0
        return max(int(getattr(handler, "reserved_peak", 0) or 0), int(now))
    except Exception:  # noqa: BLE001 - a device error (or a candidate's patch): nothing to learn from
        return 0


def become(chan: Channel) -> str:
    """A spare learns its role, directory and the evaluation's environment from its first command."""
    msg = chan.recv()
    args = msg.get("args", {}) if msg.get("cmd") == "become" else {}
    role = args.get("role")
    if role not in ROLES or not isinstance(args.get("env"), dict):
        chan.send({"ok": False, "code": Code.INFRA_ERROR.value, "message": "a spare needs `become` first",
                   "seq": msg.get("seq")})
        sys.stderr.flush()
        os._exit(1)
    enter(args["cwd"], args["env"])
    chan.send({"ok": True, "seq": msg.get("seq")})
    return role


def warm_guard() -> None:
    """The first call under the op guard imports much of torch (dispatch modes, dynamo, sympy:
    seconds of CPU); a runner pays it before it says ready, a spare before it is needed."""
    import torch

    from cuda_agent.evaluate.guard import OpGuard

    OpGuard(set(sys.modules), strict=True).call(torch.nn.Linear(2, 2), [torch.zeros(1, 2)])


def warm_cuda(lock: str | None, full: bool = False) -> None:
    """Create the CUDA context before it is needed; not while an evaluation times on the device,
    but ahead of timed rounds that wait (locks.py). `full`: also do what a worker's first command
    would otherwise do on the evaluation's path, each a call into the host's driver, which
    serialises it with every other process's context creation: the Timer's buffers and its first
    flush and tensor-core work (cuBLAS's handle and kernels), and a segment of each of the caching
    allocator's pools, left cached for the task's inputs and outputs."""
    import torch

    from cuda_agent.evaluate.locks import DeviceLock

    held = (DeviceLock(lock).shared(600, required=False, poll=0.01, queue=False) if lock is not None
            else contextlib.nullcontext())
    with held:
        torch.empty(1, device="cuda")
        if full:
            from cuda_agent.evaluate.timing import Timer

            timer = Timer(torch.device("cuda", torch.cuda.current_device()))
            timer.flush()
            timer.touch(spin=False)
            large = torch.empty(WARM_SEGMENT_BYTES, dtype=torch.uint8, device="cuda")
            small = torch.empty(1 << 16, dtype=torch.uint8, device="cuda")
            del large, small  # freed into torch's cache, not to the driver
            keep_warm_timer(timer)
        torch.cuda.synchronize()


def exit_with_harness() -> None:
    """End this worker, and the processes of its session (what the candidate started), as soon as
    the process that started it is gone. A worker that waits for a command sees its channel close,
    but one busy in a command (a large reference built, a candidate that hangs) would run on,
    holding memory and a GPU, after its harness was killed (SIGKILL, the OOM killer, a deadline)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(HARNESS_WATCH_S)
            if os.getppid() != parent:
                try:
                    if os.getpgid(0) == os.getpid():  # a worker leads its own group (process.py, zygote)
                        os.killpg(0, signal.SIGKILL)
                finally:
                    os._exit(1)

    threading.Thread(target=watch, name="cuda-agent-harness-watch", daemon=True).start()


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cuda_agent.evaluate.worker")
    p.add_argument("role")
    p.add_argument("--cuda", action="store_true", help="a spare of a GPU's pool: make its CUDA context ahead")
    p.add_argument("--warm-device", action="store_true", help="with --cuda: also warm the timer and allocator")
    p.add_argument("--warm-guard", action="store_true", help="warm the op guard before saying ready")
    p.add_argument("--lock", default=None, help="the device lock's base path (held shared while warming)")
    p.add_argument("--cpus", default=None, help="the CPUs to run on (a GPU's NUMA node)")
    p.add_argument("--handler", default=None, help="MODULE:CLASS serving a role other than the evaluator's")
    return p.parse_args(argv)


def handler_for(role: str, handler: str | None) -> Any:
    """The object whose `cmd_*` methods serve `role`."""
    if handler is not None:
        module, _, name = handler.partition(":")
        return getattr(importlib.import_module(module), name)()
    if role == "judge":
        from cuda_agent.evaluate.worker.judge import Judge

        return Judge()
    from cuda_agent.evaluate.worker.runner import Runner

    return Runner(baseline=role in ("eager", "compile"))


def main(argv: list[str] | None = None) -> None:
    exit_with_harness()  # first: the guard's thread count is taken after it
    args = parse_args(sys.argv[1:] if argv is None else argv)
    role = args.role
    global _CHANNEL
    fd = int(os.environ.pop("CUDA_AGENT_CHANNEL_FD"))
    chan = _CHANNEL = Channel(socket.socket(fileno=fd))
    if args.cpus:  # a spare of a GPU's pool: run on that GPU's NUMA node
        from cuda_agent.evaluate.device import parse_cpulist

        try:
            os.sched_setaffinity(0, parse_cpulist(args.cpus))
        except (OSError, ValueError):
            pass  # a placement, not a requirement
    import torch  # noqa: F401  (warm before the first command)

    if role == "candidate" or (role == "spare" and args.warm_guard):
        warm_guard()
    if role == "spare" and args.cuda:
        warm_cuda(args.lock, full=args.warm_device)
    name_process(role)
    chan.send({"ok": True, "ready": role, "pid": os.getpid()})
    if role == "spare":
        role = become(chan)
        name_process(role)
    serve(handler_for(role, args.handler), chan)
    sys.stdout.flush()
    sys.stderr.flush()
    # The harness has the whole output at EOF, before the CUDA context goes (process.close_all).
    os.close(1)
    os.close(2)
    os._exit(0)  # skip interpreter teardown: CUDA IPC and extension destructors can hang or crash it
