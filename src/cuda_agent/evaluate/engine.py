"""The harness: one evaluation of a candidate against a task, from build to reward.

The harness process never imports candidate code, and does not need torch. It stages the candidate's
trusted files, builds its extension (build.py), starts the workers (worker.py) and drives them over
private channels: the *judge* holds the reference and decides correctness; the *candidate* runs the
code under test; when the baselines are not cached (baselines.py), two more runners time the
reference, eager and compiled, through the same commands. Every step has a deadline; a worker that
hangs, crashes or lies about the protocol ends the evaluation with a reason code, and its process
group is killed. The verdict and the reward are computed here, from what the judge established and
what the harness measured itself.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cuda_agent.evaluate import memory, policy
from cuda_agent.evaluate.baselines import BaselineCache, Baselines, baseline_candidate, baseline_key
from cuda_agent.evaluate.baselines import now as baselines_now
from cuda_agent.evaluate.build import BuildResult, _package_root, build_extension
from cuda_agent.evaluate.candidate import Candidate, stage
from cuda_agent.evaluate.channel import Channel, ChannelClosed, ChannelError, ChannelTimeout
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.device import cuda_arch, resolve_device
from cuda_agent.evaluate.locks import DeviceLock, LockTimeout
from cuda_agent.evaluate.result import Code, EvalResult, TimeStats
from cuda_agent.evaluate.reward import milestone_reward
from cuda_agent.evaluate.zygote import Zygote
from cuda_agent.evaluate.zygote import spawn as zygote_spawn
from cuda_agent.tasks import Task

ENV_KEEP = ("PATH", "HOME", "USER", "LANG", "TMPDIR", "LD_LIBRARY_PATH", "CC", "CXX",
            "TORCH_CUDA_ARCH_LIST", "TORCHINDUCTOR_CACHE_DIR")
ENV_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "LC_", "OMP_", "MKL_", "OPENBLAS_", "NCCL_")
# Inputs and outputs of one batch of calls kept at once, at most (the candidate's input slots live in
# /dev/shm on the CPU backend, often small in containers).
BATCH_BYTES = {"cuda": 1 << 30, "cpu": 256 << 20}
BATCH_MS = 5.0  # and about this much of calls
TIMING_FIT = 0.8  # share of the time left that the least timing must fit in (_too_slow_to_time)


def evaluate(task: Task, candidate: Candidate, config: EvalConfig | None = None) -> EvalResult:
    """Evaluate `candidate` on `task`. Never raises for anything the candidate does: every failure
    is a reason in the returned `EvalResult`."""
    return _Evaluation(task, candidate, config or EvalConfig()).run()


class WorkerFailure(Exception):
    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _BoundedReader(threading.Thread):
    """Drains a pipe, keeping its first and last `limit/2` bytes: floods cost memory no more."""

    def __init__(self, pipe, limit: int):
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


def _scrubbed_env(extra: dict[str, str]) -> dict[str, str]:
    """Workers get no secrets: only what compilers, CUDA and Python need (STYLE: pop, not unsetenv)."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)) and not k.startswith("CUDA_AGENT_")}
    env.update(PYTHONPATH=_package_root(), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", **extra)
    # The judge and the candidate take turns on the CPU; OpenMP threads that spin-wait after their
    # turn would steal cores from the other process's timed calls.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


class _Worker:
    def __init__(self, role: str, cwd: Path, env: dict[str, str], output_limit: int, *flags: str,
                 zygote: Zygote | None = None):
        """A fresh interpreter, or for a spare, a fork of `zygote` when it is warm (zygote.py)."""
        self.role, self.cwd = role, cwd
        forked = zygote_spawn(zygote, list(flags)) if zygote is not None and role == "spare" else None
        self.forked = forked is not None
        if forked is not None:
            self.proc, parent = forked
        else:
            parent, child = socket.socketpair()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cuda_agent.evaluate.worker", role, *flags],
                pass_fds=(child.fileno(),), cwd=cwd,
                env={**env, "CUDA_AGENT_CHANNEL_FD": str(child.fileno())},
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,
            )
            child.close()
        self.chan = Channel(parent)
        self.stdout = _BoundedReader(self.proc.stdout, output_limit)
        self.stderr = _BoundedReader(self.proc.stderr, output_limit)
        self.ready = False
        self.seq = 0
        self.guard_warm = role == "candidate" or "guard" in flags  # the op guard warmed at start (worker.main)

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

    def become(self, role: str, cwd: Path, env: dict[str, str], timeout: float) -> "_Worker":
        """Give a spare its role, directory and the evaluation's environment (worker._become)."""
        self.call("become", timeout, role=role, cwd=str(cwd), env=env)
        self.role, self.cwd = role, cwd
        return self

    def call(self, cmd: str, timeout: float, **args: Any) -> dict[str, Any]:
        try:
            if not self.ready:
                hello = self.chan.recv(timeout=max(timeout, 0.01))
                if hello.get("ready") != self.role:
                    raise ChannelError("bad greeting")
                self.ready = True
            self.seq += 1
            self.chan.send({"cmd": cmd, "args": args, "seq": self.seq})
            reply = self.chan.recv(timeout=max(timeout, 0.01))
            if reply.get("seq") != self.seq:
                raise ChannelError(f"reply out of sequence to `{cmd}` (a forged or stale message)")
        except ChannelTimeout:
            self.kill()
            raise WorkerFailure(self._fault(Code.TIMEOUT), f"{self.role}: `{cmd}` did not finish within {timeout:.0f} s "
                                "(hang, deadlock or far too slow); the process was killed") from None
        except (ChannelClosed, BrokenPipeError, ConnectionResetError):
            message = self._death(cmd)  # first: it reaps the process, whose status _fault reads
            raise WorkerFailure(self._fault(Code.CRASH), message) from None
        except ChannelError as exc:
            self.kill()
            raise WorkerFailure(Code.PROTOCOL_VIOLATION, f"{self.role}: {exc}") from None
        if reply.get("ok") is True:
            return reply
        try:
            code = Code(reply.get("code"))
        except ValueError:
            raise WorkerFailure(Code.PROTOCOL_VIOLATION, f"{self.role}: unknown reason code") from None
        raise WorkerFailure(code, str(reply.get("message", ""))[:20000])

    def _fault(self, code: Code) -> Code:
        """A hang or crash of the judge is the evaluator's failure, not the candidate's."""
        if self.role == "judge":
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
        return f"{self.role} process {how} during `{cmd}` without answering" + (f"; stderr:\n{tail}" if tail else "")

    @contextlib.contextmanager
    def frozen(self):
        """Stop the worker's whole process group (SIGSTOP) for the duration: no thread it started
        can finish work late, or touch its buffers, while the judge reads them."""
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

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.chan.send({"cmd": "exit"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()  # the whole process group: nothing the candidate started survives
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


def _close_all(workers: list[_Worker], lock: DeviceLock | None) -> threading.Thread:
    """Close an evaluation's workers together; returns once their output is complete.

    Each worker is asked to exit; it closes its stdout and stderr before it exits (worker.main), so
    the output is whole before its CUDA context goes, which takes ~0.2 s on an H200. Then every
    process group is killed (whatever the candidate started goes too), and the returned thread goes
    on to reap the processes. All of it holds the device lock shared (contexts are not destroyed
    during someone's timing). Join the thread, or `wait_teardowns`, to know the processes gone."""
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
            with _TEARDOWNS_LOCK:
                _TEARDOWNS.discard(threading.current_thread())

    thread = threading.Thread(target=run, name="cuda-agent-teardown")
    with _TEARDOWNS_LOCK:
        _TEARDOWNS.add(thread)
    thread.start()
    collected.wait()
    return thread


class WarmPool:
    """Worker processes started ahead of need, torch already imported (and, with `cuda`, the CUDA
    context of the GPU that `env` makes visible created), handed out as the judge or a runner of the
    next evaluation (`_Worker.become`); a runner serves one evaluation only (a judge may serve more:
    `give_back`), and a replacement starts as soon as one is taken, so the import overlaps the
    running evaluations. An evaluation takes two
    (four when it measures its baselines): `size` should cover what the evaluations running at once
    take while replacements start (a few seconds each).

    Half the spares (rounded up) also warm the op guard (`worker._warm_guard`: its first call imports
    torch._dynamo and sympy, 3.4 s of CPU on this project's 2-core machine, more than importing
    torch); they go to candidates, the others to the judge and the baseline runners, which never
    run under the guard. Either kind serves the other's role when none of its own has started.

    With `zygote` (the default), the pool also starts a zygote (zygote.py): once it is warm, spares
    are forked from it, torch imported and the op guard warmed, instead of each importing torch
    afresh (16 CPU-seconds on the H200 hosts); until then, and if it dies, they start as before."""

    def __init__(self, env: dict[str, str] | None = None, size: int = 2, output_limit: int = 16384,
                 cuda: bool = False, lock: DeviceLock | None = None, zygote: bool = True,
                 warm_device: bool = False, cpus: set[int] | None = None):
        """`lock`: the device's lock, held shared while a spare creates its CUDA context.
        `warm_device`: spares also warm what a worker's first command would (`EvalConfig.warm_spares`).
        `cpus`: the CPUs the spares run on (`EvalConfig.pin_cpus`); default: any."""
        self.env = _scrubbed_env(env or {})
        self.size, self.output_limit = size, output_limit
        flags: list[str] = []  # the spares' command line (worker.main)
        if cuda:
            flags += ["cuda", "warm-device"] if warm_device else ["cuda"]
        if lock:
            flags += ["--lock", lock.base]
        if cpus:
            flags += ["--cpus", ",".join(map(str, sorted(cpus)))]
        self.flags = tuple(flags)
        self.dir = Path(tempfile.mkdtemp(prefix=f"cuda-agent-spare-{os.getpid()}-"))
        self.lock = threading.Lock()
        self.spares: list[_Worker] = []
        self.judges: list[_Worker] = []  # judges of finished evaluations, kept for the next (give_back)
        self.closed = False
        self.taken = self.cold = self.forked = self.reused = 0
        self.zygote = Zygote(self.env, self.dir) if zygote and size > 0 else None
        self._fill()

    def _spawn(self, guard: bool = True) -> _Worker:
        w = _Worker("spare", self.dir, self.env, self.output_limit,
                    *self.flags, *(("guard",) if guard else ()), zygote=self.zygote)
        self.forked += w.forked
        return w

    def _fill(self) -> None:
        with self.lock:
            for guard, want in ((True, self.size - self.size // 2), (False, self.size // 2)):
                while not self.closed and sum(w.guard_warm is guard for w in self.spares) < want:
                    self.spares.append(self._spawn(guard))

    def take(self, role: str, cwd: Path, env: dict[str, str], timeout: float) -> _Worker:
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
            order = sorted(range(len(self.spares)), key=lambda i: (
                not self.spares[i].started(), self.spares[i].guard_warm is not guard, i))
            worker = self.spares.pop(order[0]) if self.spares else None
            self.taken += 1
        self._fill()  # the replacement imports torch while this evaluation runs
        if worker is not None:
            try:
                return worker.become(role, cwd, env, timeout)
            except WorkerFailure:  # it died while waiting: start a fresh one
                worker.close()
        self.cold += 1
        return self._spawn().become(role, cwd, env, timeout)

    def give_back(self, judge: _Worker) -> bool:
        """Keep a judge that has forgotten its evaluation and may judge another (worker
        Judge.cmd_reset) for the next evaluation; False when the pool keeps enough already (the
        caller closes it). Each kept judge holds a CUDA context and what torch caches of device
        memory, so at most half the pool's size are kept."""
        with self.lock:
            if self.closed or len(self.judges) >= max(self.size // 2, 1):
                return False
            self.judges.append(judge)
            return True

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


def _shm_root() -> str | None:
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


_OWNED_DIR = re.compile(r"^cuda-agent-(eval|shm|spare)-(\d+)-")


def _sweep_stale(work: Path | None) -> None:
    """Remove the directories of evaluations whose harness process is gone (killed with SIGKILL,
    it could not clean up). Directories are named by the harness's pid; a live pid is left alone."""
    for root in [work] if work else [tempfile.gettempdir(), _shm_root()]:
        if not root or not os.path.isdir(root):
            continue
        for name in os.listdir(root):
            m = _OWNED_DIR.match(name)
            if not m:
                continue
            try:
                os.kill(int(m.group(2)), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            except OSError:
                pass  # alive, owned by someone else


class _Evaluation:
    def __init__(self, task: Task, candidate: Candidate, config: EvalConfig, pool: WarmPool | None = None,
                 gpu: str | None = None, background_teardown: bool = False):
        """`background_teardown`: return the verdict once the workers' output is in, while their
        processes exit (and their CUDA contexts go) in a thread of their own (`wait_teardowns`)."""
        self.task, self.cand, self.cfg = task, candidate, config
        self.background_teardown = background_teardown
        self.pool, self.gpu = pool, gpu  # warm workers to take from; the GPU (index) it runs on
        self.res = EvalResult(task=task.id, candidate=candidate.origin, config=config.to_json())
        self.workers: list[_Worker] = []
        self.slots: dict[tuple[str, str], Any] = {}  # input slots by (runner, name): their specs
        self.unchecked: list[str] = []  # timed calls not picked for checking (the judge forgets them)
        self.batch: int | None = None  # calls per command, set from the first trial's sizes
        self._compile_error: str | None = None

    # -- helpers --
    def _left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.01)

    @contextlib.contextmanager
    def _on_device(self, exclusive: bool = False):
        """The device lock (locks.py): exclusive for timed rounds, shared for other work on the
        device. Waiting too long is the evaluator's failure, not the candidate's."""
        try:
            with (self.lock.exclusive(self._left()) if exclusive else self.lock.shared(self._left())):
                yield
        except LockTimeout:
            raise WorkerFailure(Code.INFRA_ERROR, f"waited {self.cfg.timeout_s:.0f} s for the device lock "
                                f"{self.lock.base}: other evaluations kept the device busy; run fewer at "
                                "once") from None

    def _phase(self, name: str, t0: float) -> None:
        self.res.phases_s[name] = round(self.res.phases_s.get(name, 0.0) + time.monotonic() - t0, 4)

    def run(self) -> EvalResult:
        t_start = time.monotonic()
        n = self.cfg.n_seeds
        seeds = list(self.cfg.seeds) if self.cfg.seeds else [secrets.randbits(62) for _ in range(n)]
        t, s = self.cfg.trials, self.cfg.stress_trials
        self.seeds = {"trials": seeds[:t], "stress": seeds[t:t + s], "init": seeds[t + s],
                      "timing": seeds[t + s + 1], "weights": weights_seed(seeds[t + s])}
        self.res.seeds = {**self.seeds, "all": seeds}
        self.device = resolve_device(self.cfg.device)
        self.res.device = {"type": self.device}
        # The GPU the workers see first: the one they run on.
        gpu = self.gpu or (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        self.lock = DeviceLock.of(self.cfg.cache_dir, self.device, gpu)
        work = self.cfg.work_dir
        _sweep_stale(work)
        pid = os.getpid()
        tmp = Path(tempfile.mkdtemp(prefix=f"cuda-agent-eval-{pid}-", dir=work))
        shm = Path(tempfile.mkdtemp(prefix=f"cuda-agent-shm-{pid}-", dir=work or _shm_root()))
        try:
            self._run(tmp, shm)
        except WorkerFailure as f:
            self.res.add(f.code, f.message)
        except Exception as exc:  # a bug of ours, or a system fault: a verdict all the same
            self.res.add(Code.INFRA_ERROR, "the evaluator failed: " + "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:])
        finally:
            t0 = time.monotonic()
            self._keep_judge()
            reaping = _close_all(self.workers, self.lock)
            if not self.background_teardown:
                reaping.join()
            self._phase("teardown", t0)
            cand = next((w for w in self.workers if w.role == "candidate"), None)
            if cand is not None:
                self.res.candidate_output = {
                    "stdout": cand.stdout.text(), "stderr": cand.stderr.text(),
                    "bytes": cand.stdout.total + cand.stderr.total,
                }
                if cand.stdout.total + cand.stderr.total > self.cfg.output_limit:
                    self.res.add(Code.OUTPUT_TRUNCATED,
                                 f"the candidate wrote {cand.stdout.total + cand.stderr.total} bytes of "
                                 f"output; the first and last {self.cfg.output_limit // 2} of each stream are kept")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(shm, ignore_errors=True)
        self.res.correct = self.res.correct and not self.res.failures
        self.res.reward = milestone_reward(self.res.correct, self.res.speedup_eager,
                                           self.res.speedup_compile)
        self.res.phases_s["total"] = round(time.monotonic() - t_start, 4)
        return self.res

    def _keep_judge(self) -> None:
        """Give the judge back to the pool for another evaluation when it may judge again: it is
        alive, its evaluation did not end in its own or the reference's failure, and it has
        forgotten everything and found its process as clean as it started (worker
        Judge.cmd_reset). Otherwise it closes with the other workers."""
        judge = getattr(self, "judge", None)
        if not self.cfg.reuse_judges or self.pool is None or judge is None or judge.proc.poll() is not None:
            return
        if any(r.code in (Code.INFRA_ERROR, Code.REFERENCE_ERROR) for r in self.res.reasons):
            return
        try:  # (it unmaps the candidate's buffers while the candidate still lives)
            reply = judge.call("reset", JUDGE_RESET_S)
        except Exception:  # noqa: BLE001 - (a timeout killed it); it closes with the others
            return
        if reply.get("reusable") and self.pool.give_back(judge):
            self.workers.remove(judge)

    def _run(self, tmp: Path, shm: Path) -> None:
        cfg = self.cfg
        t0 = time.monotonic()
        violations = policy.check(self.cand, cfg.policy)
        self._phase("policy", t0)
        if violations:
            by_code: dict[Code, list[str]] = {}
            for v in violations:
                by_code.setdefault(v.code, []).append(str(v))
            for code, lines in by_code.items():
                more = f"\n... and {len(lines) - 20} more" if len(lines) > 20 else ""
                self.res.add(code, f"policy {cfg.policy}: " + "\n".join(lines[:20]) + more)
            return
        # The task's cached baselines, read before any worker starts (nothing the candidate writes
        # can reach its own evaluation).
        self.baselines = BaselineCache(cfg.cache_dir / "baselines") if cfg.baseline_cache and cfg.timing else None
        self.baseline_snapshot = self.baselines.snapshot(self.task.source) if self.baselines else None
        stage_dir = tmp / "stage"
        stage_dir.mkdir()
        stage(self.cand, stage_dir)
        self.tmp, self.shm = tmp, shm
        # A folder of torch's extension cache per candidate: model-written kernels name their
        # load_inline extensions alike ("matmul_cuda"), and two of them built at once into one
        # folder break each other's build; the same candidate again finds its build.
        ext_dir = cfg.cache_dir / "torch_extensions" / self.cand.sha256[:16]
        self.env = {"TORCH_EXTENSIONS_DIR": str(ext_dir), "TMPDIR": str(tmp)}
        if self.gpu is not None:
            self.env["CUDA_VISIBLE_DEVICES"] = self.gpu
        t0 = time.monotonic()
        self.judge = judge = self._spawn("judge", tmp, self.env)
        self.candidate = candidate = self._spawn("candidate", stage_dir, self.env)
        self._phase("workers", t0)

        # Build on a thread while the judge sets the reference up.
        t0 = time.monotonic()
        arch = cuda_arch() if self.device == "cuda" else None
        with ThreadPoolExecutor(1) as pool:
            fut = pool.submit(build_extension, self.cand, self.device, arch, cfg.cache_dir,
                              cfg.build_timeout_s)
            self.deadline = time.monotonic() + cfg.timeout_s
            try:
                with self._on_device():  # (waiting too long for it stays an infra_error)
                    try:
                        setup = judge.call("setup", self._left(), task_source=self.task.source,
                                           origin=self.task.origin, device=self.device,
                                           init_seed=self.seeds["init"], weights_seed=self.seeds["weights"],
                                           shm_dir=str(shm), touch=cfg.touch)
                    except WorkerFailure as f:
                        if f.code is Code.INFRA_ERROR:  # the task's own code hung or crashed the judge
                            f = WorkerFailure(Code.REFERENCE_ERROR, f.message)
                        raise f
            except WorkerFailure:
                fut.cancel()
                raise
            finally:
                self._phase("reference_setup", t0)
            self.res.device = setup["device"]
            self.res.weights = setup["weights"]
            self.init_inputs = setup["init_inputs"]
            # Cached baselines fix the batch size: the candidate is timed as they were.
            self.baseline_key = baseline_key(self.res.device, cfg.batch_calls, cfg.compile_baseline, cfg.touch)
            self.cached = (self.baselines.lookup(self.baseline_snapshot, self.baseline_key)
                           if self.baselines else None)
            if self.cached is not None:
                self.batch = self.cached.calls_per_batch
            built: BuildResult | None = fut.result()
        if built is not None:
            self.res.phases_s["build"] = round(built.seconds, 4)
            self.res.phases_s["build_cached"] = built.cached
            if not built.ok:
                self.res.add(Code.BUILD_TIMEOUT if built.timed_out else Code.COMPILE_ERROR, built.log)
                return

        # Load the candidate (single files build their inline extensions here).
        t0 = time.monotonic()
        try:
            loaded = candidate.call("load", cfg.build_timeout_s, stage_dir=str(stage_dir),
                                    extension=str(built.so_path) if built else None,
                                    device=self.device, init_seed=self.seeds["init"],
                                    init_inputs=setup["init_inputs"], shm_dir=str(shm),
                                    policy=cfg.policy, ipc_segments=cfg.ipc_segments, touch=cfg.touch,
                                    stream_check=cfg.stream_check)
        except WorkerFailure as f:
            self.res.compiled = f.code not in (Code.COMPILE_ERROR, Code.LOAD_ERROR, Code.BUILD_TIMEOUT)
            if f.code is Code.TIMEOUT:
                f.code = Code.BUILD_TIMEOUT
            raise
        finally:
            self._phase("load", t0)
        self.res.compiled = True
        self._record_precision(loaded.get("precision"))
        self.deadline = time.monotonic() + cfg.timeout_s
        t0 = time.monotonic()
        with self._on_device():
            self._load_weights(candidate, loaded["state"])
        self._phase("weights", t0)

        # Correctness: fresh inputs per trial, then stress trials. The first trial runs alone; its
        # sizes set how many calls each later command makes (unless cached baselines fixed that),
        # and the next command reuses its input buffer, refilled: memoising on buffers shows here.
        t0 = time.monotonic()
        plan = [(f"c{i}", sd, None) for i, sd in enumerate(self.seeds["trials"])]
        plan += [(f"s{i}", sd, i) for i, sd in enumerate(self.seeds["stress"])]
        done = 0
        call_ms: list[float] = []  # the harness's wall time per call, per command
        while done < len(plan):
            items = plan[done:done + (self.batch if done else 1)]  # the first alone, then batches
            done += len(items)
            with self._on_device():
                outcomes, wall = self._batch(items, guarded=True)
            if outcomes:
                call_ms.append(wall / len(outcomes))
            for key, seed, stress in items:
                rec = {"key": key, "seed": seed, "stress": stress is not None}
                self.res.trials.append(rec)
                if key not in outcomes:
                    rec["skipped"] = "reference not finite on stressed inputs"
                    continue
                code, verdict, _ = outcomes[key]
                rec["passed"] = code is None
                if code is not None:
                    if stress is not None and code is Code.OUTPUT_MISMATCH:
                        code = Code.STRESS_MISMATCH  # right on the task's inputs, wrong beyond them
                    self.res.add(code, f"trial {key}: {verdict['message']}")
                    self._phase("correctness", t0)
                    return
                self._record_error(verdict, rec)
        self._phase("correctness", t0)
        self.res.correct = True
        if not cfg.timing:
            self.res.add(Code.TIMING_SKIPPED, "timing was switched off; the reward is at most 1")
        elif too_slow := self._too_slow_to_time(call_ms):
            self.res.add(Code.TIMING_SKIPPED, too_slow)
        elif not self._time():
            self.res.correct = False
            return
        self._check_weights()

    def _record_precision(self, precision: Any) -> None:
        if not isinstance(precision, dict):
            return
        self.res.device["candidate_precision"] = precision
        if precision.get("matmul_allow_tf32") or precision.get("float32_matmul_precision") not in (None, "highest"):
            if not any(r.code is Code.REDUCED_PRECISION for r in self.res.reasons):
                self.res.add(Code.REDUCED_PRECISION, f"the candidate switched on reduced-precision float32 "
                             f"matmuls ({precision}); allowed within the tolerance")

    def _record_error(self, verdict: dict[str, Any], rec: dict[str, Any] | None = None) -> None:
        err = verdict.get("error")
        if not isinstance(err, dict):
            return
        stats = {k: float(err.get(k, 0.0)) for k in ("max_abs", "rel_norm")}
        if rec is not None:
            rec["error"] = stats
        worst = self.res.errors or {"max_abs": 0.0, "rel_norm": 0.0}
        self.res.errors = {k: max(worst[k], stats[k]) for k in worst}

    def _batch(self, items: list[tuple[str, int, int | None]], guarded: bool, check: float = 1.0,
               runner: _Worker | None = None
               ) -> tuple[dict[str, tuple[Code | None, dict[str, Any] | None, float]], float]:
        """One command of back-to-back calls of the candidate (or of a baseline's `runner`), one per
        item (trial key, seed, stress variant). The judge writes fresh inputs into one of the
        runner's input slots per item and flushes the caches; the runner makes the calls (its
        claimed times and the harness's wall time of the whole command are both kept); then each
        call's output, with probability `check` (decided after the command, so the candidate cannot
        know), is exported and compared with the reference while the runner's process is stopped.
        Correctness trials, timed calls and the baselines' timed calls go through here alike.

        Returns {trial: (failure code or None, the judge's verdict or None when not checked,
        claimed ms)}, without the stress trials skipped (reference not finite), and the wall ms.
        Checking stops at the first failure."""
        judge, cand = self.judge, runner or self.candidate
        forget, self.unchecked = self.unchecked, []
        slots = [f"k{i}" for i in range(len(items))]
        prep = judge.call("prepare", self._left(), reference=check >= 1.0, forget=forget, items=[
            {"trial": t, "seed": seed, "stress": stress, "fill": self.slots.get((cand.role, slot))}
            for (t, seed, stress), slot in zip(items, slots)])
        if self.batch is None:
            self.batch = _batch_size(prep["in_bytes"], prep["out_bytes"], prep["ref_ms"],
                                     self.cfg.batch_calls, BATCH_BYTES[self.device])
            if self.device == "cuda":  # what the next evaluation of this task is admitted by
                memory.record(self.cfg.cache_dir, self.task.source, prep["in_bytes"], prep["out_bytes"])
        live = []
        for (trial, _, _), slot, p in zip(items, slots, prep["items"]):
            if p["skip"]:
                continue
            if not p["filled"]:
                spec = cand.call("alloc", self._left(), key=slot, spec=p["spec"])["spec"]
                self.slots[(cand.role, slot)] = spec
                judge.call("fill", self._left(), trial=trial, spec=spec)
            live.append((trial, slot))
        if not live:
            return {}, 0.0
        cand.call("ping", self._left())  # a process woken from sleep answers ~0.1 ms later
        w0 = time.perf_counter()
        ran = cand.call("run", self._left(), keys=[slot for _, slot in live], guarded=guarded)
        wall = (time.perf_counter() - w0) * 1e3
        ms = ran.get("ms")
        if not (type(ms) is list and len(ms) == len(live) and all(type(m) is float and m >= 0 for m in ms)
                and sum(ms) <= wall):
            raise WorkerFailure(Code.TIMING_TAMPERED, f"the candidate claimed {ms!r} ms for {len(live)} "
                                f"call(s) that took {wall:.3f} ms of the harness's wall-clock time")
        outcomes: dict[str, tuple[Code | None, dict[str, Any] | None, float]] = {}
        for (trial, slot), m in zip(live, ms):
            if check <= 0 or (check < 1.0 and _RNG.random() >= check):
                self.unchecked.append(trial)
                outcomes[trial] = (None, None, m)
                continue
            exp = cand.call("export", self._left(), key=slot)
            with cand.frozen():
                verdict = judge.call("check", self._left(), trial=trial, out=exp.get("out"),
                                     plain=exp.get("plain") is True, atol=self.cfg.atol, rtol=self.cfg.rtol,
                                     norm_tol=self.cfg.norm_tol)
            code = Code(verdict["code"]) if verdict["code"] is not None else None
            outcomes[trial] = (code, verdict, m)
            if code is not None:
                break
        return outcomes, wall

    def _load_weights(self, runner: _Worker, state: Any) -> None:
        """The reference's weights into `runner`'s ModelNew (worker Judge.cmd_weights): by name, or
        under the kernelbench profile by the values its tensors were built with."""
        args = dict(state=state, owner=runner.role, policy=self.cfg.policy)
        done = self.judge.call("weights", self._left(), **args)
        if done.get("need_values"):
            values = runner.call("state", self._left())["state"]
            done = self.judge.call("weights", self._left(), values=values, **args)
        runner.call("load_weights", self._left(), keys=done["filled"])
        if runner.role == "candidate":
            self.res.weights = done["weights"]

    def _check_weights(self) -> None:
        t0 = time.monotonic()
        with self._on_device():
            state = self.candidate.call("state", self._left())
            self._record_precision(state.get("precision"))
            verdict = self.judge.call("check_state", self._left(), state=state.get("state"))
        self._phase("weights", t0)
        if verdict["code"] is not None:
            self.res.add(Code(verdict["code"]), verdict["message"])
            self.res.correct = False

    def _baseline_runners(self) -> dict[str, _Worker]:
        """The baselines' runners, loaded with the reference weights: eager, and compile unless it is
        off or fails to load (then `baseline_compile_unavailable`)."""
        which = ["eager", "compile"] if self.cfg.compile_baseline else ["eager"]
        spawned = {w: self._baseline_runner(w) for w in which}  # start both, then load each
        runners = {}
        for w, worker in spawned.items():
            try:
                self._load_baseline(worker)
            except WorkerFailure as f:
                self._baseline_failed(w, worker, f)
                continue
            runners[w] = worker
        return runners

    def _baseline_runner(self, which: str) -> _Worker:
        """A runner process holding the reference as `ModelNew` (eager, or under torch.compile), with
        the reference weights, timed through the same commands as the candidate."""
        stage_dir = self.tmp / which
        stage_dir.mkdir()
        stage(baseline_candidate(self.task.source, which), stage_dir)
        # Trusted code only: Inductor's compiled kernels are cached across evaluations.
        inductor = str(self.cfg.cache_dir / "inductor")
        return self._spawn(which, stage_dir, {**self.env, "TORCHINDUCTOR_CACHE_DIR": inductor})

    def _spawn(self, role: str, cwd: Path, env: dict[str, str]) -> _Worker:
        """A worker for `role`: a warm spare from the pool when there is one, else a fresh process."""
        if self.pool is not None:  # the pool of this evaluation's GPU
            worker = self.pool.take(role, cwd, env, self.cfg.timeout_s)
        else:
            worker = _Worker(role, cwd, _scrubbed_env(env), self.cfg.output_limit)
        self.workers.append(worker)
        return worker

    def _load_baseline(self, worker: _Worker) -> None:
        with self._on_device():
            loaded = worker.call("load", self._left(), stage_dir=str(worker.cwd), extension=None,
                                 device=self.device, init_seed=self.seeds["init"],
                                 init_inputs=self.init_inputs, shm_dir=str(self.shm), policy="none",
                                 ipc_segments=self.cfg.ipc_segments, touch=self.cfg.touch)
            self._load_weights(worker, loaded["state"])

    def _too_slow_to_time(self, call_ms: list[float]) -> str | None:
        """Why a correct candidate cannot be timed in what is left of the evaluation, or None. The
        timing protocol needs at the least a warm-up batch and `min_iters` batches of samples; a
        candidate whose calls took so long in the correctness trials (the harness's clock) that
        these would not fit is judged correct and left untimed, reward 1, rather than timed out:
        a timeout would punish correct code (a corpus kernel takes 28 s a call on an H200), and
        slowness on purpose gains nothing, as the reward without timing is at most 1."""
        if not call_ms:
            return None
        cfg, per_call_s = self.cfg, _median(call_ms) / 1e3
        calls = (self.batch or 1) * (1 + cfg.timing_rounds * _least_samples_per_round(cfg))
        need, left = calls * per_call_s, self._left()
        if need <= TIMING_FIT * left:
            return None
        return (f"a call of the candidate took {per_call_s:.3g} s in the correctness trials, so the {calls} timed "
                f"calls that timing needs at the least would take about {need:.0f} s, more than the {left:.0f} s "
                "left of the evaluation (timeout_s): judged correct without timing, the reward is at most 1")

    def _time(self) -> bool:
        """Timing rounds. Each command is a batch of back-to-back timed calls on distinct inputs;
        each sample is the mean of one batch, so work moved from one call of a batch to another
        cannot lower it. The baselines (eager, torch.compile) are the reference run as candidates
        by runner processes of their own, through the same commands (`_batch`): read from the
        cache when measured before for this task, device and software (`baselines.py`); else
        measured, with the candidate's process stopped when they are to be cached, or interleaved
        with the candidate in rotating rounds when they serve this evaluation only. Every timed call
        of the candidate gets fresh inputs; a random share of them (`timed_check_fraction`) have
        their output checked. Returns False when the candidate failed during timing."""
        cfg, n = self.cfg, self.batch or 1
        t0 = time.monotonic()
        key, store, cached = self.baseline_key, self.baselines, self.cached
        runners: dict[str, _Worker] = {"candidate": self.candidate}
        if cached is None:
            runners.update(self._baseline_runners())
            self._phase("baseline_setup", t0)
        impls = [w for w in ("eager", "compile", "candidate") if w in runners]
        claimed: dict[str, list[float]] = {k: [] for k in impls}  # per command: sum of claimed ms
        walls: dict[str, list[float]] = {k: [] for k in impls}  # per command: the harness's clock
        samples: dict[str, list[float]] = {k: [] for k in impls}  # per command: mean ms per call
        trusted: list[float] = []  # the protocol's own cost per command, in the judge, beside each batch
        # Timed milliseconds per round: baselines measured for the cache (once per task and
        # device, then reused by every evaluation) get a budget of their own.
        chunk_ms = {impl: (cfg.baseline_budget_s if impl != "candidate" and store is not None
                           else cfg.timing_budget_s) * 1e3 / cfg.timing_rounds for impl in impls}
        lo = _least_samples_per_round(cfg)
        hi = max(cfg.max_iters // cfg.timing_rounds, lo)
        counts = {"timed": 0, "checked": 0}

        def step(impl: str, keep: bool) -> bool:
            """One batch of `impl`; False when the candidate failed. `keep`: a sample, not a warm-up."""
            items = [(f"{PREFIX[impl]}{counts['timed'] + j}", self.seeds["timing"] + counts["timed"] + j, None)
                     for j in range(n)]
            counts["timed"] += n
            if impl == "candidate":
                outcomes, wall = self._batch(items, guarded=False, check=cfg.timed_check_fraction)
                w0 = time.perf_counter()
                probe = self.judge.call("probe", self._left(), n=n)["ms"]
                if keep:
                    trusted.append((time.perf_counter() - w0) * 1e3 - sum(probe))
            else:
                try:
                    outcomes, wall = self._batch(items, guarded=False, check=0.0, runner=runners[impl])
                except WorkerFailure as f:
                    self._baseline_failed(impl, runners.pop(impl), f)
                    return True
            for key_, (code, verdict, _) in outcomes.items():
                if verdict is None:
                    continue
                counts["checked"] += 1
                if code is not None:
                    if code not in (Code.INPUT_MODIFIED, Code.NOT_PLAIN_TENSOR):
                        code = Code.TIMED_OUTPUT_MISMATCH
                    self.res.add(code, f"output of timed call {key_[1:]}: {verdict['message']}")
                    return False
                self._record_error(verdict)
            if keep:
                ms = [m for _, _, m in outcomes.values()]
                claimed[impl].append(sum(ms))
                walls[impl].append(wall)
                samples[impl].append(sum(ms) / len(ms))
            return True

        def rounds(group: list[str]) -> bool:
            """Interleaved rounds over `group`, rotating the order; False when the candidate failed."""
            for r in range(cfg.timing_rounds):
                for impl in group[r % len(group):] + group[: r % len(group)]:  # no fixed position bias
                    i, begun = 0, time.perf_counter()
                    # Stop at the timed budget, or at three times it in elapsed time: the calls also
                    # pay for fresh inputs and checks (costly on the CPU backend).
                    while impl in runners and i < hi and (i < lo or (
                            sum(walls[impl][-i:] if i else []) < chunk_ms[impl]
                            and (time.perf_counter() - begun) * 1e3 < 3 * chunk_ms[impl])):
                        if not step(impl, keep=True):
                            return False
                        i += 1
            return True

        # A warm-up batch of each (allocators and caches fill; torch.compile compiles here: minutes
        # of CPU at worst, so not holding the device), then the timed rounds with the device to
        # themselves (locks.py).
        for impl in impls:
            with (self._on_device() if impl != "compile" else contextlib.nullcontext()):
                if not step(impl, keep=False):
                    return False
        t_lock = time.monotonic()
        with self._on_device(exclusive=True):
            self._phase("timing_lock_wait", t_lock)
            if cached is None and store is not None:
                # Baselines that will be cached are measured with the candidate's process stopped:
                # nothing it runs (a thread, a child, queued work) can slow them down and inflate
                # the speedups of every later evaluation of this task.
                with self.candidate.frozen():
                    if not rounds([w for w in impls if w != "candidate"]):
                        return False
                ok = rounds(["candidate"])
            else:  # measured for this evaluation only: interleaved with the candidate
                ok = rounds(impls)
            if not ok:
                return False
            check = _timing_check(claimed["candidate"], walls["candidate"], TimeStats.of(trusted), self.device)
            if check["tampered"]:
                # A second look before convicting: delays only ever add to the harness's clock, and
                # a process starting beside this one (a spare importing torch on a CPU host of two
                # cores) delayed 6 of 9 of an honest candidate's commands by ~8 ms, and few of the
                # judge's, in about one evaluation of 15. A candidate that lowers its median claim
                # must under-report most commands of every look.
                first = {k: check[k] for k in ("trusted_overhead_ms", "candidate_overhead_ms", "tolerance_ms")}
                mark = len(walls["candidate"])  # each kept batch of the candidate has its probe in `trusted`
                if not rounds(["candidate"]):
                    return False
                check = _timing_check(claimed["candidate"][mark:], walls["candidate"][mark:],
                                      TimeStats.of(trusted[mark:]), self.device)
                check["first_look"] = first
        n_checked = counts["checked"]
        noisy: list[str] = []
        if cached is None:
            cached = Baselines(eager=TimeStats.of(samples["eager"]),
                               compile=TimeStats.of(samples["compile"]) if "compile" in runners else None,
                               compile_error=self._compile_error, calls_per_batch=n,
                               device=self.res.device, measured_at=baselines_now())
            source = "measured"
            noisy = [f"{w}: iqr {st.iqr:.3g} ms, median {st.median:.3g} ms"
                     for w, st in (("eager", cached.eager), ("compile", cached.compile))
                     if st is not None and st.iqr > NOISY_SPREAD * st.median and st.iqr > NOISY_MS]
            if store and not noisy:  # noisy: a busy machine, not worth keeping for every later evaluation
                store.put(self.task.source, key, cached)
        else:
            source = "cached"
            if cached.compile_error:
                self.res.add(Code.BASELINE_COMPILE_UNAVAILABLE, cached.compile_error)
        self.res.timing_check = check
        check["timed_calls_checked"] = n_checked
        check["calls_per_batch"] = n
        check["baselines"] = {"source": source, "key": key, "measured_at": cached.measured_at}
        if source == "measured" and store:
            check["baselines"]["cached"] = not noisy
            if noisy:
                check["baselines"]["too_noisy"] = noisy
        if check["tampered"]:
            first = check.get("first_look")
            again = (f" (in two looks; the first: {first['candidate_overhead_ms'] - first['trusted_overhead_ms']:.3f}"
                     " ms more)") if first else ""
            self.res.add(Code.TIMING_TAMPERED, check["message"] + again)
            return False
        stats = {"eager": cached.eager, "candidate": TimeStats.of(samples["candidate"])}
        if cached.compile is not None:
            stats["compile"] = cached.compile
        self.res.times_ms.update(stats)
        c = stats["candidate"].median
        if c > 0:
            self.res.speedup_eager = round(stats["eager"].median / c, 4)
            if "compile" in stats:
                self.res.speedup_compile = round(stats["compile"].median / c, 4)
        self._phase("timing", t0)
        return True

    def _baseline_failed(self, which: str, worker: _Worker, f: WorkerFailure) -> None:
        """The eager runner failing is the reference's failure (it ends the evaluation); the compile
        runner failing only drops that baseline (`baseline_compile_unavailable`)."""
        if which == "eager":
            raise WorkerFailure(Code.REFERENCE_ERROR, f"the reference failed in its runner:\n{f.message}")
        worker.kill()
        self._compile_error = f"torch.compile of the reference failed:\n{f.message}"
        self.res.add(Code.BASELINE_COMPILE_UNAVAILABLE, self._compile_error)


# A baseline whose samples spread (interquartile range) more than this share of their median, and
# more than this many ms, was measured on a busy machine: it serves its own evaluation but is not
# cached (a 64x256 tanh measured at 14 ms +- 7 on two cores shared with a test suite would have made
# every later candidate 16x "faster").
NOISY_SPREAD, NOISY_MS = 0.25, 0.2
JUDGE_RESET_S = 10.0  # seconds a judge may take to forget its evaluation (else it is closed)
PREFIX = {"eager": "e", "compile": "k", "candidate": "x"}  # the judge's keys of timed calls' inputs


def weights_seed(init_seed: int) -> int:
    """The seed of an evaluation's re-drawn weights, derived from its init seed (one LCG step), so
    that a result's `seeds` list replays them too."""
    return (init_seed * 6364136223846793005 + 1442695040888963407) % (1 << 62)


def _batch_size(in_bytes: int, out_bytes: int, call_ms: float | None, most: int, budget: int) -> int:
    """Calls per command: up to `most`, with at most `budget` bytes of inputs and outputs kept at
    once (the candidate holds a batch's inputs and outputs, the judge its inputs), and about
    BATCH_MS of calls (the reference's time per call): a warm host matters for short calls only, and
    long ones would make every sample slow."""
    by_time = int(BATCH_MS / call_ms) if call_ms else most
    return max(1, min(most, budget // max(in_bytes + out_bytes, 1), by_time))


_RNG = random.SystemRandom()  # which timed calls get checked: unpredictable, like the seeds


def _least_samples_per_round(cfg: EvalConfig) -> int:
    """Samples (batches) each timing round takes at the least, so that the rounds hold `min_iters`."""
    return -(-cfg.min_iters // cfg.timing_rounds)


def _median(xs: list[float]) -> float:
    return TimeStats.of(xs).median


def _timing_check(claimed: list[float], walls: list[float], trusted: TimeStats, device: str) -> dict[str, Any]:
    """Does the candidate's account of its own calls agree with the harness's clock?

    Every batch of calls is one command; the harness times the command from outside. What a command
    costs beyond its calls (the round trip over the channel, the cache flushes, the synchronizes) is
    the same code in every process, so its median is measured on trusted commands the judge runs
    beside each of the candidate's (`probe`: the same timed calls, of nothing). A candidate that
    under-reports its calls (a patched clock, work left running past the synchronize) shows a larger
    overhead than the trusted one. Honest candidates are not identical to it either: on an H200, with
    one call per command and the judge as the reference, the candidate showed 0.04-0.09 ms more
    (0.1-0.14 ms with twelve evaluations sharing the machine). Tolerance: a floor (0.2 ms on CUDA;
    0.5 ms on the CPU backend, where the processes and their OpenMP threads share a few cores) plus
    10% of the claimed median (25% on the CPU backend, where the cache flush after a real call
    writes back the data it dirtied, which the probes' calls of nothing do not: 2.4 ms more was seen
    for an honest 4M-element candidate on two cores) plus twice the spread of the trusted overhead
    plus a quarter of that overhead (the CPU backend's flushes make it milliseconds long), so honest
    noise is not flagged. A candidate flagged is measured again (`first_look` in the result) and
    convicted only when flagged twice. It catches gross falsification; the identity checks of the
    clocks (guard.py) are the finer defence.
    """
    mine = _median([w - c for w, c in zip(walls, claimed)])
    claim = _median(claimed)
    cuda = device == "cuda"
    tol = ((0.2 if cuda else 0.5) + (0.1 if cuda else 0.25) * claim
           + 2 * trusted.iqr + 0.25 * max(trusted.median, 0.0))
    excess = mine - trusted.median
    return {
        "trusted_overhead_ms": round(trusted.median, 5), "candidate_overhead_ms": round(mine, 5),
        "tolerance_ms": round(tol, 5), "tampered": excess > tol,
        "message": (f"the candidate's calls took {excess:.3f} ms more on the harness's clock than it "
                    f"reported (median over {len(walls)} batches; tolerance {tol:.3f} ms): its timing "
                    "report was falsified or work ran outside the timed call"),
    }
