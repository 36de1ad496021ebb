"""Who may use a device while an evaluation times on it.

Timing is only fair when nothing else runs on the device: another evaluation's correctness trials on
the same GPU share its SMs and memory bandwidth, and would make the same candidate's speedup vary
several-fold between evaluations. So a device has a readers-writer lock: an evaluation's timed rounds hold it exclusively; the rest of
the GPU work of every evaluation (the reference's setup, weights, correctness trials, warm-up calls,
checks, process teardown) and a warm worker's CUDA start hold it shared. Writers come first: a
writer takes the turnstile before waiting for the readers to leave, and new readers pass through
the turnstile, so a stream of readers cannot starve timing.

The lock is two files (`flock`) under the cache directory, so it holds across every process of the
machine that shares the cache; this module imports nothing heavy, for the workers' sake.

`Gate` is the admission of whole evaluations to a device, for the second try, alone, of one that
ran short of memory beside others: a lock of the same kind (its own files), held shared for a
whole evaluation and exclusively by the second try, so that neighbours in other processes (two
`cuda-agent bench` on one GPU, reward workers) leave the device to it too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Iterator

from cuda_agent.evaluate.cache_layout import LOCKS


class LockTimeout(Exception):
    pass


class DeviceLock:
    def __init__(self, base: str | os.PathLike):
        """`base`: the lock's path without suffix, e.g. `<cache>/locks/device-cuda-0` (a string, so
        it can be handed to a worker process)."""
        self.base = str(base)

    @classmethod
    def of(cls, cache_dir: str | os.PathLike, device: str, gpu: str | None = None,
           role: str = "device") -> "DeviceLock":
        """The lock of GPU `gpu` (an index or UUID as CUDA_VISIBLE_DEVICES names it) when `device` is
        "cuda", else of the CPU backend, shared by every process using `cache_dir`. `role`: "device"
        (timing), "gate" (`Gate`'s admission of evaluations) or "memory" (the base of a
        `MemoryLedger`'s file): independent of each other."""
        name = f"cuda-{gpu}" if device == "cuda" else "cpu"
        return cls(Path(cache_dir) / LOCKS / f"{role}-{name}")

    def _open(self) -> tuple:
        Path(self.base).parent.mkdir(parents=True, exist_ok=True)
        turn = open(self.base + ".turn", "a")
        try:
            return turn, open(self.base + ".lock", "a")
        except OSError:
            turn.close()
            raise

    @contextlib.contextmanager
    def exclusive(self, timeout: float, poll: float = 0.002) -> Iterator[None]:
        """Held alone: no other evaluation uses the device meanwhile."""
        turn, main = self._open()
        with turn, main:
            end = time.monotonic() + timeout
            _acquire(turn, fcntl.LOCK_EX, end, poll)
            try:
                _acquire(main, fcntl.LOCK_EX, end, poll)
            finally:
                fcntl.flock(turn, fcntl.LOCK_UN)  # readers may queue on `main` again
            try:
                yield
            finally:
                fcntl.flock(main, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def shared(self, timeout: float, required: bool = True, poll: float = 0.002,
               queue: bool = True) -> Iterator[bool]:
        """Held with other readers, never during someone's timing. Yields whether it is held: with
        `required=False`, a timeout or a lock file that cannot be opened goes on without it (for
        work that must happen regardless). `poll`: seconds between tries (work that is in no hurry
        polls less, so as not to wake cores while someone times). `queue=False`: enter whenever no
        timed round is running, ahead of rounds that are waiting; for short work that would
        otherwise wait behind a whole queue of rounds (a spare's CUDA start: with several
        evaluations per GPU, some round nearly always waits)."""
        try:
            turn, main = self._open()
        except OSError:
            if required:
                raise
            yield False
            return
        with turn, main:
            end = time.monotonic() + timeout
            try:
                if queue:
                    _acquire(turn, fcntl.LOCK_EX, end, poll)  # waits behind a writer that is waiting
                    fcntl.flock(turn, fcntl.LOCK_UN)
                _acquire(main, fcntl.LOCK_SH, end, poll)
            except LockTimeout:
                if required:
                    raise
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(main, fcntl.LOCK_UN)


def _acquire(f, mode: int, end: float, poll: float = 0.002) -> None:
    """flock, tried every `poll` seconds until the monotonic deadline `end`."""
    while True:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > end:
                raise LockTimeout(f"{f.name}: not free in time") from None
            time.sleep(poll)


class Gate:
    """Admission of work to one device: jobs share it (`shared`); a job run `alone` waits until the
    running ones are done and keeps new ones out until it ends (waiting solos go first: no
    starvation). For a second try, alone, of a job that ran out of memory beside others
    (`Evaluator`, the synth probes). Within a process by a condition; with `lock` (a DeviceLock of
    role "gate"), across the processes that share it as well: the threads of this process first,
    then the lock's files, so a solo here also waits for, and keeps out, other processes' jobs."""

    WAIT_S = 7 * 24 * 3600.0  # the file lock's wait: as long as the jobs ahead take
    POLL_S = 0.05  # a waiting job polls the file lock this often (whole evaluations are slow)

    def __init__(self, lock: DeviceLock | None = None) -> None:
        self._cond = threading.Condition()
        self.running = 0  # jobs of this process inside, shared or alone
        self._solos = 0  # runs alone, waiting or inside
        self._solo_inside = False
        self.lock = lock

    @contextlib.contextmanager
    def shared(self):
        with self._cond:
            self._cond.wait_for(lambda: self._solos == 0)
            self.running += 1
        try:
            if self.lock is None:
                yield
            else:
                with self.lock.shared(self.WAIT_S, poll=self.POLL_S):
                    yield
        finally:
            with self._cond:
                self.running -= 1
                self._cond.notify_all()

    @property
    def solos(self) -> int:
        """Jobs of this process to run alone, waiting or inside."""
        return self._solos

    @contextlib.contextmanager
    def alone(self):
        with self._cond:
            self._solos += 1
            self._cond.wait_for(lambda: self.running == 0 and not self._solo_inside)
            self.running += 1
            self._solo_inside = True
        try:
            if self.lock is None:
                yield
            else:
                with self.lock.exclusive(self.WAIT_S, poll=self.POLL_S):
                    yield
        finally:
            with self._cond:
                self.running -= 1
                self._solos -= 1
                self._solo_inside = False
                self._cond.notify_all()


class MemoryLedger:
    """Device memory promised to the evaluations running on one GPU, across every process that
    shares the cache directory: a JSON map {holder: bytes} in a file, read and written under an
    exclusive flock. `hold(need)` waits until what is promised plus `need` fits in `budget` bytes
    (or nothing else is promised: a job larger than the budget runs alone rather than never), then
    promises it for the job's length. Holders of processes that have died are dropped. A need of 0
    (a task not yet measured whose inputs' bytes are unknown) is admitted at once; if it then runs
    short beside others, its second try alone (`Gate`) holds more than the whole budget.

    A job larger than the budget that has to wait is queued in the map (`WAITING`, with when it
    began to wait). While any job is queued, no job that is not is admitted; queued jobs go in the
    order they began to wait. So the largest jobs run one after another once what was admitted
    before them ends, instead of each waiting for a moment when a stream of smaller ones leaves
    nothing promised. Smaller jobs are not queued: in order of arrival, each large job between two
    small ones would empty the GPU (a measured batch replayed through each policy:
    docs/measured/2026-12-04-fresh-h200.md, "The ledger now queues them")."""

    POLL_S = 0.1
    WAITING = "waiting|"  # key prefix of a queued job: WAITING + ns + "|" + holder

    def __init__(self, path: str | os.PathLike, budget: int) -> None:
        self.path = Path(path)
        self.budget = budget

    @contextlib.contextmanager
    def hold(self, need: int) -> Iterator[None]:
        if need <= 0:
            yield
            return
        me = f"{os.getpid()}:{_started(os.getpid())}:{threading.get_ident()}:{time.monotonic_ns()}"
        queued = f"{self.WAITING}{time.time_ns():020d}|{me}"  # (zero-padded: the keys sort in the order of waiting)
        admitted = False

        def admit(held: dict[str, int]) -> bool:
            """Admit `me` (True: write the map), queue it (True), or leave the map as it is (False)."""
            nonlocal admitted
            waiting = sorted(k for k in held if k.startswith(self.WAITING))
            verdict = self._verdict(need, self._promised(held), waiting, queued)
            if verdict == "admit":
                held.pop(queued, None)
                held[me] = need
                admitted = True
                return True
            if verdict == "queue" and queued not in held:
                held[queued] = need
                return True
            return False

        try:
            while True:
                self._update(admit)
                if admitted:
                    break
                time.sleep(self.POLL_S)
            yield
        finally:
            self._update(lambda held: (held.pop(me, None), held.pop(queued, None)) != (None, None))

    def _verdict(self, need: int, promised: int, waiting: list[str], queued: str) -> str:
        """The admission rule: "admit" a job of `need` bytes now, "queue" it, or "wait"; `promised`:
        bytes promised to live holders; `waiting`: the queued jobs' keys in order; `queued`: this
        job's key (in `waiting` once queued; it holds when the job began to wait)."""
        ahead = waiting.index(queued) > 0 if queued in waiting else bool(waiting)
        if not ahead and (promised + need <= self.budget or not promised):
            return "admit"
        return "queue" if need > self.budget else "wait"

    def promised(self) -> int:
        """Bytes promised now (to live holders; not to jobs queued)."""
        seen: dict[str, int] = {}
        self._update(lambda held: seen.update(held) or False)
        return self._promised(seen)

    def _promised(self, held: dict[str, int]) -> int:
        """Bytes the map promises to holders (its queued jobs' entries aside)."""
        return sum(v for k, v in held.items() if not k.startswith(self.WAITING))

    def _update(self, change) -> bool:
        """Under the flock: read the map, drop dead holders, call `change(map)`; write the map back
        when it returns True, and return that."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.seek(0)
                try:
                    held = {k: int(v) for k, v in json.loads(f.read() or "{}").items()}
                except (ValueError, TypeError, AttributeError):
                    held = {}  # a torn or foreign file: start again (holders re-promise on their next job)
                held = {k: v for k, v in held.items() if _alive(k.rsplit("|", 1)[-1])}
                ok = bool(change(held))
                if ok:
                    f.seek(0)
                    f.truncate()
                    f.write(json.dumps(held))
                    f.flush()
                return ok
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def proc_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (the state first), or [] where the
    process is gone or the file cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot), "" where unknown: with the pid, it
    names a process even after the pid is reused."""
    fields = proc_stat(pid)
    return fields[19] if len(fields) > 19 else ""


def _alive(holder: str) -> bool:
    """Is the process that made this promise still running (the same process, not a later one
    with its pid)?"""
    pid, _, rest = holder.partition(":")
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's live process
        pass
    started = rest.split(":", 1)[0]
    return not started or _started(int(pid)) in ("", started)
