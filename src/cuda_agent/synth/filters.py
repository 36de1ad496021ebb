"""The filters: drafted tasks run in probe processes (`probe.py`), several at a time over the GPUs,
each with a time limit. The probes are workers of the evaluator's process layer (`process.Worker`):
a scrubbed environment (no API keys reach a drafted task), a private channel, their process group
killed when a draft hangs or crashes them (`timeout`, `crash`), then replaced. A drafted task is
code nobody has read (an LLM's, under `--composer llm`): each probe process runs in an
operating-system sandbox of its own, as candidates do (`evaluate/isolate.py`; `isolation`
required by default), and one that a draft left a process running in is replaced. The device lock
its timing needs lives in the evaluator's cache, which the sandbox hides: the pool holds it for the
probe on request. A draft that runs out
of memory while other probes share its GPU is probed again alone on it (`locks.Gate`). `fit` adds
the batch calibration: a draft outside the runtime window whose work scales with `batch_size` is
rescaled towards the window's geometric middle and probed again. Drafts are judged with the
evaluator's default tolerances (`EvalConfig`), as candidates of the task will be.
"""

from __future__ import annotations

import contextlib
import math
import queue
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cuda_agent import sandbox
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.isolate import CandidateBox
from cuda_agent.evaluate.locks import DeviceLock, Gate
from cuda_agent.evaluate.process import Worker, WorkerFailure, scrubbed_env
from cuda_agent.evaluate.result import Code
from cuda_agent.synth.config import WINDOWS
from cuda_agent.synth.probe import HARNESS_LOCK
from cuda_agent.synth.render import set_batch

# Memory a rescaled task may use at its peak (CUDA: measured; CPU: estimated from inputs and output).
MEMORY_CAP = {"cuda": 24 << 30, "cpu": 1 << 30}
START_S = 120.0  # seconds a probe process may take to start (it imports torch)
HANDLER = "cuda_agent.synth.probe:Prober"
_BATCH = re.compile(r"^batch_size = (\d+)$", re.MULTILINE)


@dataclass
class Verdict:
    ok: bool
    reason: str | None = None  # a `Code`'s value
    message: str = ""
    source: str = ""  # the source probed last (after any rescaling)
    facts: dict[str, Any] = field(default_factory=dict)  # eager_ms, compile_ms, peak_bytes, out_shapes
    batch: int | None = None
    rescaled: int = 0  # how many times the batch was changed


