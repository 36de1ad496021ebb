"""`Evaluator`: many evaluations, concurrently, over every GPU of the machine, with warm workers.

    with Evaluator(EvalConfig(device="cuda"), jobs=8) as ev:
        futures = [ev.submit(task, cand) for task, cand in pairs]       # concurrent.futures.Future
        results = [f.result() for f in futures]
        result = await ev.aevaluate(task, cand)                          # from asyncio code

This is what the agent, RL rewards and the data filter use. Each GPU gets a pool of warm workers
(processes started ahead of need with torch imported: `pool.WarmPool`), and evaluations are spread
over the GPUs, least busy first. A runner serves one evaluation only; a judge, trusted code, may
serve later evaluations on its GPU (`EvalConfig.reuse_judges`). Builds run on the CPU while other evaluations use the GPU. Each GPU has
a readers-writer lock (`locks.DeviceLock`): an evaluation's timed rounds have the GPU to themselves,
while the other evaluations' trials and checks share it between timings and their builds go on
beside. An evaluation is admitted to a GPU only when the memory its task needs (`memory.need`, learned
from the task's first evaluation) fits beside what the evaluations running there were promised, in
every process sharing the cache directory (`locks.MemoryLedger`); it waits for that once its
candidate is built and loaded (`Evaluation`'s `memory`), so builds never wait for the GPU and
hold none of its memory. A task that needs more than the GPU has beside the warm pool runs with
nothing else admitted and the pool's idle workers closed (`WarmPool.lean`). Neighbours can still
crowd each other out (a task not measured yet, admitted by its inputs' bytes alone; a candidate
that allocates more than the reference): an evaluation that fails for want of a resource (out of
memory, or any infra-kind reason such as a reference that could not allocate its inputs) is run
again alone on its GPU (`locks.Gate`, across processes too), once the memory that finished
evaluations' exiting processes still hold is back (the ledger), and that verdict stands.
`evaluate()` of the package is the one-shot form of the same thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable

from cuda_agent.evaluate import memory
from cuda_agent.evaluate.baselines import BaselineCache
from cuda_agent.evaluate.cache_layout import BASELINES
from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.device import gpu_indices, gpu_local_cpus, resolve_device
from cuda_agent.evaluate.evaluation import Evaluation
from cuda_agent.evaluate.isolate import isolation_support
from cuda_agent.evaluate.isolate import CandidateBox
from cuda_agent.evaluate.pool import WarmPool
from cuda_agent.evaluate.process import wait_teardowns
from cuda_agent.evaluate.shape_trials import short_of_memory
from cuda_agent.evaluate.locks import DeviceLock, Gate, MemoryLedger
from cuda_agent.evaluate.result import Code, EvalResult, Kind, Reason
from cuda_agent.tasks import Task


class EvaluatorBase:
    """What every pool offers: `submit` (a Future of an EvalResult), and on top of it `evaluate`,
    `aevaluate` and `map`. `Evaluator` runs on this machine; `RayEvaluator` (ray_pool.py) on a
    Ray cluster."""

    def submit(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> Future:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def evaluate(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> EvalResult:
        """One evaluation; blocks until its verdict."""
        return self.submit(task, candidate, config).result()

    async def aevaluate(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> EvalResult:
        """`evaluate` for asyncio code (the agent loop, rollout servers)."""
        return await asyncio.wrap_future(self.submit(task, candidate, config))

    def map(self, pairs: Iterable[tuple[Task, Candidate]], config: EvalConfig | None = None) -> list[EvalResult]:
        """Evaluate every (task, candidate) pair, as many at a time as the pool runs; results in the
        pairs' order."""
        return [f.result() for f in [self.submit(t, c, config) for t, c in pairs]]

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _measures_baselines(cfg: EvalConfig, task: Task) -> bool:
    """Whether an evaluation of `task` will run the baselines' runners (timing on, and nothing cached
    for the task yet, or no cache): they run the reference too, and hold its memory (memory.need).
    Any entry of the task counts as cached; which one applies is known only once the judge has
    described the device."""
    if not cfg.timing:
        return False
    return not cfg.baseline_cache or not BaselineCache(cfg.cache_dir / BASELINES).snapshot(task.source)["entries"]


