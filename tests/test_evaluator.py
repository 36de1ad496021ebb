"""The Evaluator API: concurrent evaluations with warm workers, futures and asyncio, the device lock."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest

from cuda_agent.evaluate import Code, EvalConfig, Evaluator, load_candidate
from cuda_agent.evaluate.pool import WarmPool
from cuda_agent.evaluate.process import Worker, WorkerFailure, close_all, scrubbed_env, wait_teardowns
from cuda_agent.evaluate.locks import DeviceLock, LockTimeout
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
TASK = DATA / "relu_bias_task.py"


def _cands(tmp_path: Path) -> dict[str, object]:
    right = (DATA / "relu_bias_model_new.py").read_text()
    wrong = right.replace("torch.relu(x + self.bias)", "torch.relu(x - self.bias)")
    assert wrong != right
    out = {}
    for name, src in (("right", right), ("wrong", wrong)):
        (tmp_path / f"{name}.py").write_text(src)
        out[name] = load_candidate(tmp_path / f"{name}.py")
    return out


def _cfg(tmp_path: Path, **kw) -> EvalConfig:
    return EvalConfig(device="cpu", cache_dir=tmp_path / "cache", policy="kernelbench", compile_baseline=False,
                      timing_budget_s=0.1, timeout_s=120, **kw)


def test_map_keeps_order_and_uses_warm_workers(tmp_path):
    task, c = load_task(TASK), _cands(tmp_path)
    with Evaluator(_cfg(tmp_path), jobs=2, warm=2) as ev:
        results = ev.map([(task, c["right"]), (task, c["wrong"]), (task, c["right"])])
        stats = ev.stats()
    assert [r.correct for r in results] == [True, False, True]
    assert results[1].reward == -1 and results[1].failures[0].code is Code.OUTPUT_MISMATCH
    assert all(r.reward >= 1 for r in (results[0], results[2]))
    # every worker came from a pool; most were started ahead of need (torch already imported)
    assert stats["workers"] >= 6 and stats["warm"] >= 2, stats
    warm = [r for r in results if r.phases_s["reference_setup"] < 1.0]
    assert warm, [r.phases_s for r in results]


def test_submit_and_aevaluate_give_verdicts_and_a_closed_evaluator_refuses_work(tmp_path):
    task, c = load_task(TASK), _cands(tmp_path)
    with Evaluator(_cfg(tmp_path, timing=False), jobs=2, warm=0) as ev:
        fut = ev.submit(task, c["right"])
        got = asyncio.run(ev.aevaluate(task, c["wrong"]))
        assert fut.result(timeout=120).reward == 1
        assert got.reward == -1
        assert ev.stats() == {"workers": 0, "warm": 0, "cold": 0, "forked": 0,
                              "judges_reused": 0, "pools_emptied": 0}  # warm=0: no pool at all
    with pytest.raises(RuntimeError, match="closed"):
        ev.submit(task, c["right"])


def test_cuda_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("cuda_agent.evaluate.evaluator.gpu_indices", lambda: [])
    with pytest.raises(RuntimeError, match="no GPU"):
        Evaluator(EvalConfig(device="cuda"))


def test_a_judge_serves_the_next_evaluations_and_a_task_that_changes_torch_gets_a_fresh_one(tmp_path):
    """A judge that forgot its evaluation and found its process as clean as it started judges the
    next one (no CUDA context made and destroyed for it); a task whose code changed torch's global
    state leaves its judge to close, and the next evaluation gets a fresh judge and a right verdict."""
    task, c = load_task(TASK), _cands(tmp_path)
    meddler = tmp_path / "meddling_task.py"
    meddler.write_text(TASK.read_text().replace("class Model", "torch.backends.cudnn.benchmark = "
                                                "not torch.backends.cudnn.benchmark\n\n\nclass Model"))
    with Evaluator(_cfg(tmp_path), jobs=1, warm=2) as ev:
        pool = ev.pool()
        first = [ev.evaluate(task, c[k]) for k in ("right", "wrong", "right")]
        assert [r.correct for r in first] == [True, False, True]
        assert ev.stats()["judges_reused"] == 2 and len(pool.judges) == 1
        kept = pool.judges[0]
        assert ev.evaluate(load_task(meddler), c["right"]).correct  # judged by the kept judge ...
        assert ev.stats()["judges_reused"] == 3 and not pool.judges  # ... which then closed
        wait_teardowns(30)
        assert kept.proc.poll() is not None
        again = ev.evaluate(task, c["wrong"])
        assert again.failures[0].code is Code.OUTPUT_MISMATCH
        assert ev.stats()["judges_reused"] == 3 and len(pool.judges) == 1
        # a kept judge that died meanwhile is replaced by a spare
        os.killpg(pool.judges[0].proc.pid, signal.SIGKILL)
        assert ev.evaluate(task, c["right"]).correct
        assert ev.stats()["judges_reused"] == 3


def test_a_kept_judge_holds_nothing_of_the_last_evaluation_and_a_failed_reference_is_not_kept(tmp_path):
    """Kept, a judge maps none of the last candidate's buffers (its shared-memory files are gone
    from its address space). A task whose reference fails, or which leaves a thread running, ends
    with its judge closed."""
    task, c = load_task(TASK), _cands(tmp_path)
    broken = tmp_path / "broken_task.py"
    broken.write_text(TASK.read_text().replace("return torch.relu(x + self.bias)", "raise ValueError('no')"))
    threaded = tmp_path / "threaded_task.py"
    threaded.write_text("import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True)"
                        ".start()\n" + TASK.read_text())
    with Evaluator(_cfg(tmp_path), jobs=1, warm=2) as ev:
        pool = ev.pool()
        assert ev.evaluate(task, c["right"]).correct
        [judge] = pool.judges
        maps = Path(f"/proc/{judge.proc.pid}/maps").read_text()
        assert "cuda-agent-shm-" not in maps and "cuda-agent-eval-" not in maps
        # (untimed: the baselines' runners would refuse the thread themselves, a reference_error)
        for bad, code in ((broken, Code.REFERENCE_ERROR), (threaded, None)):
            res = ev.evaluate(load_task(bad), c["right"], _cfg(tmp_path, timing=False))
            assert (res.failures[0].code if res.failures else None) is code, res.failures
            assert not pool.judges  # the judge that served it was not kept
            wait_teardowns(30)
            assert judge.proc.poll() is not None
            assert ev.evaluate(task, c["right"]).correct  # a fresh judge, kept in turn
            [judge] = pool.judges


def test_judge_process_state_sees_patches_and_switches(monkeypatch):
    """What a judge checks before serving another evaluation: stable when nothing changed, and
    every change a task could make to a later task's reference shows."""
    import torch

    from cuda_agent.evaluate.worker.common import process_state, state_changes

    before = process_state()
    assert state_changes(before, process_state()) == []
    monkeypatch.setattr(torch.nn.functional, "gelu", lambda x, approximate="none": x)
    monkeypatch.setattr(torch.Tensor, "add", lambda a, b: a)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", not torch.backends.cudnn.deterministic)
    torch.set_default_dtype(torch.float64)
    try:
        changes = state_changes(before, process_state())
    finally:
        torch.set_default_dtype(torch.float32)
    assert any(c.startswith("torch.nn.functional: gelu replaced") for c in changes), changes
    assert any(c.startswith("torch.Tensor: add replaced") for c in changes), changes
    assert any(c.startswith("cudnn:") for c in changes) and any(c.startswith("default dtype:") for c in changes)


