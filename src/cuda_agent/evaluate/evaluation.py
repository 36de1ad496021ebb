"""One evaluation of a candidate against a task, from the policy check to the reward.

The harness process never imports candidate code, and does not need torch. It checks the policy,
stages the candidate's trusted files, builds its extension (build.py), takes workers (process.py,
pool.py) and drives them over private channels: the *judge* holds the reference and decides
correctness; the *candidate* runs the code under test (worker/). Correctness comes first: fresh
inputs per trial, then stress trials, each call checked by the judge. Then the timing protocol
(protocol.py) measures the candidate against the eager and torch.compile baselines, and the
weights are checked once more. Every step has a deadline; a worker that hangs, crashes or lies
about the protocol ends the evaluation with a reason code, and its process group is killed. The
verdict and the reward are computed here, from what the judge established and what the harness
measured itself.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import shutil
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from cuda_agent import sandbox
from cuda_agent.evaluate import memory, policy
from cuda_agent.evaluate.baselines import BaselineCache, baseline_key
from cuda_agent.evaluate.build import BuildResult, build_extension
from cuda_agent.evaluate.cache_layout import BASELINES, PCH, TORCH_EXTENSIONS
from cuda_agent.evaluate.candidate import Candidate, stage
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.device import cuda_arch, resolve_device
from cuda_agent.evaluate.isolate import (BUILDS_INSIDE, CandidateBox, candidate_env, isolation_support,
                                        isolation_unavailable)
from cuda_agent.evaluate.locks import DeviceLock, LockTimeout
from cuda_agent.evaluate.pool import WarmPool
from cuda_agent.evaluate.process import Worker, WorkerFailure, close_all, scrubbed_env
from cuda_agent.evaluate.protocol import BATCH_BYTES, Timing, batch_size, too_slow_to_time
from cuda_agent.evaluate.result import Code, EvalResult
from cuda_agent.evaluate.shape_trials import shape_trials
from cuda_agent.evaluate.reward import milestone_reward, sol_reward
from cuda_agent.evaluate.sol import result_sol
from cuda_agent.tasks import Task

JUDGE_RESET_S = 10.0  # seconds a judge may take to forget its evaluation (else it is closed)
MEMORY_ASK_S = 2.0  # seconds a worker may take to say its device memory's peak (`_record_peak`)
PEAKS_S = 120.0  # seconds the judge may take to measure a device's peaks (once per machine, sol.py)
_RNG = random.SystemRandom()  # which timed calls get checked: unpredictable, like the seeds
_OWNED_DIR = re.compile(r"^cuda-agent-(eval|shm|spare)-(\d+)-")

# One call of a batch: (trial key, seed, stress variant or None).
Item = tuple[str, int, "int | None"]
# What the judge said of one call: (failure code or None, its verdict or None when not checked, claimed ms).
Outcome = tuple["Code | None", "dict[str, Any] | None", float]


def evaluate(task: Task, candidate: Candidate, config: EvalConfig | None = None) -> EvalResult:
    """Evaluate `candidate` on `task`. Never raises for anything the candidate does: every failure
    is a reason in the returned `EvalResult`."""
    return Evaluation(task, candidate, config or EvalConfig()).run()


def weights_seed(init_seed: int) -> int:
    """The seed of an evaluation's re-drawn weights, derived from its init seed (one LCG step), so
    that a result's `seeds` list replays them too."""
    return (init_seed * 6364136223846793005 + 1442695040888963407) % (1 << 62)


def shm_root() -> str | None:
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def sweep_stale(work: Path | None) -> None:
    """Remove the directories of evaluations whose harness process is gone (killed with SIGKILL,
    it could not clean up). Directories are named by the harness's pid; a live pid is left alone."""
    for root in [work] if work else [tempfile.gettempdir(), shm_root()]:
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