def _shortage(res: EvalResult) -> Reason | None:
    """The first failure that a neighbour on the same GPU may have caused (out of memory, or
    infra-kind), or a shape trial skipped for out of memory (shape_trials.py: counted only alone),
    or None."""
    if (r := next((r for r in res.reasons if r.code is Code.OUT_OF_MEMORY or r.kind is Kind.INFRA), None)):
        return r
    if (skip := short_of_memory(res.generalization)) is not None:
        return Reason(Code.OUT_OF_MEMORY, f"a shape trial at {skip['scale']}x ({skip['sizes']}): {skip['why']}")
    return None


class Evaluator(EvaluatorBase):
    def __init__(self, config: EvalConfig | None = None, *, jobs: int | None = None,
                 gpus: Iterable[int | str] | None = None, warm: int | None = None):
        """`config`: the default for every evaluation (each call may pass its own). `jobs`:
        evaluations at once (default: 2 per GPU, or 2 on the CPU backend). `gpus`: the GPUs to use
        (default: all that nvidia-smi lists). `warm`: spare workers kept ready per GPU (0: none;
        default: two per evaluation a GPU runs at once, plus two)."""
        self.config = config or EvalConfig()
        self.device = resolve_device(self.config.device)
        if self.device == "cuda":
            found = [str(g) for g in (gpus if gpus is not None else gpu_indices())]
            if not found:
                raise RuntimeError("device=cuda but no GPU is listed by nvidia-smi; use device='cpu'")
            self.gpus: list[str | None] = found
        else:
            self.gpus = [None]
        self.jobs = jobs or 2 * len(self.gpus)
        per_gpu = -(-self.jobs // len(self.gpus))
        if warm is None:
            warm = 2 * per_gpu + 2
        sup = isolation_support(self.config)  # (raises under `required` where none can be made)
        cfg = self.config

        def boxes(gpu: str | None):
            return (lambda: CandidateBox(sup, cfg.cache_dir, cfg.work_dir, gpu=gpu is not None)) if sup else None

        self._pools = {g: WarmPool({"CUDA_VISIBLE_DEVICES": g} if g is not None else {}, size=warm,
                                   output_limit=self.config.output_limit, cuda=g is not None,
                                   warm_device=self.config.warm_spares,
                                   cpus=gpu_local_cpus(g) if self.config.pin_cpus and g is not None else None,
                                   lock=DeviceLock.of(self.config.cache_dir, "cuda", g) if g is not None else None,
                                   box=boxes(g))
                       if warm > 0 else None for g in self.gpus}
        self._busy = {g: 0 for g in self.gpus}
        self._gates = {g: Gate(DeviceLock.of(self.config.cache_dir, self.device, g, role="gate")) for g in self.gpus}
        self._ledgers: dict[str | None, MemoryLedger | None] = {
            g: MemoryLedger(DeviceLock.of(self.config.cache_dir, "cuda", g, role="memory").base + ".json", room)
            if g is not None and (room := memory.budget(g, warm, per_gpu)) else None
            for g in self.gpus}
        self.reruns = 0  # evaluations run again alone after failing for want of a resource
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(self.jobs, thread_name_prefix="cuda-agent-eval")
        self._closed = False

    def evaluate(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> EvalResult:
        """One evaluation, on the least busy GPU, in the calling thread."""
        return self._run(task, candidate, config)

    def submit(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> Future:
        """Queue an evaluation; the Future's result is its EvalResult (failures are verdicts, never
        exceptions)."""
        if self._closed:
            raise RuntimeError("this Evaluator is closed")
        return self._executor.submit(self._run, task, candidate, config)

    def pool(self, gpu: str | None = None) -> WarmPool | None:
        """The warm pool of GPU `gpu` (None: the CPU backend's), or None without warm workers."""
        return self._pools[gpu]

    def gate(self, gpu: str | None = None) -> Gate:
        """The admission gate of GPU `gpu` (None: the CPU backend's): how many evaluations run on it,
        and the second tries alone."""
        return self._gates[gpu]

    def ledger(self, gpu: str | None = None) -> MemoryLedger | None:
        """The memory ledger of GPU `gpu`, or None (the CPU backend, or a GPU whose memory is unknown)."""
        return self._ledgers[gpu]

    def wait_warm(self, timeout: float = 120.0) -> bool:
        """Wait until every GPU's pool holds its spares, started: what a long-running service is
        between bursts of work (a benchmark measures from there). False on timeout."""
        end = time.monotonic() + timeout
        return all(p.wait_warm(max(end - time.monotonic(), 0.0)) for p in self._pools.values() if p is not None)

    def stats(self) -> dict[str, int]:
        """Workers handed out warm and started cold, spares forked from a zygote, judges kept from
        an earlier evaluation, and times a pool was emptied for a task beyond the memory budget
        (`WarmPool.lean`), over all GPUs."""
        pools = [p for p in self._pools.values() if p is not None]
        taken = sum(p.taken for p in pools)
        cold = sum(p.cold for p in pools)
        return {"workers": taken, "warm": taken - cold, "cold": cold, "forked": sum(p.forked for p in pools),
                "judges_reused": sum(p.reused for p in pools), "pools_emptied": sum(p.leaned for p in pools)}

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=True)
        wait_teardowns()
        for pool in self._pools.values():
            if pool is not None:
                pool.close()

    # -- internals --
    @contextlib.contextmanager
    def _memory(self, gpu: str | None, need: int):
        """The task's `need` of GPU `gpu`'s memory, promised in its ledger for the evaluation's device
        work. A need beyond the ledger's budget (what the GPU has beside the warm pool and the
        evaluations building) is let in only with nothing else promised, and the pool's idle spares
        and kept judges are closed (`WarmPool.lean`): their memory is what it lacks. They are
        closed from when it begins to wait, so that their exits overlap the wait, and the pool
        stays empty across such evaluations queued one after another."""
        ledger, pool = self._ledgers[gpu], self._pools[gpu]
        if ledger is None:
            yield
            return
        with (pool.lean() if pool is not None and need > ledger.budget else contextlib.nullcontext()), \
                ledger.hold(need):
            yield

    def _run(self, task: Task, candidate: Candidate, config: EvalConfig | None) -> EvalResult:
        cfg = dataclasses.replace(config or self.config, device=self.device)
        with self._lock:
            gpu = min(self.gpus, key=lambda g: self._busy[g])
            self._busy[gpu] += 1
        gate = self._gates[gpu]
        ledger = self._ledgers[gpu]
        cached = ledger is None or not _measures_baselines(cfg, task)  # (a CPU has no ledger)
        need = memory.need(cfg.cache_dir, task.source, cached) if ledger is not None else 0

        @contextlib.contextmanager
        def admit(inputs_bytes: int | None = None):
            """The GPU for the evaluation's device work: a share of the gate (so a second try alone
            waits only for the evaluations on the GPU, not for builds), then the task's memory:
            what it was measured to need, or, not measured yet, what its inputs' bytes (the
            judge's, on the meta device) let one expect."""
            wants = need or (memory.estimate(inputs_bytes, cached) if inputs_bytes else 0)  # (no ledger: unused)
            with gate.shared(), self._memory(gpu, wants):
                yield

        try:
            waited = 0.0
            res = Evaluation(task, candidate, cfg, pool=self._pools[gpu], gpu=gpu, background_teardown=True,
                             memory=admit, retry_alone=True).run()
            # A neighbour on the GPU (an evaluation of this pool or of another process sharing the
            # cache's locks) may have taken what it lacked: a second try, with the GPU to itself.
            if (short := _shortage(res)) is not None:
                first = res
                t0 = time.monotonic()
                with gate.alone():
                    waited += time.monotonic() - t0
                    with self._lock:
                        self.reruns += 1
                    # alone in the gate, and alone in memory too: more than the whole budget, so
                    # it waits for what evaluations that finished (the first try among them) still
                    # hold while their processes exit, goes before smaller jobs, and runs with the
                    # warm pool's spares and kept judges closed. Not the task's need: for a task
                    # not measured yet that is an estimate from its inputs alone, and the model
                    # behind either (memory.need) is what a try that ran short may have proved wrong.
                    res = Evaluation(task, candidate, cfg, pool=self._pools[gpu], gpu=gpu, background_teardown=True,
                                     memory=(lambda _=None: self._memory(gpu, ledger.budget + 1)) if ledger is not None
                                     else None).run()
                res.add(Code.RETRIED_ALONE, f"the first try, beside other evaluations on the GPU, failed with "
                                            f"{short.code.value}: {short.gist()}; this verdict is the second try, alone")
                res.phases_s["first_try"] = first.phases_s.get("total", 0.0)
            # A second try's wait for the GPU to itself: not in "total" (a first try's wait for the
            # GPU and its memory is in it, as the phase "memory_admission").
            res.phases_s["admission"] = round(waited, 4)
            return res
        finally:
            with self._lock:
                self._busy[gpu] -= 1