class ProbePool:
    """`workers` probe processes spread over `gpus` (None: the CPU backend), used by many threads.
    What the drafts print goes to `log`."""

    def __init__(self, device: str, workers: int, gpus: Sequence[str | None], log: Path, lock_dir: Path,
                 timeout_s: float = 300.0, budget_s: float = 0.2, window_ms: tuple[float, float] | None = None,
                 tolerance: EvalConfig | None = None, isolation: str = "required"):
        """`lock_dir`: the cache directory whose device locks the probes time under (the
        evaluator's). `tolerance`: the EvalConfig whose atol and rtol judge the drafts (default:
        the evaluator's defaults). `isolation`: auto, required or off, as `EvalConfig.isolation`
        (required raises `sandbox.IsolationUnavailable` on a machine without a sandbox)."""
        self.sandbox = sandbox.resolve(isolation, "synth's probes (--isolation required)")
        self.device, self.timeout_s, self.budget_s = device, timeout_s, budget_s
        self.window_ms = window_ms or WINDOWS[device]
        tolerance = tolerance or EvalConfig(device=device)
        self.atol, self.rtol = tolerance.atol, tolerance.rtol
        self.log, self.lock_dir = log, lock_dir
        self.dir = Path(tempfile.mkdtemp(prefix="cuda-agent-probe-"))  # the probes' working directory
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._all: list[Worker] = []
        self._gpu: dict[Worker, str | None] = {}
        self._guard = threading.Lock()
        slots = [gpus[i % len(gpus)] for i in range(workers)]
        self._gates = {g: Gate(DeviceLock.of(lock_dir, device, g, role="gate")) for g in set(slots)}
        self.reruns = 0  # drafts probed again alone after running out of memory beside others
        try:
            for w in self._start_all(slots):
                self._idle.put(w)
        except BaseException:
            self.close()
            raise

    def _spawn(self, gpu: str | None) -> Worker:
        extra = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}
        box = None
        if self.sandbox is not None:
            box = CandidateBox(self.sandbox, self.lock_dir, self.dir, gpu=self.device == "cuda")
            extra.update(box.env())
        try:
            w = Worker("probe", self.dir, scrubbed_env(extra), 0, "--handler", HANDLER, log=self.log, box=box)
        except BaseException:
            if box is not None:
                box.close()
            raise
        with self._guard:
            self._all.append(w)
            self._gpu[w] = gpu
        return w

    def _start_all(self, slots: Sequence[str | None]) -> list[Worker]:
        """Start the probe processes and wait until each has said it is ready (each imports torch:
        seconds, in parallel)."""
        workers = [self._spawn(g) for g in slots]
        failed: list[str] = []

        def ready(w: Worker) -> None:
            try:
                w.call("ping", START_S)
            except WorkerFailure as f:
                failed.append(f.message)

        threads = [threading.Thread(target=ready, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failed:
            raise RuntimeError(f"a probe process did not start ({failed[0][:300]}); see {self.log}")
        return workers

    def probe(self, source: str, name: str) -> dict[str, Any]:
        """One draft's verdict: {accepted, reason, message, facts...} (probe.Prober.cmd_probe)."""
        worker = self._idle.get()
        gpu = self._gpu[worker]
        lock = DeviceLock.of(self.lock_dir, self.device, gpu)  # the evaluator's lock of that device
        req = {"name": name, "source": source, "device": self.device, "window_ms": list(self.window_ms),
               "atol": self.atol, "rtol": self.rtol, "budget_s": self.budget_s,
               "lock": HARNESS_LOCK if worker.box is not None else lock.base}
        gate = self._gates[gpu]
        try:
            with gate.shared():
                reply = self._call(worker, lock, req)
            # a neighbour (a probe here, or any work of another process on the device) may have held it
            if reply["reason"] == Code.OUT_OF_MEMORY.value:
                with gate.alone():
                    with self._guard:
                        self.reruns += 1
                    reply = self._call(worker, lock, req)
        except WorkerFailure as f:  # hung, died or broke the protocol: replace the process
            self._replace(worker)
            reason = {Code.TIMEOUT: Code.TIMEOUT, Code.CRASH: Code.CRASH, Code.EARLY_EXIT: Code.CRASH}.get(
                f.code, Code.PROBE_ERROR)
            message = (f"no verdict within {self.timeout_s:.0f} s" if reason is Code.TIMEOUT
                       else f"the task killed its process: {f.message}")
            return {"accepted": False, "reason": reason.value, "message": message}
        if worker.strays():  # the draft left a process running: the next draft must not meet it
            self._replace(worker)
        else:
            self._idle.put(worker)
        return reply

    def _call(self, worker: Worker, lock: DeviceLock, req: dict[str, Any]) -> dict[str, Any]:
        """One probe command; a sandboxed probe's requests for the device lock are held here, and
        released when the command ends however it ends."""
        with contextlib.ExitStack() as held:
            def requests(kind: str, args: dict[str, Any]) -> dict[str, Any]:
                if kind != "device_lock":
                    return {"ok": False, "error": f"unknown request {kind!r}"}
                if args.get("hold"):
                    held.enter_context(lock.exclusive(600))
                else:
                    held.close()
                return {"ok": True}

            return worker.call("probe", self.timeout_s, requests=requests, **req)

    def _replace(self, worker: Worker) -> None:
        worker.close()
        with self._guard:
            self._all.remove(worker)
            gpu = self._gpu.pop(worker)
        self._idle.put(self._spawn(gpu))

    def fit(self, source: str, name: str, scalable: bool, rounds: int = 3) -> Verdict:
        """Probe `source`; while it is outside the runtime window and scalable, rescale its batch."""
        lo, hi = self.window_ms
        batch = _batch(source) if scalable else None
        rescaled = 0
        while True:
            r = self.probe(source, name)
            facts = {k: r[k] for k in ("eager_ms", "compile_ms", "peak_bytes", "out_shapes") if k in r}
            outside = r["reason"] in (Code.TOO_FAST.value, Code.TOO_SLOW.value)
            if r["accepted"] or not outside or batch is None or rescaled >= rounds:
                return Verdict(r["accepted"], r["reason"], r["message"], source, facts, batch, rescaled)
            new = rescale(batch, r["eager_ms"], r.get("peak_bytes", 0), (lo, hi), MEMORY_CAP[self.device])
            if new == batch:
                return Verdict(False, r["reason"], r["message"] + f" (batch {batch} cannot be rescaled further)",
                               source, facts, batch, rescaled)
            batch, source, rescaled = new, set_batch(source, new), rescaled + 1

    def close(self) -> None:
        with self._guard:
            workers, self._all = self._all, []
        for w in workers:
            w.close()
        shutil.rmtree(self.dir, ignore_errors=True)


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