def test_pool_replaces_a_spare_that_died(tmp_path):
    pool = WarmPool(size=1)
    try:
        end = time.monotonic() + 120
        while not pool.spares and time.monotonic() < end:  # the pool fills once its zygote is warm
            time.sleep(0.1)
        [spare] = pool.spares
        os.killpg(spare.proc.pid, signal.SIGKILL)
        spare.proc.wait(timeout=10)
        work = tmp_path / "w"
        work.mkdir()
        w = pool.take("judge", work, {"TMPDIR": str(work)}, timeout=60)
        assert w.role == "judge" and w.proc.poll() is None
        assert pool.cold == 1 and pool.taken == 1
        w.close()
    finally:
        pool.close()
    assert not pool.dir.exists()


def _zygote_pool(size: int = 1, **kw) -> WarmPool:
    """A pool whose spares are all forked from its zygote."""
    pool = WarmPool(size=size, **kw)
    assert pool.zygote is not None and pool.zygote.ready.wait(120), "the zygote did not warm up"
    with pool.lock:
        started, pool.spares = pool.spares, []
    for w in started:
        w.close()
    pool.fill()
    assert all(w.forked for w in pool.spares)
    return pool


def test_zygote_forks_spares_and_reports_how_they_ended(tmp_path):
    """A forked spare serves as a worker like a fresh one; the zygote, its parent, reports its exit
    code (0 for a clean exit, the negative signal number for a kill), and the harness reads it
    through the same Popen-like interface."""
    pool = _zygote_pool(size=2)
    try:
        work = tmp_path / "w"
        work.mkdir()
        judge = pool.take("judge", work, {"TMPDIR": str(work)}, timeout=60)
        assert judge.forked and judge.proc.poll() is None
        assert os.getpgid(judge.proc.pid) == judge.proc.pid  # a process group of its own
        judge.close()
        assert judge.proc.returncode == 0
        cand = pool.take("candidate", work, {"TMPDIR": str(work)}, timeout=60)
        cand.kill()
        assert cand.proc.wait(timeout=10) == -signal.SIGKILL
        assert pool.cold == 0 and pool.forked >= 4
        # a zygote stopped (by a candidate: it is their parent) reports nothing; a child that is
        # gone still counts as ended, as killed
        spare = pool.spares[0]
        os.kill(pool.zygote.proc.pid, signal.SIGSTOP)
        try:
            os.killpg(spare.proc.pid, signal.SIGKILL)
            assert spare.proc.wait(timeout=10) == -signal.SIGKILL
        finally:
            os.kill(pool.zygote.proc.pid, signal.SIGCONT)
    finally:
        pool.close()
    assert pool.zygote.proc.poll() is not None


def test_pool_starts_spares_afresh_when_its_zygote_dies(tmp_path):
    pool = _zygote_pool(size=1)
    try:
        [orphan] = pool.spares
        pool.zygote.proc.kill()  # its children live on, reparented, and their statuses are lost
        pool.zygote.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not pool.zygote.dead:
            assert time.monotonic() < deadline, "the harness did not notice the zygote's end"
            time.sleep(0.05)
        assert orphan.proc.poll() is None  # still running
        orphan.kill_group()
        assert orphan.proc.wait(timeout=10) == -signal.SIGKILL  # gone, status unknown: counted as killed
        pool.spares.remove(orphan)
        work = tmp_path / "w"
        work.mkdir()
        w = pool.take("judge", work, {"TMPDIR": str(work)}, timeout=60)
        assert not w.forked and w.role == "judge" and w.proc.poll() is None
        w.close()
        assert w.proc.returncode == 0
    finally:
        pool.close()


def _wait_started(pool: WarmPool) -> None:
    deadline = time.monotonic() + 120
    while not all(w.started() for w in pool.spares):
        assert time.monotonic() < deadline, "the spares did not start"
        time.sleep(0.1)


def test_pool_hands_out_a_started_spare_before_one_still_starting(tmp_path):
    pool = WarmPool(size=2, zygote=False)  # spares that take seconds to start, every one
    try:
        _wait_started(pool)
        ready = {w.proc.pid for w in pool.spares}
        fresh = pool.spawn()  # still importing torch: seconds from ready
        pool.spares.insert(0, fresh)
        assert not fresh.started()
        work = tmp_path / "w"
        work.mkdir()
        w = pool.take("judge", work, {"TMPDIR": str(work)}, timeout=60)
        assert w.proc.pid in ready and fresh in pool.spares
        w.close()
    finally:
        pool.close()


def _hold(lock: DeviceLock, exclusive: bool) -> tuple[threading.Event, threading.Event, threading.Thread]:
    held, release = threading.Event(), threading.Event()

    def run():
        with (lock.exclusive(10) if exclusive else lock.shared(10)):
            held.set()
            release.wait(10)

    t = threading.Thread(target=run)
    t.start()
    return held, release, t


