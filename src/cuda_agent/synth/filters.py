"""The filters: drafted tasks run in probe processes (`probe.py`), several at a time over the GPUs,
each with a time limit; a draft that hangs or crashes its process is rejected (`timeout`, `crash`)
and the process replaced. A draft that runs out of memory while other probes share its GPU is probed
again alone on it (`locks.Gate`). `fit` adds the batch calibration: a draft outside the runtime window whose
work scales with `batch_size` is rescaled towards the window's geometric middle and probed again.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import selectors
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cuda_agent.evaluate.locks import DeviceLock, Gate
from cuda_agent.synth.render import set_batch

# The evaluator's default tolerances: a task must be judged the way candidates will be.
ATOL = RTOL = 1e-2
# Default runtime windows (eager ms per call). CUDA: the paper's. CPU: shorter at the top, so that a
# run on a laptop or CI stays quick; the bottom keeps launch-overhead-only tasks out.
WINDOWS = {"cuda": (1.0, 100.0), "cpu": (0.5, 50.0)}
# Memory a rescaled task may use at its peak (CUDA: measured; CPU: estimated from inputs and output).
MEMORY_CAP = {"cuda": 24 << 30, "cpu": 1 << 30}
_BATCH = re.compile(r"^batch_size = (\d+)$", re.MULTILINE)


@dataclass
class Verdict:
    ok: bool
    reason: str | None = None
    message: str = ""
    source: str = ""  # the source probed last (after any rescaling)
    facts: dict[str, Any] = field(default_factory=dict)  # eager_ms, compile_ms, peak_bytes, out_shapes
    batch: int | None = None
    rescaled: int = 0  # how many times the batch was changed


class _Worker:
    def __init__(self, gpu: str | None, log: Path):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        self.gpu = gpu
        self._log = open(log, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "cuda_agent.synth.probe"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, env=env)
        self._buf = b""
        ready = self._read(120.0)
        if ready is None or "ready" not in ready:
            self.kill()
            raise RuntimeError(f"a probe process did not start; see {log}")

    def _read(self, timeout: float) -> dict | None:
        """One reply line, or None on timeout or end of file."""
        end = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = end - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def ask(self, req: dict, timeout: float) -> dict | None:
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self._read(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log.close()


class ProbePool:
    """`workers` probe processes spread over `gpus` (None: the CPU backend), used by many threads."""

    def __init__(self, device: str, workers: int, gpus: Sequence[str | None], log: Path, lock_dir: Path,
                 timeout_s: float = 300.0, budget_s: float = 0.2, window_ms: tuple[float, float] | None = None):
        self.device, self.timeout_s, self.budget_s = device, timeout_s, budget_s
        self.window_ms = window_ms or WINDOWS[device]
        self.log, self.lock_dir = log, lock_dir
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._guard = threading.Lock()
        slots = [gpus[i % len(gpus)] for i in range(workers)]
        self._gates = {g: Gate(DeviceLock.of(lock_dir, device, g, role="gate")) for g in set(slots)}
        self.reruns = 0  # drafts probed again alone after running out of memory beside others
        for w in _start_all(slots, log):
            self._all.append(w)
            self._idle.put(w)

    def probe(self, source: str, name: str) -> dict[str, Any]:
        worker = self._idle.get()
        lock = DeviceLock.of(self.lock_dir, self.device, worker.gpu).base  # the evaluator's lock of that device
        req = {"id": name, "name": name, "source": source, "device": self.device, "window_ms": list(self.window_ms),
               "atol": ATOL, "rtol": RTOL, "budget_s": self.budget_s, "lock": lock}
        gate = self._gates[worker.gpu]
        with gate.shared():
            reply = worker.ask(req, self.timeout_s)
        # a neighbour (a probe here, or any work of another process on the device) may have held it
        if reply is not None and reply.get("reason") == "out_of_memory":
            with gate.alone():
                with self._guard:
                    self.reruns += 1
                reply = worker.ask(req, self.timeout_s)
        if reply is None:  # hung or died: replace the process
            died = worker.proc.poll() is not None
            worker.kill()
            with self._guard:
                self._all.remove(worker)
            fresh = _Worker(worker.gpu, self.log)
            with self._guard:
                self._all.append(fresh)
            self._idle.put(fresh)
            if died:
                return {"ok": False, "reason": "crash", "message": "the task killed its process (see probe.log)"}
            return {"ok": False, "reason": "timeout", "message": f"no verdict within {self.timeout_s:.0f} s"}
        self._idle.put(worker)
        return reply

    def fit(self, source: str, name: str, scalable: bool, rounds: int = 3) -> Verdict:
        """Probe `source`; while it is outside the runtime window and scalable, rescale its batch."""
        lo, hi = self.window_ms
        batch = _batch(source) if scalable else None
        rescaled = 0
        while True:
            r = self.probe(source, name)
            facts = {k: r[k] for k in ("eager_ms", "compile_ms", "peak_bytes", "out_shapes") if k in r}
            if r["ok"] or r["reason"] not in ("too_fast", "too_slow") or batch is None or rescaled >= rounds:
                return Verdict(r["ok"], r.get("reason"), r.get("message", ""), source, facts, batch, rescaled)
            new = rescale(batch, r["eager_ms"], r.get("peak_bytes", 0), (lo, hi), MEMORY_CAP[self.device])
            if new == batch:
                return Verdict(False, r["reason"], r["message"] + f" (batch {batch} cannot be rescaled further)",
                               source, facts, batch, rescaled)
            batch, source, rescaled = new, set_batch(source, new), rescaled + 1

    def close(self) -> None:
        with self._guard:
            for w in self._all:
                w.kill()
            self._all.clear()


def _start_all(slots: Sequence[str | None], log: Path) -> list[_Worker]:
    """Start the probe processes in parallel (each imports torch: seconds)."""
    out: list[_Worker | BaseException] = [None] * len(slots)  # type: ignore[list-item]

    def start(i: int) -> None:
        try:
            out[i] = _Worker(slots[i], log)
        except BaseException as exc:  # noqa: BLE001
            out[i] = exc

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(slots))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [x for x in out if isinstance(x, BaseException)]
    if failed:
        for w in out:
            if isinstance(w, _Worker):
                w.kill()
        raise failed[0]
    return out  # type: ignore[return-value]


def _batch(source: str) -> int | None:
    found = _BATCH.findall(source)
    return int(found[0]) if len(found) == 1 else None


def rescale(batch: int, eager_ms: float, peak_bytes: int, window: tuple[float, float], memory_cap: int) -> int:
    """The batch that should bring `eager_ms` to the window's geometric middle, assuming time grows
    with the batch, within the memory cap (peak memory assumed to grow with the batch too)."""
    lo, hi = window
    target = math.sqrt(lo * hi)
    want = batch * target / max(eager_ms, 1e-6)
    if peak_bytes > 0:
        want = min(want, batch * memory_cap / peak_bytes)
    return max(1, min(int(round(want)), 1 << 20))
