"""The warm pool: worker processes started ahead of need, so that an evaluation does not wait for
an interpreter to import torch."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from cuda_agent.evaluate.isolate import CandidateBox
from cuda_agent.evaluate.locks import DeviceLock
from cuda_agent.evaluate.process import Worker, WorkerFailure, close_all, scrubbed_env
from cuda_agent.evaluate.zygote import Zygote


def _become(worker: Worker, role: str, cwd: Path, env: dict[str, str], timeout: float) -> Worker:
    """A spare takes its role; a sandboxed one works in its sandbox's folder, whatever `cwd` says."""
    if worker.box is not None:
        return worker.become(role, worker.box.stage, {**env, **worker.box.env()}, timeout)
    return worker.become(role, cwd, env, timeout)


class WarmPool:
    """Spare worker processes, torch already imported (and, with `cuda`, the CUDA context of the GPU
    that `env` makes visible created), handed out as the judge or a runner of the next evaluation
    (`Worker.become`). A runner serves one evaluation only; a judge may serve several
    (`give_back`). A replacement starts as soon as a spare is taken, so its start overlaps the
    running evaluations. An evaluation takes two workers (four when it measures its baselines):
    `size` should cover what the evaluations running at once take while replacements start.

    Half the spares (rounded up) also warm the op guard (its first call imports torch._dynamo and
    sympy, which costs more CPU than importing torch); they go to candidates, the others to the
    judge and the baseline runners, which never run under the guard. Either kind serves the other's
    role when none of its own has started.

    With `zygote` (the default), the pool starts a zygote (zygote.py): once it is warm, spares are
    forked from it with torch imported and the op guard warmed, instead of each importing torch
    afresh. While it warms up, the pool waits for it (`ZYGOTE_WAIT_S` at the most) rather than
    starting its spares as fresh interpreters: a whole pool of interpreters importing torch at once
    costs a loaded machine more than the zygote's one warm-up. If it dies or is late, spares start
    as fresh interpreters."""

    ZYGOTE_WAIT_S = 60.0

    def __init__(self, env: dict[str, str] | None = None, size: int = 2, output_limit: int = 16384,
                 cuda: bool = False, lock: DeviceLock | None = None, zygote: bool = True,
                 warm_device: bool = False, cpus: set[int] | None = None,
                 box: Callable[[], CandidateBox] | None = None):
        """`lock`: the device's lock, held shared while a spare creates its CUDA context.
        `warm_device`: spares also warm what a worker's first command would (`EvalConfig.warm_spares`).
        `cpus`: the CPUs the spares run on (`EvalConfig.pin_cpus`); default: any. `box`: makes the
        sandbox of each spare for candidates (isolate.py): those spares serve candidates only, the
        others never serve one."""
        self.box = box
        self.env = scrubbed_env(env or {})
        self.size, self.output_limit = size, output_limit
        flags: list[str] = []  # the spares' command line (worker/serve.py)
        if cuda:
            flags += ["--cuda", "--warm-device"] if warm_device else ["--cuda"]
        if lock:
            flags += ["--lock", lock.base]
        if cpus:
            flags += ["--cpus", ",".join(map(str, sorted(cpus)))]
        self.flags = tuple(flags)
        self.device_lock = lock
        self.dir = Path(tempfile.mkdtemp(prefix=f"cuda-agent-spare-{os.getpid()}-"))
        self.lock = threading.Lock()
        self.spares: list[Worker] = []
        self.judges: list[Worker] = []  # judges of finished evaluations, kept for the next (give_back)
        self.closed = False
        self._lean = 0  # evaluations that asked for the pool's device memory (`lean`)
        self.leaned = 0  # times the pool gave up its spares and kept judges for one (`lean`)
        self.taken = self.cold = self.forked = self.reused = 0
        self.zygote = Zygote(self.env, self.dir) if zygote and size > 0 else None
        self._zygote_by = time.monotonic() + self.ZYGOTE_WAIT_S
        if self._zygote_starting():
            threading.Thread(target=self._fill_when_warm, name="cuda-agent-pool-fill", daemon=True).start()
        else:
            self.fill()

    def _zygote_starting(self) -> bool:
        """Is the zygote still warming up (alive, not ready, and not yet late)?"""
        z = self.zygote
        return (z is not None and not z.ready.is_set() and not z.dead and z.proc.poll() is None
                and time.monotonic() < self._zygote_by)

    def _wait_for_zygote(self) -> None:
        while self._zygote_starting() and not self.closed:
            self.zygote.ready.wait(0.2)

    def _fill_when_warm(self) -> None:
        self._wait_for_zygote()
        self.fill()

    def spawn(self, guard: bool = True) -> Worker:
        """Start a spare (`guard`: one for candidates, which warms the op guard, in its sandbox
        where the pool has one); the caller keeps it."""
        box = self.box() if guard and self.box is not None else None
        flags = self.flags
        if box is not None:  # (the device lock's files are not in a sandbox's view)
            flags = tuple(f for i, f in enumerate(flags) if f != "--lock" and (i == 0 or flags[i - 1] != "--lock"))
        w = Worker("spare", self.dir, self.env, self.output_limit,
                   *flags, *(("--warm-guard",) if guard else ()), zygote=self.zygote, box=box)
        self.forked += w.forked
        return w

    def fill(self) -> None:
        """Start spares until the pool holds `size` of them, half of each kind (none while the
        zygote warms up: the pool fills once it is warm)."""
        if self._zygote_starting():
            return
        with self.lock:
            if self._lean:
                return
            for guard, want in ((True, self.size - self.size // 2), (False, self.size // 2)):
                while not self.closed and sum(w.guard_warm is guard for w in self.spares) < want:
                    self.spares.append(self.spawn(guard))

    def wait_warm(self, timeout: float) -> bool:
        """Wait until the pool holds `size` spares that have finished starting; False on timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.closed:
            with self.lock:
                spares = list(self.spares)
            if len(spares) >= self.size and all(w.started() for w in spares):
                return True
            time.sleep(0.2)
        return False

    def take(self, role: str, cwd: Path, env: dict[str, str], timeout: float) -> Worker:
        """A worker for `role` in `cwd` with `env`: a kept judge, a started spare, or a fresh process."""
        if role == "judge":
            with self.lock:
                judge = self.judges.pop() if self.judges and not self.closed else None
            if judge is not None:
                try:
                    judge.become(role, cwd, env, timeout)
                except WorkerFailure:  # it died while kept: a spare instead
                    judge.close()
                else:
                    with self.lock:
                        self.taken += 1
                        self.reused += 1
                    return judge
        with self.lock:
            if self.closed:
                raise RuntimeError("this WarmPool is closed")
            # A spare that has finished starting, of the role's kind, else of the other kind; else the
            # oldest of the role's kind (the nearest to ready), else the oldest.
            guard = role == "candidate"
            boxed = guard and self.box is not None  # only sandboxed spares serve candidates, and only them
            fits = [i for i, w in enumerate(self.spares) if (w.box is not None) == boxed]
            order = sorted(fits, key=lambda i: (
                not self.spares[i].started(), self.spares[i].guard_warm is not guard, i))
            worker = self.spares.pop(order[0]) if order else None
            self.taken += 1
        self.fill()  # the replacement starts while this evaluation runs
        if worker is not None:
            try:
                return _become(worker, role, cwd, env, timeout)
            except WorkerFailure:  # it died while waiting: start a fresh one
                worker.close()
        self._wait_for_zygote()  # a fork of it, once warm, starts sooner than a fresh interpreter
        with self.lock:
            self.cold += 1
        return _become(self.spawn(guard), role, cwd, env, timeout)

    def give_back(self, judge: Worker) -> bool:
        """Keep a judge that has forgotten its evaluation and may judge another (worker/judge.py,
        `Judge.cmd_reset`) for the next evaluation; False when the pool keeps enough already (the
        caller closes it). Each kept judge holds a CUDA context and what torch caches of device
        memory, so at most half the pool's size are kept."""
        with self.lock:
            if self.closed or self._lean or len(self.judges) >= max(self.size // 2, 1):
                return False
            self.judges.append(judge)
            return True

    @contextlib.contextmanager
    def lean(self):
        """For an evaluation that needs more device memory than the GPU has beside the pool (a large
        task on a GPU whose warm pool holds much of its memory:
        docs/measured/2026-12-04-fresh-h200.md, call 7): the spares and kept judges that are idle
        are closed, their processes gone (each holds a CUDA context, a kept judge also torch's
        cached memory), and none start or are kept until the last such evaluation ends; meanwhile an
        evaluation's workers start cold. Then the pool fills again."""
        with self.lock:
            self._lean += 1
            idle, self.spares, self.judges = self.spares + self.judges, [], []
            if self._lean == 1:
                self.leaned += 1
        try:
            if idle:
                close_all(idle, self.device_lock).join()  # (not during a timing)
            yield
        finally:
            with self.lock:
                self._lean -= 1
            self.fill()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            spares, self.spares = self.spares + self.judges, []
            self.judges = []
        for w in spares:
            w.close()
        if self.zygote is not None:
            self.zygote.close()
        shutil.rmtree(self.dir, ignore_errors=True)