class Evaluation:
    def __init__(self, task: Task, candidate: Candidate, config: EvalConfig, pool: WarmPool | None = None,
                 gpu: str | None = None, background_teardown: bool = False,
                 memory: Callable[[int | None], contextlib.AbstractContextManager] | None = None,
                 retry_alone: bool = False):
        """`pool`: warm workers to take from; `gpu`: the GPU (index) it runs on.
        `retry_alone`: a shortage of this try (out of memory beside other evaluations) is followed by
        a second try with the device to itself (the Evaluator's), so shape trials may leave out of
        memory at larger sizes to that try (shape_trials.py); otherwise it counts here.
        `background_teardown`: return the verdict once the workers' output is in, while their
        processes exit (and their CUDA contexts go) in a thread of their own (`wait_teardowns`).
        `memory`: the admission to the GPU's work and memory (the Evaluator's gate and
        `MemoryLedger.hold`), entered once the candidate is loaded, before the first inputs are
        made, and left when its workers are stopped: the build before it holds none of the GPU (a
        cold build is most of a fresh evaluation), so evaluations building beside each other do not
        keep one another off it. It is given the bytes of one call's inputs as the judge told them
        on the meta device (None: unknown), for a task whose need is not measured yet."""
        self.task, self.cand, self.cfg = task, candidate, config
        self.background_teardown = background_teardown
        self.memory, self.retry_alone = memory, retry_alone
        self.held = contextlib.ExitStack()
        self.pool, self.gpu = pool, gpu
        self.res = EvalResult(task=task.id, candidate=candidate.origin, config=config.to_json())
        self.workers: list[Worker] = []
        self.judge: Worker | None = None
        self.slots: dict[tuple[str, str], Any] = {}  # input slots by (runner, name): their specs
        self.unchecked: list[str] = []  # timed calls not picked for checking (the judge forgets them)
        self.batch: int | None = None  # calls per command, set from the first trial's sizes
        self.work: dict[str, Any] | None = None  # the reference's FLOPs and bytes (the judge counts them once)
        self.in_bytes: int | None = None  # bytes of one call's inputs at the task's sizes
        self.inputs_bytes: int | None = None  # the same, told on the meta device before any is made
        self.skipped: dict[str, str] = {}  # why the judge skipped a trial (shape trials)
        self.deadline = time.monotonic() + config.timeout_s
        self.sandbox = isolation_support(config)

    # -- what the timing protocol (protocol.py) uses too --
    def left(self) -> float:
        """Seconds left before the current deadline (at least 10 ms)."""
        return max(self.deadline - time.monotonic(), 0.01)

    @contextlib.contextmanager
    def on_device(self, exclusive: bool = False):
        """The device lock (locks.py): exclusive for timed rounds, shared for other work on the
        device. Waiting too long is the evaluator's failure, not the candidate's."""
        try:
            with (self.lock.exclusive(self.left()) if exclusive else self.lock.shared(self.left())):
                yield
        except LockTimeout:
            raise WorkerFailure(Code.INFRA_ERROR, f"waited {self.cfg.timeout_s:.0f} s for the device lock "
                                f"{self.lock.base}: other evaluations kept the device busy; run fewer at "
                                "once") from None

    def phase(self, name: str, t0: float) -> None:
        """Add the time since `t0` to the phase `name` of the result."""
        self.res.phases_s[name] = round(self.res.phases_s.get(name, 0.0) + time.monotonic() - t0, 4)

    def spawn(self, role: str, cwd: Path, env: dict[str, str]) -> Worker:
        """A worker for `role`: a warm spare from the pool when there is one, else a fresh process.
        A candidate runs in a sandbox where the evaluation has one (`self.sandbox`): a sandboxed
        spare of the pool, or a fresh process in a sandbox of its own."""
        boxed = role == "candidate" and self.sandbox is not None
        if self.pool is not None and (not boxed or self.pool.box is not None):  # the pool of this evaluation's GPU
            worker = self.pool.take(role, cwd, env, self.cfg.timeout_s)
        elif boxed:
            box = CandidateBox(self.sandbox, self.cfg.cache_dir, self.cfg.work_dir, gpu=self.device == "cuda")
            try:
                worker = Worker(role, box.stage, scrubbed_env({**env, **box.env()}), self.cfg.output_limit, box=box)
            except BaseException:
                box.close()
                raise
        else:
            worker = Worker(role, cwd, scrubbed_env(env), self.cfg.output_limit)
        self.workers.append(worker)
        return worker

    def run_reference(self, cmd: str, **args: Any) -> dict[str, Any]:
        """A judge command that runs the task's own code (its Model, its inputs): a judge that hangs
        or crashes in it is the task's failure (`reference_error`), not the evaluator's."""
        try:
            return self.judge.call(cmd, self.left(), **args)
        except WorkerFailure as f:
            if f.code is Code.INFRA_ERROR:
                raise WorkerFailure(Code.REFERENCE_ERROR, f.message) from None
            raise

    def load_weights(self, runner: Worker, state: Any) -> None:
        """The reference's weights into `runner`'s ModelNew (worker/judge.py, `Judge.cmd_weights`):
        by name, or under the kernelbench profile by the values its tensors were built with."""
        args = dict(state=state, owner=runner.role, policy=self.cfg.policy)
        done = self.judge.call("weights", self.left(), **args)
        if done.get("need_values"):
            values = runner.call("state", self.left())["state"]
            done = self.judge.call("weights", self.left(), values=values, **args)
        runner.call("load_weights", self.left(), keys=done["filled"])
        if runner.role == "candidate":
            self.res.weights = done["weights"]

    def _record_limits(self) -> None:
        """The sandbox's limits that the candidate hit (memory, processes, disk), before its sandbox
        ends: in `isolation.limits_hit`, and as the verdict's reason, which names them (what the
        candidate saw was only a process killed or a fork refused)."""
        box = self.candidate.box if getattr(self, "candidate", None) is not None else None
        if box is None or not (hit := box.limits_hit()):
            return
        self.res.isolation["limits_hit"] = hit
        self.res.add(Code.LIMIT_EXCEEDED, box.limit_message(hit))

    def no_strays(self, cmd: str) -> None:
        """Convict a candidate that left a process running in its sandbox after `cmd` (one that
        left its process group or double-forked escapes the guard's check of its children, and
        the freeze of its process group): what it runs is work the timer does not see."""
        if strays := self.candidate.strays():
            raise WorkerFailure(Code.HIDDEN_WORK, f"process(es) {', '.join(strays[:4])} started by the candidate "
                                f"were still running after `{cmd}`: work outside the call hides from the "
                                "timer; wait for every process you start")

    def record_error(self, verdict: dict[str, Any], rec: dict[str, Any] | None = None) -> None:
        """Keep the worst error statistics of the checked calls (and a trial's own, in `rec`)."""
        err = verdict.get("error")
        if not isinstance(err, dict):
            return
        stats = {k: float(err.get(k, 0.0)) for k in ("max_abs", "rel_norm")}
        if rec is not None:
            rec["error"] = stats
        worst = self.res.errors or {"max_abs": 0.0, "rel_norm": 0.0}
        self.res.errors = {k: max(worst[k], stats[k]) for k in worst}

    def run_batch(self, items: list[Item], guarded: bool, check: float = 1.0,
                  runner: Worker | None = None, sizes: dict[str, Any] | None = None) -> tuple[dict[str, Outcome], float]:
        """One command of back-to-back calls of the candidate (or of a baseline's `runner`), one per
        item. The judge writes fresh inputs into one of the runner's input slots per item and
        flushes the caches; the runner makes the calls (its claimed times and the harness's wall
        time of the whole command are both kept); then each call's output, with probability `check`
        (decided after the command, so the candidate cannot know), is exported and compared with the
        reference while the runner's process is stopped. Correctness trials, timed calls and the
        baselines' timed calls go through here alike.

        `sizes`: the task's sizes to make the inputs at (shape trials: shape_trials.py).

        Returns {trial: outcome}, without the trials skipped (stress trials whose reference is not
        finite; shape trials the task cannot take: why in `self.skipped`), and the wall ms.
        Checking stops at the first failure."""
        judge, cand = self.judge, runner or self.candidate
        forget, self.unchecked = self.unchecked, []
        slots = [f"k{i}" for i in range(len(items))]
        prep = judge.call("prepare", self.left(), reference=check >= 1.0, forget=forget, items=[
            {"trial": t, "seed": seed, "stress": stress, "fill": self.slots.get((cand.role, slot))}
            for (t, seed, stress), slot in zip(items, slots)], **({"sizes": sizes} if sizes else {}))
        if self.work is None and isinstance(prep.get("work"), dict):
            self.work = prep["work"]
        if self.in_bytes is None:
            self.in_bytes = prep["in_bytes"]
        if self.batch is None:
            self.batch = batch_size(prep["in_bytes"], prep["out_bytes"], prep["ref_ms"],
                                    self.cfg.batch_calls, BATCH_BYTES[self.device])
            if self.device == "cuda":  # what the next evaluation of this task is admitted by
                memory.record(self.cfg.cache_dir, self.task.source, prep["in_bytes"], prep["out_bytes"],
                              prep.get("ref_work_bytes", 0))
        live = []
        for (trial, _, _), slot, p in zip(items, slots, prep["items"]):
            if p["skip"]:
                self.skipped[trial] = p.get("why") or ""
                continue
            if not p["filled"]:
                spec = cand.call("alloc", self.left(), key=slot, spec=p["spec"])["spec"]
                self.slots[(cand.role, slot)] = spec
                judge.call("fill", self.left(), trial=trial, spec=spec)
            live.append((trial, slot))
        if not live:
            return {}, 0.0
        # Wake the process first: one woken from sleep answers late, which would count in `run`'s wall
        # time (docs/measured/2026-12-07-figures-from-the-code.md).
        cand.call("ping", self.left())
        w0 = time.perf_counter()
        ran = cand.call("run", self.left(), keys=[slot for _, slot in live], guarded=guarded)
        wall = (time.perf_counter() - w0) * 1e3
        if runner is None:
            self.no_strays("run")
        ms = ran.get("ms")
        if not (type(ms) is list and len(ms) == len(live) and all(type(m) is float and m >= 0 for m in ms)
                and sum(ms) <= wall):
            raise WorkerFailure(Code.TIMING_TAMPERED, f"the candidate claimed {ms!r} ms for {len(live)} "
                                f"call(s) that took {wall:.3f} ms of the harness's wall-clock time")
        outcomes: dict[str, Outcome] = {}
        for (trial, slot), m in zip(live, ms):
            if check <= 0 or (check < 1.0 and _RNG.random() >= check):
                self.unchecked.append(trial)
                outcomes[trial] = (None, None, m)
                continue
            exp = cand.call("export", self.left(), key=slot)
            with cand.frozen():
                verdict = judge.call("check", self.left(), trial=trial, out=exp.get("out"),
                                     plain=exp.get("plain") is True, atol=self.cfg.atol, rtol=self.cfg.rtol,
                                     norm_tol=self.cfg.norm_tol)
            code = Code(verdict["code"]) if verdict["code"] is not None else None
            outcomes[trial] = (code, verdict, m)
            if code is not None:
                break
        return outcomes, wall

    # -- the evaluation --
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
        sweep_stale(work)
        pid = os.getpid()
        tmp = Path(tempfile.mkdtemp(prefix=f"cuda-agent-eval-{pid}-", dir=work))
        shm = Path(tempfile.mkdtemp(prefix=f"cuda-agent-shm-{pid}-", dir=work or shm_root()))
        try:
            self._run(tmp, shm)
        except WorkerFailure as f:
            self.res.add(f.code, f.message)
        except Exception as exc:  # a bug of ours, or a system fault: a verdict all the same
            self.res.add(Code.INFRA_ERROR, "the evaluator failed: " + "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:])
        finally:
            t0 = time.monotonic()
            self._record_limits()
            self._record_peak()
            self._record_sol()
            self._keep_judge()
            # the memory admitted with goes back once the processes holding it are gone
            reaping = close_all(self.workers, self.lock, then=self.held.close)
            if not self.background_teardown:
                reaping.join()
            self.phase("teardown", t0)
            self._record_output()
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(shm, ignore_errors=True)
        self.res.correct = self.res.correct and not self.res.failures
        self.res.reward = (sol_reward(self.res.correct, (self.res.sol or {}).get("fraction"))
                           if self.cfg.reward == "sol" else
                           milestone_reward(self.res.correct, self.res.speedup_eager, self.res.speedup_compile))
        self.res.phases_s["total"] = round(time.monotonic() - t_start, 4)
        return self.res

    def _run(self, tmp: Path, shm: Path) -> None:
        if not self._policy_allows():
            return
        # The task's cached baselines, read before any worker starts (nothing the candidate writes
        # can reach its own evaluation).
        cfg = self.cfg
        self.baselines = BaselineCache(cfg.cache_dir / BASELINES) if cfg.baseline_cache and cfg.timing else None
        self.baseline_snapshot = self.baselines.snapshot(self.task.source) if self.baselines else None
        self.tmp, self.shm = tmp, shm
        self.stage_dir = tmp / "stage"
        self.stage_dir.mkdir()
        stage(self.cand, self.stage_dir)
        self.builds = None
        self.res.isolation = sandbox.record(None, why=isolation_unavailable(cfg))
        # A folder of torch's extension cache per candidate: model-written kernels name their
        # extensions alike ("matmul_cuda"), and two of them built at once into one folder break
        # each other's build; the same candidate again finds its build. (Its load_inline calls
        # build in a folder named by their sources instead: worker/inline_build.py.)
        ext_dir = cfg.cache_dir / TORCH_EXTENSIONS / self.cand.sha256[:16]
        self.env = {"TORCH_EXTENSIONS_DIR": str(ext_dir), "TMPDIR": str(tmp)}
        if self.gpu is not None:
            self.env["CUDA_VISIBLE_DEVICES"] = self.gpu
        t0 = time.monotonic()
        self.judge = self.spawn("judge", tmp, self.env)
        self.candidate = self.spawn("candidate", self.stage_dir, {**self.env, **candidate_env(tmp)})
        self.phase("workers", t0)
        box = self.candidate.box
        if box is not None:  # it works in its sandbox's folders: the sources go there, its buffers too
            self.stage_dir, self.shm = box.stage, box.shm
            stage(self.cand, self.stage_dir)
            self.builds = box.builds_for(cfg.build_timeout_s)
            self.candidate.requests = self.builds.handle  # its builds, in `load` or later (built in forward)
            self.res.isolation = box.isolation()
        built = self._build_beside_setup()
        if built is not None and not built.ok:
            self.res.add(Code.BUILD_TIMEOUT if built.timed_out else Code.COMPILE_ERROR, built.log)
            return
        self._load(built)
        call_ms = self._correctness()
        if call_ms is None:
            return
        self.res.correct = True
        if not cfg.timing:
            self.res.add(Code.TIMING_SKIPPED, "timing was switched off; the reward is at most 1")
        elif too_slow := too_slow_to_time(call_ms, self.batch or 1, cfg, self.left()):
            self.res.add(Code.TIMING_SKIPPED, too_slow)
        elif not Timing(self).run():
            self.res.correct = False
            return
        self._check_weights()
        if cfg.shapes and self.res.correct:
            shape_trials(self)

    def _policy_allows(self) -> bool:
        """The static policy checks (policy.py); each violated rule becomes a reason."""
        t0 = time.monotonic()
        violations = policy.check(self.cand, self.cfg.policy)
        self.phase("policy", t0)
        by_code: dict[Code, list[str]] = {}
        for v in violations:
            by_code.setdefault(v.code, []).append(str(v))
        for code, lines in by_code.items():
            more = f"\n... and {len(lines) - 20} more" if len(lines) > 20 else ""
            self.res.add(code, f"policy {self.cfg.policy}: " + "\n".join(lines[:20]) + more)
        return not violations

    def _build_beside_setup(self) -> BuildResult | None:
        """Build the candidate's extension on a thread while the judge sets the reference up; read
        the cached baselines once the judge has said which device they are for."""
        cfg, t0 = self.cfg, time.monotonic()
        arch = cuda_arch() if self.device == "cuda" else None
        with ThreadPoolExecutor(1) as builder:
            fut = builder.submit(build_extension, self.cand, self.device, arch, cfg.cache_dir,
                                 cfg.build_timeout_s, self.sandbox)
            self.deadline = time.monotonic() + cfg.timeout_s
            try:
                with self.on_device():  # (waiting too long for it stays an infra_error)
                    setup = self.run_reference("setup", task_source=self.task.source, origin=self.task.origin,
                                               device=self.device, init_seed=self.seeds["init"],
                                               weights_seed=self.seeds["weights"], shm_dir=str(self.shm),
                                               touch=cfg.touch)
            except WorkerFailure:
                fut.cancel()
                raise
            finally:
                self.phase("reference_setup", t0)
            self.res.device = setup["device"]
            self.res.weights = setup["weights"]
            self.inputs_bytes = setup.get("inputs_bytes")
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
        return built

    def _load(self, built: BuildResult | None) -> None:
        """Load the candidate (single files build their inline extensions here), then the
        reference's weights into it."""
        cfg, t0 = self.cfg, time.monotonic()
        if self.candidate.box is not None:
            self.candidate.box.settle()
        try:
            loaded = self.candidate.call(
                "load", cfg.build_timeout_s, stage_dir=str(self.stage_dir),
                extension=str(built.so_path) if built else None, device=self.device,
                init_seed=self.seeds["init"], init_inputs=self.init_inputs, shm_dir=str(self.shm),
                policy=cfg.policy, ipc_segments=cfg.ipc_segments, touch=cfg.touch, stream_check=cfg.stream_check,
                pch_dir=str(cfg.cache_dir / PCH) if cfg.inline_pch else None,
                inline_builds=(f"{BUILDS_INSIDE}/by_source" if self.builds is not None
                               else str(cfg.cache_dir / TORCH_EXTENSIONS / "by_source")),
                light_headers=cfg.inline_light_headers, tensor_header=cfg.inline_tensor_header,
                remote_builds=self.builds is not None)
        except WorkerFailure as f:
            self.res.compiled = f.code not in (Code.COMPILE_ERROR, Code.LOAD_ERROR, Code.BUILD_TIMEOUT)
            if f.code is Code.TIMEOUT:
                f.code = Code.BUILD_TIMEOUT
            raise
        finally:
            self.phase("load", t0)
        self.res.compiled = True
        self.no_strays("load")
        self._record_precision(loaded.get("precision"))
        if self.memory is not None:  # waiting for the GPU's memory is not the candidate's time
            t0 = time.monotonic()
            self.held.enter_context(self.memory(self.inputs_bytes))
            self.phase("memory_admission", t0)
        self.deadline = time.monotonic() + cfg.timeout_s
        t0 = time.monotonic()
        with self.on_device():
            self.res.weights = self.run_reference("judgeable")["weights"]
            self.load_weights(self.candidate, loaded["state"])
        self.phase("weights", t0)

    def _correctness(self) -> list[float] | None:
        """Fresh inputs per trial, then stress trials. The first trial runs alone; its sizes set how
        many calls each later command makes (unless cached baselines fixed that), and the next
        command reuses its input buffer, refilled: memoising on buffers shows here. Returns the
        harness's wall time per call of each command, or None when a trial failed."""
        t0 = time.monotonic()
        plan = [(f"c{i}", sd, None) for i, sd in enumerate(self.seeds["trials"])]
        plan += [(f"s{i}", sd, i) for i, sd in enumerate(self.seeds["stress"])]
        done = 0
        call_ms: list[float] = []
        try:
            while done < len(plan):
                items = plan[done:done + (self.batch if done else 1)]  # the first alone, then batches
                done += len(items)
                with self.on_device():
                    outcomes, wall = self.run_batch(items, guarded=True)
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
                        return None
                    self.record_error(verdict, rec)
        finally:
            self.phase("correctness", t0)
        return call_ms

    def _check_weights(self) -> None:
        """ModelNew's parameters and buffers after every call are still what was loaded."""
        t0 = time.monotonic()
        with self.on_device():
            state = self.candidate.call("state", self.left())
            self._record_precision(state.get("precision"))
            verdict = self.judge.call("check_state", self.left(), state=state.get("state"))
        self.phase("weights", t0)
        if verdict["code"] is not None:
            self.res.add(Code(verdict["code"]), verdict["message"])
            self.res.correct = False

    def _record_precision(self, precision: Any) -> None:
        if not isinstance(precision, dict):
            return
        self.res.device["candidate_precision"] = precision
        if precision.get("matmul_allow_tf32") or precision.get("float32_matmul_precision") not in (None, "highest"):
            if not any(r.code is Code.REDUCED_PRECISION for r in self.res.reasons):
                self.res.add(Code.REDUCED_PRECISION, f"the candidate switched on reduced-precision float32 "
                             f"matmuls ({precision}); allowed within the tolerance")

    def _record_output(self) -> None:
        """What the candidate's process printed: kept bounded, its size recorded."""
        cand = next((w for w in self.workers if w.role == "candidate"), None)
        if cand is None:
            return
        total = cand.stdout.total + cand.stderr.total
        self.res.candidate_output = {"stdout": cand.stdout.text(), "stderr": cand.stderr.text(), "bytes": total}
        if total > self.cfg.output_limit:
            self.res.add(Code.OUTPUT_TRUNCATED, f"the candidate wrote {total} bytes of output; the first and "
                         f"last {self.cfg.output_limit // 2} of each stream are kept")

    def _record_peak(self) -> None:
        """On a GPU, after an evaluation that ran to its end: what the judge's and the candidate's
        processes held at their peak (each's reserved memory and a context), which the next
        evaluation of the task is admitted by (memory.py). A process that cannot say in
        `MEMORY_ASK_S` leaves the figure unrecorded."""
        if self.device != "cuda" or self.res.failures or self.batch is None:
            return
        total = 0
        for role in ("judge", "candidate"):
            worker = next((w for w in self.workers if w.role == role), None)
            try:
                got = worker.call("memory", MEMORY_ASK_S)["reserved_peak"] if worker is not None else None
            except (WorkerFailure, KeyError):
                got = None
            if type(got) is not int or got < 0:
                return
            total += got + memory.CONTEXT
        memory.record_peak(self.cfg.cache_dir, self.task.source, total)

    def _record_sol(self) -> None:
        """The result's `sol` (sol.py), while the judge lives: it measures the device's peaks where
        no datasheet or cache has them, only when the candidate was timed (for its fraction)."""
        cand, judge = self.res.times_ms.get("candidate"), self.judge
        why = None if cand is not None else next((f"the candidate was not timed ({r.code.value})" for r in self.res.reasons
                                                   if r.code is Code.TIMING_SKIPPED or r.is_failure), "the candidate was not timed")
        live = cand is not None and judge is not None and judge.proc.poll() is None
        self.res.sol = result_sol(self.work, self.res.device, self.cfg.cache_dir, cand.median if cand else None, why,
                                  (lambda: judge.call("peaks", PEAKS_S)["peaks"]) if live else None)

    def _keep_judge(self) -> None:
        """Give the judge back to the pool for another evaluation when it may judge again: it is
        alive, its evaluation did not end in its own or the reference's failure, and it has
        forgotten everything and found its process as clean as it started (worker/judge.py,
        `Judge.cmd_reset`). Otherwise it closes with the other workers."""
        judge = self.judge
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
