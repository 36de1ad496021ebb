"""`RayEvaluator`: the Evaluator API on a Ray cluster, for many machines (`pip install cuda-agent[ray]`).

    ray start --head                        # on one machine; `ray start --address=HEAD:6379` on others
    with RayEvaluator(EvalConfig(device="cuda"), address="auto") as ev:
        results = ev.map(pairs)

One actor per GPU of the cluster (per machine for the CPU backend, `actors=` to choose), each
holding a local `Evaluator` on the GPU Ray gave it, with its warm workers, timing lock and caches on
that machine. The driver sends each evaluation to the actor with the fewest in flight. Tasks,
candidates and configs travel as dataclasses; verdicts come back as the EvalResult JSON.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.evaluator import Evaluator, EvaluatorBase
from cuda_agent.evaluate.result import EvalResult
from cuda_agent.tasks import Task


def _ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("RayEvaluator needs Ray: pip install 'cuda-agent[ray]'") from None
    return ray


class _EvalActor:
    """Runs on a cluster node: a local Evaluator on the GPU(s) Ray assigned to this actor."""

    def __init__(self, config: EvalConfig, jobs: int, warm: int | None):
        ray = _ray()
        gpus = [str(g) for g in ray.get_gpu_ids()] if config.device == "cuda" else None
        self.ev = Evaluator(config, jobs=jobs, gpus=gpus or None, warm=warm)

    def evaluate(self, task: Task, candidate: Candidate, config: EvalConfig | None) -> dict[str, Any]:
        return self.ev.evaluate(task, candidate, config).to_json()

    def stats(self) -> dict[str, int]:
        return self.ev.stats()

    def close(self) -> None:
        self.ev.close()


class RayEvaluator(EvaluatorBase):
    def __init__(self, config: EvalConfig | None = None, *, address: str | None = None,
                 actors: int | None = None, jobs_per_actor: int = 2, warm: int | None = None,
                 init: dict[str, Any] | None = None):
        """`address`: the cluster (`"auto"`, `"ray://host:10001"`; None starts a local one unless Ray
        is initialised already). `actors`: how many (default: one per GPU of the cluster, or one for
        the CPU backend). `jobs_per_actor`: evaluations at once on each. `init`: more `ray.init`
        arguments."""
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=address, **(init or {}))
        self.config = config or EvalConfig()
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if self.config.device == "auto":
            self.config = _with_device(self.config, "cuda" if gpus else "cpu")
        cuda = self.config.device == "cuda"
        if cuda and not gpus:
            raise RuntimeError("device=cuda but the Ray cluster has no GPU resources; use device='cpu'")
        n = actors or (gpus if cuda else 1)
        cls = ray.remote(_EvalActor).options(num_gpus=1 if cuda else 0, num_cpus=0 if cuda else 1,
                                             max_concurrency=jobs_per_actor)
        self.actors = [cls.remote(self.config, jobs_per_actor, warm) for _ in range(n)]
        self._inflight = [0] * n
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, task: Task, candidate: Candidate, config: EvalConfig | None = None) -> Future:
        if self._closed:
            raise RuntimeError("this RayEvaluator is closed")
        cfg = _with_device(config, self.config.device) if config is not None else None
        with self._lock:
            i = min(range(len(self.actors)), key=self._inflight.__getitem__)
            self._inflight[i] += 1
        out: Future = Future()

        def done(f: Future) -> None:
            with self._lock:
                self._inflight[i] -= 1
            try:
                out.set_result(EvalResult.from_json(f.result()))
            except BaseException as exc:  # the actor or the node died: Ray's error, for the caller
                out.set_exception(exc)

        self.actors[i].evaluate.remote(task, candidate, cfg).future().add_done_callback(done)
        return out

    def stats(self) -> dict[str, int]:
        ray = _ray()
        per = ray.get([a.stats.remote() for a in self.actors])
        return {k: sum(s.get(k, 0) for s in per) for k in ("workers", "warm", "cold", "forked", "judges_reused")}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = _ray()
        ray.get([a.close.remote() for a in self.actors])
        for a in self.actors:
            ray.kill(a)


def _with_device(config: EvalConfig, device: str) -> EvalConfig:
    import dataclasses

    return dataclasses.replace(config, device=device)