def test_the_device_lock_gives_timing_the_device_alone_and_shares_it_for_other_work(tmp_path):
    lock = DeviceLock.of(tmp_path, "cuda", "0")
    # timing excludes everything else on the device
    held, release, t = _hold(lock, exclusive=True)
    assert held.wait(10)
    with pytest.raises(LockTimeout):
        with lock.exclusive(0.2):
            pass
    with pytest.raises(LockTimeout):
        with lock.shared(0.2):
            pass
    with lock.shared(0.2, required=False) as got:  # teardown goes on regardless
        assert got is False
    with lock.shared(0.2, required=False, queue=False) as got:  # nothing enters a running round
        assert got is False
    with DeviceLock.of(tmp_path, "cuda", "1").exclusive(0.2):  # another GPU is free
        pass
    release.set()
    t.join()
    # other work shares the device, but not with timing
    held, release, t = _hold(lock, exclusive=False)
    assert held.wait(10)
    with lock.shared(0.2) as got:
        assert got is True
    with pytest.raises(LockTimeout):
        with lock.exclusive(0.2):
            pass
    release.set()
    t.join()
    with lock.exclusive(1):  # free again
        pass


def test_device_lock_timing_is_not_starved_by_other_work(tmp_path):
    """A writer waiting for the readers to leave holds the turnstile: no new reader gets in ahead."""
    lock = DeviceLock.of(tmp_path, "cuda", "0")
    r_held, r_release, r = _hold(lock, exclusive=False)
    assert r_held.wait(10)
    w_held, w_release, w = _hold(lock, exclusive=True)  # waits for the reader
    time.sleep(0.2)
    assert not w_held.is_set()
    with pytest.raises(LockTimeout):  # a new reader waits behind the writer
        with lock.shared(0.3):
            pass
    with lock.shared(0.3, queue=False) as got:  # a spare's CUDA start goes ahead: no round is running
        assert got is True
    r_release.set()
    assert w_held.wait(10)
    w_release.set()
    for t in (r, w):
        t.join()


def test_the_ray_evaluator_on_a_local_cluster_gives_the_local_verdicts(tmp_path):
    """The Ray backend on a local one-node cluster on the CPU: the same verdicts as locally."""
    ray = pytest.importorskip("ray")
    from cuda_agent.evaluate.ray_pool import RayEvaluator

    task, c = load_task(TASK), _cands(tmp_path)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with RayEvaluator(_cfg(tmp_path, timing=False), jobs_per_actor=2, warm=1) as ev:
            results = ev.map([(task, c["wrong"]), (task, c["right"])])
            assert [r.reward for r in results] == [-1, 1]
            assert results[0].failures[0].code is Code.OUTPUT_MISMATCH
            assert asyncio.run(ev.aevaluate(task, c["right"])).correct
            stats = ev.stats()
            assert stats["workers"] >= 6 and stats["judges_reused"] >= 1, stats  # the last judge was kept
        with pytest.raises(RuntimeError, match="closed"):
            ev.submit(task, c["right"])
        with pytest.raises(RuntimeError, match="no GPU"):
            RayEvaluator(EvalConfig(device="cuda"))
    finally:
        ray.shutdown()


def test_gate_runs_a_solo_with_nobody_else_inside():
    from cuda_agent.evaluate.locks import Gate

    gate, seen, inside = Gate(), [], [0]
    guard = threading.Lock()

    def work(kind: str, hold: float) -> None:
        with (gate.alone() if kind == "solo" else gate.shared()):
            with guard:
                inside[0] += 1
                seen.append((kind, inside[0]))
            time.sleep(hold)
            with guard:
                inside[0] -= 1

    threads = [threading.Thread(target=work, args=("shared", 0.2)) for _ in range(3)]
    threads += [threading.Thread(target=work, args=("solo", 0.1))]
    threads += [threading.Thread(target=work, args=("shared", 0.05)) for _ in range(3)]
    for i, t in enumerate(threads):
        t.start()
        time.sleep(0.02 if i < 3 else 0.01)
    for t in threads:
        t.join(10)
    solo = [n for kind, n in seen if kind == "solo"]
    assert solo == [1], seen  # alone: nobody else inside when it entered
    order = [kind for kind, _ in seen]
    assert order.index("solo") == 3, order  # later arrivals waited for the waiting solo


def test_a_solo_waits_for_and_keeps_out_the_jobs_of_another_process(tmp_path):
    """Two processes sharing a cache directory (two `bench` on one GPU): a solo in one waits until
    the other's job has left the device, and the other's next job waits until the solo is done."""
    from cuda_agent.evaluate.locks import DeviceLock, Gate

    lock = DeviceLock.of(tmp_path, "cuda", "0", role="gate")
    log = tmp_path / "log"
    other = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "src")!r})
        from cuda_agent.evaluate.locks import DeviceLock, Gate
        gate = Gate(DeviceLock({lock.base!r}))
        def note(what):
            with open({str(log)!r}, "a") as f:
                f.write(f"{{what}} {{time.monotonic():.3f}}\\n")
        with gate.shared():
            note("in1"); time.sleep(0.6); note("out1")
        time.sleep(0.1)
        with gate.shared():
            note("in2")
    """)
    proc = subprocess.Popen([sys.executable, "-c", other])
    deadline = time.monotonic() + 30
    while not (log.exists() and "in1" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    gate = Gate(lock)
    with gate.alone():
        entered = time.monotonic()
        time.sleep(0.5)
        left = time.monotonic()
    assert proc.wait(30) == 0
    marks = {k: float(v) for k, v in (line.split() for line in log.read_text().splitlines())}
    assert entered >= marks["out1"], (entered, marks)  # the solo waited for the other process's job
    assert marks["in2"] >= left, (left, marks)  # and kept its next one out meanwhile


def test_a_resource_failure_while_sharing_the_gpu_is_run_again_alone(tmp_path, monkeypatch):
    """An evaluation that ran short of memory beside others gets a second run alone, and that
    verdict is the one returned; a candidate's own failure is not run again."""
    from cuda_agent.evaluate import evaluator as ev_mod
    from cuda_agent.evaluate.result import EvalResult

    calls, gates, tries = [], [], []

    class Fake:
        def __init__(self, task, cand, cfg, pool, gpu, background_teardown=False, memory=None, retry_alone=False):
            self.cand, self.retry_alone = cand, retry_alone

        def run(self):
            gate = ev.gate()
            gates.append((self.cand, gate.running))
            tries.append((self.cand, self.retry_alone))
            res = EvalResult(task="t", candidate=str(self.cand))
            calls.append(self.cand)
            if self.cand == "oom" and calls.count("oom") == 1:
                res.add(Code.OUT_OF_MEMORY, "the judge failed:\nTraceback (most recent call last):\n  File x\n"
                                            "torch.OutOfMemoryError: CUDA out of memory (a neighbour held it)\n")
            elif self.cand == "bad":
                res.add(Code.OUTPUT_MISMATCH, "wrong")
            else:
                res.correct = True
            time.sleep(0.05)
            return res

    monkeypatch.setattr(ev_mod, "Evaluation", Fake)
    with Evaluator(_cfg(tmp_path), jobs=3, warm=0) as ev:
        out = ev.map([(None, "oom"), (None, "bad"), (None, "ok")])
        assert [r.correct for r in out] == [True, False, True]
        assert calls.count("oom") == 2 and calls.count("bad") == 1
        assert ev.reruns == 1
        retried = [r for r in out[0].reasons if r.code is Code.RETRIED_ALONE]
        # what failed and the exception, from the traceback's first and last lines
        assert len(retried) == 1 and "out_of_memory: the judge failed: ... torch.OutOfMemoryError: CUDA out of " \
            "memory (a neighbour held it)" in retried[0].message
        assert not any(r.code is Code.RETRIED_ALONE for r in out[1].reasons + out[2].reasons)
    assert [n for c, n in gates if c == "oom"][-1] == 1  # the second run had the device to itself
    # a first try may leave a shortage to the try alone (shape_trials.py); the try alone may not
    assert [r for c, r in tries if c == "oom"] == [True, False]


