"""The timing protocol: how the candidate and the baselines are measured within one evaluation.

Every timed call runs through the same command for the candidate and for the baselines (eager and
torch.compile: the reference run as a candidate by runner processes of their own, baselines.py).
A command is a batch of back-to-back calls on distinct fresh inputs (`batch_size`); each sample is
the mean of one batch, so work moved from one call of a batch to another cannot lower it. A
warm-up batch of each implementation comes first; then interleaved rounds with the device to
themselves (locks.py). The candidate's claimed times are checked against the harness's clock
(`timing_check`), and a random share of its timed calls have their outputs checked.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, Any

from cuda_agent.evaluate.baselines import Baselines, baseline_candidate
from cuda_agent.evaluate.baselines import now as baselines_now
from cuda_agent.evaluate.cache_layout import INDUCTOR
from cuda_agent.evaluate.candidate import stage
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.process import Worker, WorkerFailure
from cuda_agent.evaluate.result import Code, TimeStats

if TYPE_CHECKING:
    from cuda_agent.evaluate.evaluation import Evaluation

# Inputs and outputs of one batch of calls kept at once, at most (the candidate's input slots live in
# /dev/shm on the CPU backend, often small in containers).
BATCH_BYTES = {"cuda": 1 << 30, "cpu": 256 << 20}
BATCH_MS = 5.0  # and about this much of calls
TIMING_FIT = 0.8  # share of the time left that the least timing must fit in (too_slow_to_time)
# A baseline is cached when its median is known to within MEDIAN_PRECISION of itself, or NOISY_MS
# (`median_error`). One whose samples spread more (a busy machine) is measured again with more
# samples, up to NOISY_BUDGET times its timed budget; one still too noisy serves its own evaluation
# but is not cached (it would make every later candidate of the task look faster or slower than it is).
MEDIAN_PRECISION, NOISY_MS, NOISY_BUDGET = 0.02, 0.02, 4.0
PREFIX = {"eager": "e", "compile": "k", "candidate": "x"}  # the judge's keys of timed calls' inputs
# The timing check's tolerance per backend (`timing_check`): a floor in ms, then shares of the
# claimed median and of the protocol's own cost.
TIMING_TOLERANCE = {"cuda": (0.2, 0.10, 0.25), "cpu": (1.0, 0.25, 0.5)}


def batch_size(in_bytes: int, out_bytes: int, call_ms: float | None, most: int, budget: int) -> int:
    """Calls per command: up to `most`, with at most `budget` bytes of inputs and outputs kept at
    once (the candidate holds a batch's inputs and outputs, the judge its inputs), and about
    BATCH_MS of calls (the reference's time per call): a warm host matters for short calls only, and
    long ones would make every sample slow."""
    by_time = int(BATCH_MS / call_ms) if call_ms else most
    return max(1, min(most, budget // max(in_bytes + out_bytes, 1), by_time))


def least_samples_per_round(cfg: EvalConfig) -> int:
    """Samples (batches) each timing round takes at the least, so that the rounds hold `min_iters`."""
    return -(-cfg.min_iters // cfg.timing_rounds)


def too_slow_to_time(call_ms: list[float], calls_per_batch: int, cfg: EvalConfig, left_s: float) -> str | None:
    """Why a correct candidate cannot be timed in the `left_s` seconds left of the evaluation, or
    None. The protocol needs at the least a warm-up batch and `min_iters` batches of samples; a
    candidate whose calls took so long in the correctness trials (`call_ms`, the harness's clock)
    that these would not fit is judged correct and left untimed, reward 1, rather than timed out:
    a timeout would punish correct code, and slowness on purpose gains nothing, as the reward
    without timing is at most 1."""
    if not call_ms:
        return None
    per_call_s = TimeStats.of(call_ms).median / 1e3
    calls = calls_per_batch * (1 + cfg.timing_rounds * least_samples_per_round(cfg))
    need = calls * per_call_s
    if need <= TIMING_FIT * left_s:
        return None
    return (f"a call of the candidate took {per_call_s:.3g} s in the correctness trials, so the {calls} timed "
            f"calls that timing needs at the least would take about {need:.0f} s, more than the {left_s:.0f} s "
            "left of the evaluation (timeout_s): judged correct without timing, the reward is at most 1")


def median_error(st: TimeStats) -> float:
    """The standard error of a median of `st.n` samples, in ms, estimated from their spread: 1.2533
    sigma / sqrt(n) for normally spread samples, with sigma = iqr / 1.349. The spread shrinks the
    error only as the square root of the samples, so a busy machine needs more of them, not luck."""
    return 0.929 * st.iqr / max(st.n, 1) ** 0.5


def precision_ms(st: TimeStats) -> float:
    """How well a cached baseline's median must be known: MEDIAN_PRECISION of it, or NOISY_MS."""
    return max(MEDIAN_PRECISION * st.median, NOISY_MS)


def too_noisy(st: TimeStats) -> bool:
    """Is this baseline's median known too loosely to be cached for every later evaluation?"""
    return median_error(st) > precision_ms(st)


def samples_for_precision(st: TimeStats) -> int:
    """How many samples of this spread pin the median down to `precision_ms`."""
    return max(st.n, math.ceil((0.929 * st.iqr / precision_ms(st)) ** 2))


def timing_check(claimed: list[float], walls: list[float], trusted: TimeStats, device: str) -> dict[str, Any]:
    """Does the candidate's account of its own calls agree with the harness's clock?

    Every batch of calls is one command; the harness times the command from outside. What a command
    costs beyond its calls (the round trip over the channel, the cache flushes, the synchronizes) is
    the same code in every process, so its median is measured on trusted commands the judge runs
    beside each of the candidate's (`probe`: the same timed calls, of nothing). A candidate that
    under-reports its calls (a patched clock, work left running past the synchronize) shows a larger
    overhead than the trusted one. Honest candidates are not identical to it either (they show a
    small excess of their own: docs/measured/2026-11-30-hardening.md), so the tolerance
    (`TIMING_TOLERANCE`) is a floor (0.2 ms on CUDA; 1 ms on the CPU backend, where the processes
    and their OpenMP threads share a few cores) plus 10% of the claimed median (25% on the CPU
    backend, where the cache flush after a real call writes back the data it dirtied, which the
    probes' calls of nothing do not) plus twice the spread of the trusted overhead plus a share of
    that overhead: a quarter on CUDA, half on the CPU backend, whose overhead is mostly the flush of
    the last-level cache, a write of twice its size that runs slower in one process than in another
    (an honest elementwise candidate's flushes ran slower in its process than the judge's:
    docs/measured/2026-12-04-fresh-h200.md, "the CPU backend's timing check"). A candidate flagged
    is measured again (`first_look` in the result) and convicted only when flagged twice. It catches
    gross falsification; the identity checks of the clocks (guard.py) are the finer defence.
    """
    mine = TimeStats.of([w - c for w, c in zip(walls, claimed)]).median
    claim = TimeStats.of(claimed).median
    floor, of_claim, of_overhead = TIMING_TOLERANCE["cuda" if device == "cuda" else "cpu"]
    tol = floor + of_claim * claim + 2 * trusted.iqr + of_overhead * max(trusted.median, 0.0)
    excess = mine - trusted.median
    return {
        "trusted_overhead_ms": round(trusted.median, 5), "candidate_overhead_ms": round(mine, 5),
        "tolerance_ms": round(tol, 5), "tampered": excess > tol,
        "message": (f"the candidate's calls took {excess:.3f} ms more on the harness's clock than it "
                    f"reported (median over {len(walls)} batches; tolerance {tol:.3f} ms; claimed "
                    f"{claim:.3f} ms per batch, the protocol's own cost {trusted.median:.3f} ms, its "
                    f"spread {trusted.iqr:.3f} ms): its timing report was falsified or work ran outside "
                    "the timed call"),
    }


class Timing:
    """The timed rounds of one evaluation (`run`), whose candidate has passed its correctness
    trials. The baselines are read from the cache when measured before for this task, device and
    software (baselines.py); else measured by runners of their own, with the candidate's process
    stopped when they are to be cached, or interleaved with the candidate in rotating rounds when
    they serve this evaluation only."""

    def __init__(self, ev: Evaluation):
        self.ev, self.cfg = ev, ev.cfg
        self.n = ev.batch or 1  # calls per command
        self.runners: dict[str, Worker] = {"candidate": ev.candidate}
        self.compile_error: str | None = None
        self.claimed: dict[str, list[float]] = {}  # per command: sum of claimed ms
        self.walls: dict[str, list[float]] = {}  # per command: the harness's clock
        self.samples: dict[str, list[float]] = {}  # per command: mean ms per call
        self.trusted: list[float] = []  # the protocol's own cost per command, in the judge, beside each batch
        self.timed = self.checked = 0
        self.measured_again: dict[str, int] = {}  # baselines' samples added to pin a noisy median down

    def run(self) -> bool:
        """Measure; record the times, speedups and the timing check in the result. False when the
        candidate failed during timing (a wrong timed output, a tampered clock)."""
        ev, cfg = self.ev, self.cfg
        t0 = time.monotonic()
        if ev.cached is None:
            self.runners.update(self._baseline_runners())
            ev.phase("baseline_setup", t0)
        impls = [w for w in ("eager", "compile", "candidate") if w in self.runners]
        for d in (self.claimed, self.walls, self.samples):
            d.update({k: [] for k in impls})
        # Timed milliseconds per round: baselines measured for the cache (once per task and
        # device, then reused by every evaluation) get a budget of their own.
        self.chunk_ms = {impl: (cfg.baseline_budget_s if impl != "candidate" and ev.baselines is not None
                                else cfg.timing_budget_s) * 1e3 / cfg.timing_rounds for impl in impls}
        self.lo = least_samples_per_round(cfg)
        self.hi = max(cfg.max_iters // cfg.timing_rounds, self.lo)
        # A warm-up batch of each (allocators and caches fill; torch.compile compiles here: minutes
        # of CPU at worst, so not holding the device), then the timed rounds with the device to
        # themselves (locks.py).
        for impl in impls:
            with (ev.on_device() if impl != "compile" else contextlib.nullcontext()):
                if not self._step(impl, keep=False):
                    return False
        t_lock = time.monotonic()
        with ev.on_device(exclusive=True):
            ev.phase("timing_lock_wait", t_lock)
            check = self._measure(impls)
        if check is None or not self._record(check):
            return False
        ev.phase("timing", t0)
        return True

    def _measure(self, impls: list[str]) -> dict[str, Any] | None:
        """The timed rounds and the timing check; None when the candidate failed in them."""
        ev = self.ev
        if ev.cached is None and ev.baselines is not None:
            # Baselines that will be cached are measured with the candidate stopped (every process
            # of its sandbox, where it has one): nothing it runs (a thread, a child, queued work)
            # can slow them down and inflate the speedups of every later evaluation of this task.
            with ev.candidate.frozen():
                if not self._rounds([w for w in impls if w != "candidate"]):
                    return None
                self._pin_down_noisy()
            ok = self._rounds(["candidate"])
        else:  # measured for this evaluation only: interleaved with the candidate
            ok = self._rounds(impls)
        if not ok:
            return None
        check = timing_check(self.claimed["candidate"], self.walls["candidate"], TimeStats.of(self.trusted),
                             ev.device)
        if check["tampered"]:
            # A second look before convicting: delays only ever add to the harness's clock (a
            # process starting beside this one delays some of an honest candidate's commands),
            # and a candidate that lowers its median claim must under-report most commands of
            # every look.
            first = {k: check[k] for k in ("trusted_overhead_ms", "candidate_overhead_ms", "tolerance_ms")}
            mark = len(self.walls["candidate"])  # each kept batch of the candidate has its probe in `trusted`
            if not self._rounds(["candidate"]):
                return None
            check = timing_check(self.claimed["candidate"][mark:], self.walls["candidate"][mark:],
                                 TimeStats.of(self.trusted[mark:]), ev.device)
            check["first_look"] = first
        return check

    def _step(self, impl: str, keep: bool) -> bool:
        """One batch of `impl`; False when the candidate failed. `keep`: a sample, not a warm-up."""
        ev, n = self.ev, self.n
        items = [(f"{PREFIX[impl]}{self.timed + j}", ev.seeds["timing"] + self.timed + j, None) for j in range(n)]
        self.timed += n
        if impl == "candidate":
            outcomes, wall = ev.run_batch(items, guarded=False, check=self.cfg.timed_check_fraction)
            w0 = time.perf_counter()
            probe = ev.judge.call("probe", ev.left(), n=n)["ms"]
            if keep:
                self.trusted.append((time.perf_counter() - w0) * 1e3 - sum(probe))
        else:
            try:
                with ev.candidate.frozen():  # nothing of the candidate's runs beside a baseline's batch
                    outcomes, wall = ev.run_batch(items, guarded=False, check=0.0, runner=self.runners[impl])
            except WorkerFailure as f:
                self._baseline_failed(impl, self.runners.pop(impl), f)
                return True
        for key, (code, verdict, _) in outcomes.items():
            if verdict is None:
                continue
            self.checked += 1
            if code is not None:
                if code not in (Code.INPUT_MODIFIED, Code.NOT_PLAIN_TENSOR):
                    code = Code.TIMED_OUTPUT_MISMATCH
                ev.res.add(code, f"output of timed call {key[1:]}: {verdict['message']}")
                return False
            ev.record_error(verdict)
        if keep:
            ms = [m for _, _, m in outcomes.values()]
            self.claimed[impl].append(sum(ms))
            self.walls[impl].append(wall)
            self.samples[impl].append(sum(ms) / len(ms))
        return True

    def _pin_down_noisy(self) -> None:
        """More samples of each baseline too noisy to cache (`too_noisy`), until its median is known
        well enough or NOISY_BUDGET times its budget has gone (each), in elapsed time. A noisy median is
        the machine's fault, not the task's: measuring longer is how it gets cached on a busy
        machine instead of being measured again by every evaluation. Counts go to `measured_again`."""
        for impl in [w for w in ("eager", "compile") if w in self.runners]:
            budget_s = min(NOISY_BUDGET * self.cfg.baseline_budget_s, 0.25 * max(self.ev.left(), 0.0))
            begun = time.perf_counter()
            st, more = TimeStats.of(self.samples[impl]), 0
            while too_noisy(st) and time.perf_counter() - begun < budget_s and impl in self.runners:
                need = min(samples_for_precision(st) - st.n, 64)
                for _ in range(max(need, 1)):
                    self._step(impl, keep=True)  # a baseline's failure drops its runner (_baseline_failed)
                    more += 1
                    if impl not in self.runners or time.perf_counter() - begun >= budget_s:
                        break
                st = TimeStats.of(self.samples[impl])
            if more:
                self.measured_again[impl] = more

    def _rounds(self, group: list[str]) -> bool:
        """Interleaved rounds over `group`, rotating the order; False when the candidate failed."""
        for r in range(self.cfg.timing_rounds):
            for impl in group[r % len(group):] + group[: r % len(group)]:  # no fixed position bias
                i, begun = 0, time.perf_counter()
                # Stop at the timed budget, or at three times it in elapsed time: the calls also
                # pay for fresh inputs and checks (costly on the CPU backend).
                while impl in self.runners and i < self.hi and (i < self.lo or (
                        sum(self.walls[impl][-i:] if i else []) < self.chunk_ms[impl]
                        and (time.perf_counter() - begun) * 1e3 < 3 * self.chunk_ms[impl])):
                    if not self._step(impl, keep=True):
                        return False
                    i += 1
        return True

    def _record(self, check: dict[str, Any]) -> bool:
        """The baselines (cached unless noisy), the timing check, the times and the speedups into
        the result; False when the check convicted the candidate."""
        ev, res = self.ev, self.ev.res
        cached, store = ev.cached, ev.baselines
        noisy: list[str] = []
        if cached is None:
            cached = Baselines(eager=TimeStats.of(self.samples["eager"]),
                               compile=TimeStats.of(self.samples["compile"]) if "compile" in self.runners else None,
                               compile_error=self.compile_error, calls_per_batch=self.n,
                               device=res.device, measured_at=baselines_now())
            source = "measured"
            noisy = [f"{w}: median {st.median:.3g} ms known to +-{median_error(st):.2g} ms over {st.n} samples "
                     f"(iqr {st.iqr:.3g} ms); caching needs +-{precision_ms(st):.2g} ms, about "
                     f"{samples_for_precision(st)} samples of this spread"
                     for w, st in (("eager", cached.eager), ("compile", cached.compile))
                     if st is not None and too_noisy(st)]
            if store and not noisy:  # noisy: a busy machine, not worth keeping for every later evaluation
                store.put(ev.task.source, ev.baseline_key, cached)
        else:
            source = "cached"
            if cached.compile_error:
                res.add(Code.BASELINE_COMPILE_UNAVAILABLE, cached.compile_error)
        res.timing_check = check
        check["timed_calls_checked"] = self.checked
        check["calls_per_batch"] = self.n
        check["baselines"] = {"source": source, "key": ev.baseline_key, "measured_at": cached.measured_at}
        if source == "measured" and store:
            check["baselines"]["cached"] = not noisy
            if noisy:
                check["baselines"]["too_noisy"] = noisy
        if self.measured_again:
            check["baselines"]["measured_again"] = dict(self.measured_again)
        if check["tampered"]:
            first = check.get("first_look")
            again = (f" (in two looks; the first: {first['candidate_overhead_ms'] - first['trusted_overhead_ms']:.3f}"
                     " ms more)") if first else ""
            res.add(Code.TIMING_TAMPERED, check["message"] + again)
            return False
        stats = {"eager": cached.eager, "candidate": TimeStats.of(self.samples["candidate"])}
        if cached.compile is not None:
            stats["compile"] = cached.compile
        res.times_ms.update(stats)
        c = stats["candidate"].median
        if c > 0:
            res.speedup_eager = round(stats["eager"].median / c, 4)
            if "compile" in stats:
                res.speedup_compile = round(stats["compile"].median / c, 4)
        return True

    # -- the baselines' runners --
    def _baseline_runners(self) -> dict[str, Worker]:
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

    def _baseline_runner(self, which: str) -> Worker:
        """A runner process holding the reference as `ModelNew` (eager, or under torch.compile), with
        the reference weights, timed through the same commands as the candidate."""
        ev = self.ev
        stage_dir = ev.tmp / which
        stage_dir.mkdir()
        stage(baseline_candidate(ev.task.source, which), stage_dir)
        # Trusted code only: Inductor's compiled kernels are cached across evaluations.
        inductor = str(self.cfg.cache_dir / INDUCTOR)
        return ev.spawn(which, stage_dir, {**ev.env, "TORCHINDUCTOR_CACHE_DIR": inductor})

    def _load_baseline(self, worker: Worker) -> None:
        ev = self.ev
        with ev.on_device():
            loaded = worker.call("load", ev.left(), stage_dir=str(worker.cwd), extension=None,
                                 device=ev.device, init_seed=ev.seeds["init"],
                                 init_inputs=ev.init_inputs, shm_dir=str(ev.shm), policy="none",
                                 ipc_segments=self.cfg.ipc_segments, touch=self.cfg.touch)
            ev.load_weights(worker, loaded["state"])

    def _baseline_failed(self, which: str, worker: Worker, f: WorkerFailure) -> None:
        """The eager runner failing is the reference's failure (it ends the evaluation); the compile
        runner failing only drops that baseline (`baseline_compile_unavailable`)."""
        if which == "eager":
            raise WorkerFailure(Code.REFERENCE_ERROR, f"the reference failed in its runner:\n{f.message}")
        worker.kill()
        self.compile_error = f"torch.compile of the reference failed:\n{f.message}"
        self.ev.res.add(Code.BASELINE_COMPILE_UNAVAILABLE, self.compile_error)