@pytest.mark.parametrize("measured_by_first_try", [False, True])
def test_a_second_try_holds_more_than_the_whole_memory_budget(tmp_path, monkeypatch, measured_by_first_try):
    """A task whose need is unknown is admitted by its inputs' bytes alone (the judge's, on the meta
    device: `memory.estimate`). If it runs short beside others, its second try must not be admitted
    by that too, nor by a need its first try measured (the model that need comes from may be what
    ran short): it holds more than the whole budget, so it waits until nothing is promised (here, a
    finished evaluation's 1 GiB held while its processes exit)."""
    from cuda_agent.evaluate import evaluator as ev_mod
    from cuda_agent.evaluate import memory
    from cuda_agent.evaluate.locks import MemoryLedger
    from cuda_agent.evaluate.result import EvalResult

    gib = 1 << 30
    ledger = MemoryLedger(tmp_path / "ledger.json", 10 * gib)
    released, started, holds = threading.Event(), [], []
    needs = iter([0, 19 * gib // 2 if measured_by_first_try else 0])

    def teardown():
        with ledger.hold(gib):
            time.sleep(0.5)
            released.set()

    real_hold = ledger.hold
    monkeypatch.setattr(ledger, "hold", lambda need: holds.append(need) or real_hold(need))

    class Fake:
        def __init__(self, task, cand, cfg, pool, gpu, background_teardown=False, memory=None, retry_alone=False):
            self.memory = memory

        def run(self):
            res = EvalResult(task="t", candidate="c")
            if not started:
                with self.memory(gib):  # the inputs' bytes the judge told
                    threading.Thread(target=teardown).start()
                    time.sleep(0.1)
                    started.append(time.monotonic())
                res.add(Code.OUT_OF_MEMORY, "the judge failed: CUDA out of memory")
                return res
            with self.memory(gib):
                started.append(released.is_set())
            res.correct = True
            return res

    monkeypatch.setattr(ev_mod, "Evaluation", Fake)
    monkeypatch.setattr(memory, "need", lambda *a, **k: next(needs))
    with Evaluator(_cfg(tmp_path), jobs=2, warm=0) as ev:
        ev._ledgers[None] = ledger
        [out] = ev.map([(types.SimpleNamespace(source="class Model: pass\n"), "c")])
    assert out.correct and ev.reruns == 1
    assert started[1] is True  # the second try waited for the 1 GiB still held
    assert holds[0] == memory.estimate(gib) == memory.IN_COPIES * gib + memory.CONTEXTS
    assert holds[-1] == 10 * gib + 1  # (between them: the teardown's 1 GiB)


def test_a_task_beyond_the_memory_budget_runs_with_the_warm_pool_emptied(tmp_path, monkeypatch):
    """The budget is what the GPU has beside the warm pool's processes (each a CUDA context): a task
    that needs more runs with the idle spares and kept judges closed, their processes gone, and
    none started or kept until it ends; then the pool fills again. A task within the budget leaves
    the pool alone."""
    from cuda_agent.evaluate import evaluator as ev_mod
    from cuda_agent.evaluate import memory
    from cuda_agent.evaluate.locks import MemoryLedger
    from cuda_agent.evaluate.result import EvalResult

    gib = 1 << 30
    seen = []

    class Fake:
        def __init__(self, task, cand, cfg, pool, gpu, background_teardown=False, memory=None, retry_alone=False):
            self.pool, self.memory = pool, memory

        def run(self):
            before = list(self.pool.spares)
            with self.memory():
                self.pool.fill()  # (a take's replacement: none starts meanwhile)
                seen.append({"spares": len(self.pool.spares), "gone": all(w.proc.poll() is not None for w in before),
                             "keeps_judge": self.pool.give_back(types.SimpleNamespace())})
            self.pool.judges.clear()
            res = EvalResult(task="t", candidate="c")
            res.correct = True
            return res

    monkeypatch.setattr(ev_mod, "Evaluation", Fake)
    task = types.SimpleNamespace(source="class Model: pass\n")
    with Evaluator(_cfg(tmp_path), jobs=1, warm=2) as ev:
        ev._ledgers[None] = MemoryLedger(tmp_path / "ledger.json", 10 * gib)
        pool = ev.pool()
        for need in (12, 5):
            assert ev.wait_warm(120)
            monkeypatch.setattr(memory, "need", lambda *a, n=need, **k: n * gib)
            assert ev.evaluate(task, "c").correct
        assert ev.wait_warm(120) and len(pool.spares) == 2  # filled again
    assert seen[0] == {"spares": 0, "gone": True, "keeps_judge": False}
    assert seen[1] == {"spares": 2, "gone": False, "keeps_judge": True}
    assert pool.leaned == 1 and ev.stats()["pools_emptied"] == 1


def test_teardown_in_the_background_keeps_the_whole_output_and_reaps_the_processes(tmp_path):
    """The Evaluator returns a verdict once the workers' output is in, while they exit (on a GPU
    their CUDA contexts take ~0.2 s to go); the output is whole, and close() waits for the exits."""
    task = load_task(TASK)
    pidfile = tmp_path / "pid"
    src = (DATA / "relu_bias_model_new.py").read_text().replace(
        "torch.relu(x + self.bias)", "(print('forward-marker', file=sys.stderr), torch.relu(x + self.bias))[1]")
    src = (f"import os, sys\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
           "print('import-marker')\n") + src
    (tmp_path / "loud.py").write_text(src)
    # it writes a file outside its folder, which only an unsandboxed candidate can
    cfg = dataclasses.replace(_cfg(tmp_path, timing=False), policy="none", isolation="off")
    with Evaluator(cfg, jobs=1, warm=0) as ev:
        res = ev.evaluate(task, load_candidate(tmp_path / "loud.py"))
        assert res.correct, res.reasons
        assert "import-marker" in res.candidate_output["stdout"]
        assert res.candidate_output["stderr"].count("forward-marker") >= 2  # every call, the last one too
        pid = int(pidfile.read_text())
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "zombie" in status.read_text().lower(), "close() left a worker running"


def test_pool_gives_candidates_the_spares_that_warmed_the_op_guard(tmp_path):
    """Half the spares warm the op guard (its first call imports dynamo and sympy); candidates get
    those, the judge the others; with none of its kind started, a role takes the other kind."""
    pool = WarmPool(size=2, zygote=False)  # the kinds show in fresh interpreters' command lines
    try:
        _wait_started(pool)
        kinds = {w.proc.pid: w.guard_warm for w in pool.spares}
        assert sorted(kinds.values()) == [False, True]
        for pid, warm in kinds.items():
            assert (b"--warm-guard" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")) is warm
        work = tmp_path / "w"
        work.mkdir()
        judge = pool.take("judge", work, {"TMPDIR": str(work)}, timeout=60)
        cand = pool.take("candidate", work, {"TMPDIR": str(work)}, timeout=60)
        assert kinds[judge.proc.pid] is False and kinds[cand.proc.pid] is True
        # the replacements are one of each kind again
        assert sorted(w.guard_warm for w in pool.spares) == [False, True]
        _wait_started(pool)
        # no guard spare has started: a candidate takes the started light one rather than wait
        light = next(w for w in pool.spares if not w.guard_warm)
        for w in [w for w in pool.spares if w.guard_warm]:
            pool.spares.remove(w)
            w.close()
        fresh = pool.spawn(guard=True)
        pool.spares.insert(0, fresh)
        assert not fresh.started()
        other = pool.take("candidate", work, {"TMPDIR": str(work)}, timeout=60)
        assert other is light
        for w in (judge, cand, other):
            w.close()
    finally:
        pool.close()


def test_gpu_local_cpus_reads_the_pci_devices_cpulist(tmp_path, monkeypatch):
    """A GPU's NUMA node from sysfs (nvidia-smi's bus id in sysfs's form), cut to the CPUs this
    process may use; None wherever it cannot be told."""
    from cuda_agent.evaluate import device

    (tmp_path / "0000:18:00.0").mkdir()
    (tmp_path / "0000:18:00.0" / "local_cpulist").write_text("0-1,4,8-9\n")
    bus = {"0": "00000000:18:00.0", "1": "00000000:99:00.0"}
    monkeypatch.setattr(device, "nvidia_smi", lambda *a: bus.get(a[-1]))
    monkeypatch.setattr(device.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    assert device.gpu_local_cpus(0, sysfs=str(tmp_path)) == {0, 1, 4}
    assert device.gpu_local_cpus(1, sysfs=str(tmp_path)) is None  # no such device in sysfs
    assert device.gpu_local_cpus(7, sysfs=str(tmp_path)) is None  # nvidia-smi knows no GPU 7
    monkeypatch.setattr(device.os, "sched_getaffinity", lambda pid: {2, 3})
    assert device.gpu_local_cpus(0, sysfs=str(tmp_path)) is None  # none of its CPUs allowed here
    assert device.parse_cpulist("3,0-1\n") == {0, 1, 3}
    with pytest.raises(ValueError):
        device.parse_cpulist("0-x")


@pytest.mark.parametrize("zygote", [True, False], ids=["forked", "fresh"])
def test_pool_spares_run_on_the_cpus_they_are_given(tmp_path, zygote):
    """`cpus` (EvalConfig.pin_cpus, from the GPU's NUMA node) holds for forked and fresh spares."""
    cpu = min(os.sched_getaffinity(0))  # one this process may use
    pool = _zygote_pool(size=2, cpus={cpu}) if zygote else WarmPool(size=2, zygote=False, cpus={cpu})
    try:
        _wait_started(pool)
        for w in pool.spares:
            status = Path(f"/proc/{w.proc.pid}/status").read_text()
            assert f"Cpus_allowed_list:\t{cpu}\n" in status, status
    finally:
        pool.close()


@pytest.mark.gpu
@pytest.mark.parametrize("warm_spares", [False, True], ids=["context", "warm-device"])
def test_gpu_pool_verdicts_through_kept_judges_and_warmed_spares(tmp_path, warm_spares):
    """On the GPU, through the pool: the verdicts are the same whether spares warmed only their
    CUDA context or also their timer, cuBLAS and a cached segment (EvalConfig.warm_spares), and
    judges kept across evaluations unmap every segment of the last candidate (else not kept)."""
    task, c = load_task(TASK), _cands(tmp_path)
    cfg = dataclasses.replace(_cfg(tmp_path, warm_spares=warm_spares), device="cuda")
    with Evaluator(cfg, jobs=2, warm=2, gpus=["0"]) as ev:
        results = ev.map([(task, c["right"]), (task, c["wrong"]), (task, c["right"]), (task, c["right"])])
        stats = ev.stats()
    assert [r.correct for r in results] == [True, False, True, True], [r.failures for r in results]
    assert results[1].failures[0].code is Code.OUTPUT_MISMATCH
    assert all(r.reward >= 1 for r in results if r.correct)
    assert stats["judges_reused"] >= 1, stats


def test_the_judge_tells_the_inputs_bytes_before_making_any_or_none_where_it_cannot(tmp_path):
    """At setup the judge makes get_inputs() on the meta device (no memory taken) and says how many
    bytes one call's inputs hold: what the first evaluation of a task is admitted to a GPU by. A
    get_inputs that reads a value cannot run there: unknown (None), and the task is admitted at once."""
    from cuda_agent.evaluate.worker.judge import Judge

    unreadable = TASK.read_text().replace("return [torch.randn(64, 256)]",
                                          "return [torch.randn(64, 1 + int(torch.rand(1) > 2), 256).squeeze(1)]")
    assert unreadable != TASK.read_text()
    told = []
    for source in (TASK.read_text(), unreadable):
        judge = Judge()
        told.append(judge.cmd_setup(task_source=source, origin="task.py", device="cpu", init_seed=1, weights_seed=2,
                                    shm_dir=str(tmp_path), touch="bf16")["inputs_bytes"])
        judge.cmd_prepare([{"trial": "c0", "seed": 3, "stress": None, "fill": None}])  # both run as tasks
    assert told == [64 * 256 * 4, None]


def test_serve_runs_the_handlers_after_command_once_the_commands_frame_is_gone():
    """The judge gives its allocator's cache back after each command (`Judge.after_command`): serve
    calls that hook before the reply, when what the command's locals held is freed already, after a
    command that failed too."""
    import weakref

    from cuda_agent.evaluate.channel import ChannelClosed
    from cuda_agent.evaluate.worker.serve import serve

    class Held:
        pass

    freed: list[bool] = []

    class Handler:
        def cmd_make(self):
            held = Held()
            self.ref = weakref.ref(held)
            return {}

        def cmd_fail(self):
            held = Held()
            self.ref = weakref.ref(held)
            raise RuntimeError("failed with a local alive")

        def after_command(self):
            freed.append(self.ref() is None)

    class Chan:
        def __init__(self):
            self.msgs, self.sent = [{"cmd": "make", "seq": 1}, {"cmd": "fail", "seq": 2}], []

        def recv(self):
            if not self.msgs:
                raise ChannelClosed()
            return self.msgs.pop(0)

        def send(self, msg):
            self.sent.append(msg)

    chan = Chan()
    serve(Handler(), chan)
    assert [(m["seq"], m["ok"]) for m in chan.sent] == [(1, True), (2, False)]
    assert freed == [True, True]


@pytest.mark.gpu
def test_a_judge_keeps_no_more_than_its_reserve_cached_after_preparing_and_checking_a_large_trial(tmp_path):
    """A stress trial of a 1 GiB input in [0, 1) (KernelBench's level 1 matrix-vector task draws
    its 8 GiB matrix so) holds at its peak the input, its stressed copy and the reference's copy,
    not one temporary of the input's size per step of the transform (nor a float64 copy); and
    after each command (serve's `after_command`) the judge caches no more than its reserve: what
    making, stressing and comparing inputs freed goes back to the driver, or the candidate and
    baseline runners of the same evaluation run short of memory on a GPU the task fits alone."""
    import torch

    from cuda_agent.evaluate.memory import JUDGE_RESERVED_MAX
    from cuda_agent.evaluate.worker.judge import Judge

    source = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return x.sum(1, keepdim=True)
        def get_inputs():
            return [torch.rand(1 << 14, 1 << 14)]
        def get_init_inputs():
            return []
    """)
    judge = Judge()
    judge.cmd_setup(task_source=source, origin="big.py", device="cuda", init_seed=1, weights_seed=2,
                    shm_dir=str(tmp_path), touch="bf16")
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    prep = judge.cmd_prepare([{"trial": "s0", "seed": 3, "stress": 0, "fill": None}])
    assert prep["in_bytes"] == 1 << 30
    assert torch.cuda.max_memory_allocated() - base <= 3 * prep["in_bytes"] + (64 << 20)
    judge.after_command()
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() <= JUDGE_RESERVED_MAX
    judge.trials["s0"]["aliases"] = [judge.trials["s0"]["inputs"][0].clone()]  # the candidate's slot, as filled
    judge._received = lambda out: out.clone()  # (the candidate's output, as received from its process)
    verdict = judge.cmd_check("s0", out=judge.trials["s0"]["ref"], plain=True, atol=1e-2, rtol=1e-2, norm_tol=1e-3)
    assert verdict["code"] is None, verdict
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > JUDGE_RESERVED_MAX  # freed: input, slot
    judge.after_command()
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() <= JUDGE_RESERVED_MAX


def test_memory_ledger_admits_what_fits_and_runs_a_too_large_job_alone(tmp_path):
    """Jobs whose promised memory would exceed the budget wait; a job larger than the whole budget
    still runs, with nothing else promised; a dead process's promise is dropped."""
    from cuda_agent.evaluate.locks import MemoryLedger

    ledger = MemoryLedger(tmp_path / "memory.json", budget=100)
    seen, guard = [], threading.Lock()

    def job(name: str, need: int) -> None:
        with ledger.hold(need):
            with guard:
                seen.append((name, ledger.promised()))
            time.sleep(0.3)

    threads = [threading.Thread(target=job, args=(n, need)) for n, need in
               (("a", 60), ("b", 30), ("c", 60), ("huge", 250))]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(30)
    promised = dict(seen)
    assert promised["a"] == 60 and promised["b"] == 90, seen  # a and b fit together
    assert promised["c"] <= 100 and promised["huge"] == 250, seen  # c waited; huge ran with nothing else
    assert ledger.promised() == 0
    (tmp_path / "memory.json").write_text('{"999999999:1:1:1": 90}')  # a holder whose process is gone
    assert ledger.promised() == 0
    reused = f"{os.getpid()}:1:1:1"  # this pid, but a process that started at another time
    (tmp_path / "memory.json").write_text(json.dumps({reused: 90}))
    assert ledger.promised() == 0


def test_memory_ledger_admits_nothing_else_while_a_job_larger_than_the_budget_is_queued(tmp_path):
    """A job larger than the budget that waits is queued, and goes before every job not queued: one
    that began to wait after it though it would fit beside what is promised (else a stream of small
    jobs keeps the large one waiting for a moment with nothing promised), and one that began to
    wait before it. A queued job of a process that is gone blocks nothing."""
    from cuda_agent.evaluate.locks import MemoryLedger

    ledger = MemoryLedger(tmp_path / "memory.json", budget=100)
    events, guard = [], threading.Lock()

    def job(name: str, need: int, hold_s: float) -> None:
        with ledger.hold(need):
            with guard:
                events.append(("in", name, ledger.promised()))
            time.sleep(hold_s)
            with guard:
                events.append(("out", name, None))

    threads = [threading.Thread(target=job, args=a) for a in
               (("a", 60, 1.0), ("a2", 30, 1.4), ("b", 50, 0.2), ("huge", 250, 0.3), ("c", 10, 0.2))]
    for t in threads:  # b waits (90 + 50 > 100) from 0.3 s, huge is queued at 0.45 s, c begins at 0.6 s
        t.start()
        time.sleep(0.15)
    for t in threads:
        t.join(30)
    order = [(e, n) for e, n, _ in events]
    # b would fit beside a2 once a ends, and c at any time: both wait for huge
    assert order[:6] == [("in", "a"), ("in", "a2"), ("out", "a"), ("out", "a2"), ("in", "huge"), ("out", "huge")], events
    assert {n for e, n in order[6:8]} == {"b", "c"} and all(e == "in" for e, _ in order[6:8]), events  # together
    assert dict((n, p) for e, n, p in events if e == "in" and n in ("a", "huge")) == {"a": 60, "huge": 250}
    assert json.loads((tmp_path / "memory.json").read_text()) == {}  # nothing left queued or promised
    (tmp_path / "memory.json").write_text(json.dumps({f"{MemoryLedger.WAITING}{1:020d}|999999999:1:1:1": 250}))
    done = threading.Event()
    t = threading.Thread(target=lambda: (ledger.hold(30).__enter__(), done.set()), daemon=True)
    t.start()
    assert done.wait(5), "a queued job whose process is gone kept a smaller one waiting"


def test_tasks_beyond_the_memory_budget_queued_together_empty_the_pool_once(tmp_path, monkeypatch):
    """Evaluations larger than the budget run one at a time; the pool is emptied when the first
    begins to wait and stays empty until the last ends (not emptied and filled again for each)."""
    from cuda_agent.evaluate import evaluator as ev_mod
    from cuda_agent.evaluate import memory
    from cuda_agent.evaluate.locks import MemoryLedger
    from cuda_agent.evaluate.result import EvalResult

    gib = 1 << 30
    inside, most, guard = [0], [0], threading.Lock()

    class Fake:
        def __init__(self, task, cand, cfg, pool, gpu, background_teardown=False, memory=None, retry_alone=False):
            self.pool, self.memory = pool, memory

        def run(self):
            with self.memory():
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.4)
                with guard:
                    inside[0] -= 1
            res = EvalResult(task="t", candidate="c")
            res.correct = True
            return res

    monkeypatch.setattr(ev_mod, "Evaluation", Fake)
    monkeypatch.setattr(memory, "need", lambda *a, **k: 12 * gib)
    task = types.SimpleNamespace(source="class Model: pass\n")
    with Evaluator(_cfg(tmp_path), jobs=3, warm=2) as ev:
        ev._ledgers[None] = MemoryLedger(tmp_path / "ledger.json", 10 * gib)
        assert ev.wait_warm(120)
        out = ev.map([(task, "c")] * 3)
        assert all(r.correct for r in out)
        assert ev.wait_warm(120) and len(ev.pool().spares) == 2  # filled again after the last
    assert most[0] == 1  # one at a time
    assert ev.stats()["pools_emptied"] == 1


def test_an_evaluation_holds_its_device_memory_only_once_its_candidate_is_loaded(tmp_path):
    """The memory admission is entered after the candidate's load (its build), before the reference
    first runs on inputs, and left when the evaluation ends; a candidate that fails to load never
    asks for it. It is told the bytes of one call's inputs, which the judge made on the meta device
    (no input made yet): what a task not measured yet is admitted by."""
    import contextlib

    from cuda_agent.evaluate.evaluation import Evaluation

    c = _cands(tmp_path)
    ran = tmp_path / "reference_ran"  # the task's reference marks its every run on inputs here
    marked = TASK.read_text().replace(
        "        return torch.relu(x + self.bias)",
        f"        open({str(ran)!r}, 'a').write('x')\n        return torch.relu(x + self.bias)")
    assert marked != TASK.read_text()
    (tmp_path / "task.py").write_text(marked)
    task = load_task(tmp_path / "task.py")
    events: list[tuple[str, dict]] = []

    def run(cand) -> Evaluation:
        ev: Evaluation | None = None

        @contextlib.contextmanager
        def memory(inputs_bytes):
            assert not ran.exists(), "the reference ran on inputs before the memory was held"
            assert inputs_bytes == 64 * 256 * 4  # get_inputs(): one float32 tensor of 64 x 256
            events.append(("enter", dict(ev.res.phases_s)))
            yield
            events.append(("leave", dict(ev.res.phases_s)))

        ev = Evaluation(task, cand, _cfg(tmp_path), memory=memory)
        ev.run()
        return ev

    ev = run(c["right"])
    assert ev.res.correct, ev.res.failures
    (enter, before), (leave, after) = events
    assert (enter, leave) == ("enter", "leave")
    assert "load" in before and "correctness" not in before, before  # built and loaded, nothing run
    assert "correctness" in after and "timing" in after, after  # held to the end
    assert "memory_admission" in ev.res.phases_s and ran.exists()

    events.clear()
    broken = tmp_path / "broken.py"
    broken.write_text((DATA / "relu_bias_model_new.py").read_text() + "\nraise ImportError('no module')\n")
    ev = run(load_candidate(broken))
    assert not ev.res.correct and events == [], (ev.res.failures, events)


def test_a_task_needs_the_memory_its_first_evaluation_measured(tmp_path):
    from cuda_agent.evaluate import memory

    source = "class Model: ..."
    assert memory.need(tmp_path, source) == 0  # not measured: admitted at once
    memory.record(tmp_path, source, in_bytes=4 << 30, out_bytes=1 << 30)
    want = memory.IN_COPIES * (4 << 30) + memory.OUT_COPIES * (1 << 30) + memory.CONTEXTS
    assert memory.need(tmp_path, source) == want
    assert memory.need(tmp_path, source + " ") == 0  # another task
    # the reference's working memory: held by the judge, and by each baseline runner when they run
    memory.record(tmp_path, source, in_bytes=4 << 30, out_bytes=1 << 30, ref_work=2 << 30)
    assert memory.need(tmp_path, source) == want + (2 << 30)
    assert memory.need(tmp_path, source, baselines_cached=False) == want + (1 + memory.BASELINE_RUNNERS) * (2 << 30)
    old = memory._path(tmp_path, source)  # a record written before the working memory was measured
    old.write_text(json.dumps({"in_bytes": 4 << 30, "out_bytes": 1 << 30}))
    assert memory.need(tmp_path, source, baselines_cached=False) == want


def test_a_tasks_need_is_at_least_what_its_last_evaluation_held(tmp_path):
    """The model of copies misses the allocator's cache, stress trials' copies, a candidate's own
    workspace: what the processes held at their peak (`record_peak`) raises the need, the last
    evaluation's figure rather than the largest, and with the baselines' runners added when they
    will run."""
    from cuda_agent.evaluate import memory

    source = "class Model: ..."
    memory.record_peak(tmp_path, source, 50 << 30)  # nothing measured yet: nothing to add it to
    assert memory.need(tmp_path, source) == 0
    memory.record(tmp_path, source, in_bytes=4 << 30, out_bytes=1 << 30, ref_work=1 << 30)
    model = memory.need(tmp_path, source)
    memory.record_peak(tmp_path, source, 50 << 30)
    assert memory.need(tmp_path, source) == 50 << 30 > model
    runners = memory.BASELINE_RUNNERS * (memory.CONTEXT + (4 << 30) + (1 << 30) + (1 << 30))
    assert memory.need(tmp_path, source, baselines_cached=False) == (50 << 30) + runners
    memory.record(tmp_path, source, in_bytes=4 << 30, out_bytes=1 << 30, ref_work=1 << 30)  # kept
    assert memory.need(tmp_path, source) == 50 << 30
    memory.record_peak(tmp_path, source, 10 << 30)  # the last evaluation's, below the model now
    assert memory.need(tmp_path, source) == model


def test_every_worker_says_its_device_memory_peak(tmp_path):
    """`memory` is answered by the serving loop itself, in any role: on the CPU, nothing."""
    env = scrubbed_env({})
    judge = Worker("judge", tmp_path, env, 4096)
    try:
        assert judge.call("memory", 60)["reserved_peak"] == 0
    finally:
        judge.close()


def test_an_evaluations_memory_goes_back_once_its_processes_are_gone(tmp_path):
    """The admitted memory is held by the workers until they exit (a CUDA context goes last):
    `close_all` gives it back (`then`) only after every process was reaped, not when the
    evaluation's thread moves on."""
    env = scrubbed_env({})
    workers = [Worker("judge", tmp_path, env, 4096), Worker("candidate", tmp_path, env, 4096)]
    for w in workers:
        w.call("ping", 60)
    seen = []
    reaping = close_all(workers, None, then=lambda: seen.append([w.proc.poll() for w in workers]))
    reaping.join(30)
    assert len(seen) == 1 and None not in seen[0], seen


def test_the_memory_budget_leaves_the_warm_pools_share_off(monkeypatch):
    """What a warm pool holds outside evaluations (each spare's CUDA context; up to half the pool in
    kept judges, each a context and its capped cache) and the contexts of evaluations still
    building are not promised to evaluations; a quarter of
    the GPU always is; a GPU whose memory is unknown has no budget."""
    from cuda_agent.evaluate import memory

    mib = 143_771  # an H200
    monkeypatch.setattr(memory, "gpu_memory_mib", lambda gpu: mib)
    total = mib << 20
    assert memory.budget("0") == int(total * memory.BUDGET_FRACTION)
    kept = 17 * (memory.CONTEXT + memory.JUDGE_RESERVED_MAX)
    assert memory.budget("0", 34) == int(total * memory.BUDGET_FRACTION) - 34 * memory.CONTEXT - kept
    assert 80 << 30 < memory.budget("0", 34) < 90 << 30
    # 16 evaluations building at once: a judge's and a candidate's context each, not yet admitted
    assert memory.budget("0", 34, 16) == memory.budget("0", 34) - 16 * 2 * memory.CONTEXT
    assert memory.budget("0", 1000) == total // 4
    monkeypatch.setattr(memory, "gpu_memory_mib", lambda gpu: None)
    assert memory.budget("0", 34) is None


def test_the_baselines_runners_are_expected_where_nothing_is_cached_for_the_task(tmp_path):
    from cuda_agent.evaluate.baselines import task_hash
    from cuda_agent.evaluate.evaluator import _measures_baselines

    task = load_task(TASK)
    cfg = _cfg(tmp_path)
    assert _measures_baselines(cfg, task)
    assert not _measures_baselines(dataclasses.replace(cfg, timing=False), task)
    entry = cfg.cache_dir / "baselines" / f"{task_hash(task.source)}.json"
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"entries": {"some key": {"entry": {}, "mac": "x"}}}))
    assert not _measures_baselines(cfg, task)
    assert _measures_baselines(dataclasses.replace(cfg, baseline_cache=False), task)


@pytest.mark.gpu
def test_the_judge_measures_the_references_working_memory(tmp_path):
    """A reference that materialises a matrix (torch.diag: 8192 x 8192 floats, 256 MiB) beside
    inputs and an output of 32 MiB: the task's record holds that matrix as its working memory."""
    from cuda_agent.evaluate import evaluate, memory

    body = textwrap.dedent("""
        import torch
        import torch.nn as nn

        class {cls}(nn.Module):
            def forward(self, a, b):
                return {expr}

        def get_inputs():
            return [torch.rand(8192), torch.rand(8192, 1024)]

        def get_init_inputs():
            return []
    """)
    (tmp_path / "task.py").write_text(body.format(cls="Model", expr="torch.diag(a) @ b"))
    (tmp_path / "cand.py").write_text(body.format(cls="ModelNew", expr="a.unsqueeze(1) * b"))
    cfg = dataclasses.replace(_cfg(tmp_path, timing=False), device="cuda", atol=1e-3, rtol=1e-3)
    task = load_task(tmp_path / "task.py")
    res = evaluate(task, load_candidate(tmp_path / "cand.py"), cfg)
    assert res.correct, res.failures
    rec = json.loads(memory._path(cfg.cache_dir, task.source).read_text())
    assert (256 << 20) <= rec["ref_work"] < (512 << 20), rec
    # and what its processes held at their peak: two contexts, the matrix and the tensors
    # (the judge's inputs, their clone and the reference output; the candidate's inputs and output)
    assert 2 * memory.CONTEXT + (256 << 20) + 5 * (32 << 20) <= rec["peak"] < 2 * memory.CONTEXT + (2 << 30), rec
    assert memory.need(cfg.cache_dir, task.source) >= rec["peak"]


def test_a_spare_that_dies_before_taking_its_role_is_the_evaluators_failure(tmp_path):
    """A spare runs no candidate code before `become`: its death (here a bad option; on a full GPU,
    its CUDA context failing) is infra, which the Evaluator runs again alone, never the candidate's
    crash."""
    env = scrubbed_env({})
    spare = Worker("spare", tmp_path, env, 4096, "--no-such-option")
    with pytest.raises(WorkerFailure) as failed:
        spare.become("candidate", tmp_path, env, 60)
    assert failed.value.code is Code.INFRA_ERROR
    assert "spare process exited with status 2 during `become`" in failed.value.message
    assert "--no-such-option" in failed.value.message  # its stderr says why
    spare.close()
