"""Baselines measured like candidates (the reference in runner processes of its own) and cached per
task, device and software versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.evaluate import Code, EvalConfig, evaluate, load_candidate, protocol
from cuda_agent.evaluate.baselines import (BaselineCache, Baselines, baseline_candidate, baseline_key)
from cuda_agent.evaluate.result import TimeStats
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
TASK = DATA / "relu_bias_task.py"
CORRECT = (DATA / "relu_bias_model_new.py").read_text()
DEVICE = {"type": "cuda", "name": "NVIDIA H200", "capability": "9.0", "memory_gb": 139.8, "driver": "580.1",
          "torch": "2.11.0", "cuda": "13.0", "python": "3.12.3", "host": "a", "index": 0}


def _entry(median: float = 1.0) -> Baselines:
    st = TimeStats.of([median] * 5)
    return Baselines(eager=st, compile=None, compile_error="no compiler", calls_per_batch=8, device=DEVICE,
                     measured_at="2026-11-30T00:00:00Z")


def test_key_covers_device_and_software_not_host():
    base = baseline_key(DEVICE, 8, True)
    assert baseline_key({**DEVICE, "host": "b", "index": 3}, 8, True) == base  # identical GPUs share
    for changed in ({**DEVICE, "torch": "2.12.0"}, {**DEVICE, "driver": "590.0"}, {**DEVICE, "name": "H100"}):
        assert baseline_key(changed, 8, True) != base
    assert baseline_key(DEVICE, 4, True) != base
    assert baseline_key(DEVICE, 8, False) != base
    assert baseline_key(DEVICE, 8, True, "tf32") != base  # EvalConfig.touch is part of the protocol


def test_the_cache_returns_what_was_put_and_ignores_tampered_entries(tmp_path):
    cache = BaselineCache(tmp_path)
    assert cache.get("task", "k") is None
    path = cache.put("task", "k", _entry(2.5))
    cache.put("task", "k2", _entry(3.0))  # a second entry of the same task, beside the first
    got = cache.get("task", "k")
    assert got is not None and got.eager.median == 2.5 and got.compile is None
    assert got.compile_error == "no compiler" and got.calls_per_batch == 8
    assert BaselineCache(tmp_path).get("task", "k2").eager.median == 3.0  # the secret is shared
    assert cache.get("other task", "k") is None
    assert (tmp_path / ".secret").stat().st_mode & 0o777 == 0o600
    # an entry edited on disk (a slower-looking eager would inflate every speedup) is ignored
    doc = json.loads(path.read_text())
    doc["entries"]["k"]["entry"]["eager"]["median"] = 250.0
    path.write_text(json.dumps(doc))
    assert cache.get("task", "k") is None
    # so is one copied under another key or task
    doc["entries"]["k"] = doc["entries"]["k2"]
    path.write_text(json.dumps(doc))
    assert cache.get("task", "k") is None and cache.get("task", "k2").eager.median == 3.0
    path.write_text("{not json")
    assert cache.get("task", "k2") is None
    # a snapshot taken earlier is not affected by later writes
    snap = cache.snapshot("task")
    cache.put("task", "k", _entry(9.0))
    assert cache.lookup(snap, "k") is None and cache.get("task", "k").eager.median == 9.0


def test_baseline_candidates_are_the_reference():
    src = TASK.read_text()
    for which in ("eager", "compile"):
        cand = baseline_candidate(src, which)
        assert cand.model_new.startswith(src) and "class ModelNew(Model)" in cand.model_new
    ns: dict = {}
    exec(baseline_candidate(src, "eager").model_new, ns)
    assert issubclass(ns["ModelNew"], ns["Model"])


def _cfg(cache_dir: Path, **kw) -> EvalConfig:
    kw.setdefault("compile_baseline", False)
    kw.setdefault("timing_budget_s", 0.1)
    return EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", timeout_s=300, **kw)


@pytest.fixture
def kept_however_noisy(monkeypatch):
    """Baselines are cached whatever their spread. Tests of the cache itself use it: on CI's two cores
    a neighbour process (pytest -n 2) makes the torch.compile baseline's samples spread beyond the
    noise gate (`protocol.too_noisy`; measured here: iqr 0.57 to 1.6 ms at a median of 0.22 to
    1.5 ms, against iqr 0.09 ms alone), the evaluator rightly measures them again or declines to
    cache them, and a test of the second evaluation reading the cache would fail for the
    neighbour's sake. The gate has tests of its own (the tests of noisy baselines below)."""
    monkeypatch.setattr(protocol, "NOISY_MS", float("inf"))


def test_baselines_measured_once_then_cached(tmp_path, kept_however_noisy):
    cand = tmp_path / "cand.py"
    cand.write_text(CORRECT)
    task, cache = load_task(TASK), tmp_path / "cache"
    first = evaluate(task, load_candidate(cand), _cfg(cache))
    assert first.correct, first.reasons
    assert first.timing_check["baselines"]["source"] == "measured"
    assert first.timing_check["baselines"]["cached"] is True
    assert "baseline_setup" in first.phases_s
    assert len(list((cache / "baselines").glob("*.json"))) == 1  # one file for the task
    second = evaluate(task, load_candidate(cand), _cfg(cache))
    assert second.correct, second.reasons
    assert second.timing_check["baselines"]["source"] == "cached"
    assert second.timing_check["baselines"]["key"] == first.timing_check["baselines"]["key"]
    assert second.times_ms["eager"] == first.times_ms["eager"]
    assert "baseline_setup" not in second.phases_s
    assert second.speedup_eager == pytest.approx(first.times_ms["eager"].median / second.times_ms["candidate"].median,
                                                 rel=1e-3)
    # switched off: measured again, interleaved with the candidate, and nothing new is written
    third = evaluate(task, load_candidate(cand), _cfg(cache, baseline_cache=False))
    assert third.timing_check["baselines"]["source"] == "measured"
    assert len(list((cache / "baselines").glob("*.json"))) == 1  # one file for the task


def test_cached_baselines_set_the_candidates_batch_size(tmp_path, kept_however_noisy):
    """The batch size follows from the reference's time per call, which is noisy: an evaluation
    adopts the cached entry's size (the candidate is timed as the baselines were) rather than
    missing the cache whenever its own estimate differs."""
    cand = tmp_path / "cand.py"
    cand.write_text(CORRECT)
    task, cache = load_task(TASK), tmp_path / "cache"
    first = evaluate(task, load_candidate(cand), _cfg(cache))
    assert first.timing_check["calls_per_batch"] == 8
    store = BaselineCache(cache / "baselines")
    key = first.timing_check["baselines"]["key"]
    assert key == baseline_key(first.device, 8, False)  # the config's most calls, not the batch
    entry = store.get(task.source, key)
    entry.calls_per_batch = 3
    store.put(task.source, key, entry)
    # every timed call checked: the calls the candidate answered show the batches it was timed in
    # (a warm-up batch and one per sample), not just the size the result reports
    every = dict(timed_check_fraction=1.0)
    second = evaluate(task, load_candidate(cand), _cfg(cache, **every))
    assert second.correct, second.reasons
    assert second.timing_check["baselines"]["source"] == "cached"
    assert second.timing_check["calls_per_batch"] == 3
    assert second.timing_check["timed_calls_checked"] == 3 * (second.times_ms["candidate"].n + 1)
    # another most-calls setting is another entry
    third = evaluate(task, load_candidate(cand), _cfg(cache, batch_calls=2, **every))
    assert third.timing_check["baselines"]["source"] == "measured"
    assert third.timing_check["calls_per_batch"] == 2
    assert third.timing_check["timed_calls_checked"] == 2 * (third.times_ms["candidate"].n + 1)


NOISY_TASK = """
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    calls = 0

    def forward(self, x):
        Model.calls += 1
        time.sleep(0.03 if Model.calls % 2 else 0.0005)  # a machine busy every other call
        return x * 2


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def test_noise_gate_wants_samples_in_proportion_to_the_square_of_the_spread():
    calm = TimeStats(median=1.0, iqr=0.01, min=0.9, max=1.1, n=30)
    assert not protocol.too_noisy(calm) and protocol.samples_for_precision(calm) == 30
    busy = TimeStats(median=1.0, iqr=0.5, min=0.5, max=3.0, n=30)
    assert protocol.too_noisy(busy)
    need = protocol.samples_for_precision(busy)
    assert not protocol.too_noisy(TimeStats(median=1.0, iqr=0.5, min=0.5, max=3.0, n=need))
    assert protocol.too_noisy(TimeStats(median=1.0, iqr=0.5, min=0.5, max=3.0, n=need - 1))
    twice = protocol.samples_for_precision(TimeStats(median=1.0, iqr=1.0, min=0.5, max=3.0, n=30))
    assert twice == pytest.approx(4 * need, rel=0.01)
    # a short call's spread is judged against NOISY_MS, not a share of a tiny median
    tiny = TimeStats(median=0.01, iqr=0.02, min=0.005, max=0.05, n=30)
    assert not protocol.too_noisy(tiny)


JITTERY_TASK = """
import random
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(random.uniform(0.001, 0.0016))  # a machine busy at random
        return x * 2


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def test_a_spread_baseline_is_measured_again_until_its_median_is_known_then_cached(tmp_path):
    """A baseline whose samples spread too much for its median to be known (a busy machine) takes
    more samples, with the candidate frozen, until it is: then it is cached like any other."""
    (tmp_path / "task.py").write_text(JITTERY_TASK)
    cand = tmp_path / "cand.py"
    cand.write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        return x * 2\n")
    task, cache = load_task(tmp_path / "task.py"), tmp_path / "cache"
    # the rounds take 30 samples at most; measuring again may take 4 x 1.5 s more
    cfg = _cfg(cache, batch_calls=1, max_iters=30, baseline_budget_s=1.5)
    first = evaluate(task, load_candidate(cand), cfg)
    assert first.correct, first.reasons
    base = first.timing_check["baselines"]
    assert base["source"] == "measured" and base["measured_again"]["eager"] > 0, base
    assert base["cached"] is True and "too_noisy" not in base, base
    eager = first.times_ms["eager"]
    assert not protocol.too_noisy(eager) and eager.n > 30
    second = evaluate(task, load_candidate(cand), cfg)
    assert second.timing_check["baselines"]["source"] == "cached"
    assert second.times_ms["eager"] == eager


def test_baselines_too_noisy_to_pin_down_are_not_cached(tmp_path):
    """Baselines whose median stays unknown after NOISY_BUDGET times their budget of samples serve
    their own evaluation but are not kept to skew every later speedup."""
    (tmp_path / "task.py").write_text(NOISY_TASK)
    cand = tmp_path / "cand.py"
    cand.write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        return x * 2\n")
    task, cache = load_task(tmp_path / "task.py"), tmp_path / "cache"
    for _ in range(2):
        res = evaluate(task, load_candidate(cand), _cfg(cache, batch_calls=1))
        assert res.correct, res.reasons
        base = res.timing_check["baselines"]
        assert base["source"] == "measured" and base["cached"] is False
        assert base["too_noisy"][0].startswith("eager") and base["measured_again"]["eager"] > 0
    assert not list((cache / "baselines").glob("*.json"))


def test_tampered_cache_entry_is_measured_again(tmp_path, kept_however_noisy):
    cand = tmp_path / "cand.py"
    cand.write_text(CORRECT)
    task, cache = load_task(TASK), tmp_path / "cache"
    first = evaluate(task, load_candidate(cand), _cfg(cache))
    [entry] = (cache / "baselines").glob("*.json")
    doc = json.loads(entry.read_text())
    for e in doc["entries"].values():
        e["entry"]["eager"]["median"] *= 1000  # a 1000x "speedup" for whoever comes next
    entry.write_text(json.dumps(doc))
    again = evaluate(task, load_candidate(cand), _cfg(cache))
    assert again.timing_check["baselines"]["source"] == "measured"
    assert again.times_ms["eager"].median < 100 * first.times_ms["eager"].median


@pytest.mark.slow
def test_compile_baseline_runs_in_its_own_runner_and_is_cached(tmp_path, kept_however_noisy):
    cand = tmp_path / "cand.py"
    cand.write_text(CORRECT)
    task, cache = load_task(TASK), tmp_path / "cache"
    first = evaluate(task, load_candidate(cand), _cfg(cache, compile_baseline=True, timing_budget_s=0.3))
    assert first.correct, first.reasons
    if Code.BASELINE_COMPILE_UNAVAILABLE in [r.code for r in first.reasons]:
        pytest.skip("torch.compile cannot build on this machine")
    assert first.times_ms["compile"].median > 0 and first.speedup_compile > 0
    assert first.timing_check["baselines"]["source"] == "measured"
    assert first.timing_check["baselines"]["cached"] is True
    second = evaluate(task, load_candidate(cand), _cfg(cache, compile_baseline=True, timing_budget_s=0.3))
    assert second.timing_check["baselines"]["source"] == "cached"
    assert second.times_ms["compile"] == first.times_ms["compile"]


def test_cli_baselines_writes_kernelbench_timing_layout(tmp_path):
    import subprocess
    import sys

    level = tmp_path / "kb" / "level1"
    level.mkdir(parents=True)
    (level / "1_ReluBias.py").write_text(TASK.read_text())
    out, cache = tmp_path / "timing", tmp_path / "cache"
    args = [sys.executable, "-m", "cuda_agent", "baselines", str(tmp_path / "kb"), "--device", "cpu",
            "--no-compile-baseline", "--out", str(out), "--cache-dir", str(cache), "--json"]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    obj = json.loads(p.stdout)
    [row] = obj["tasks"]
    assert row["task"] == "level1/1_ReluBias" and row["source"] == "measured"
    assert row["eager"]["median"] > 0 and row["self_check"] > 0 and row["reasons"] == []
    [written] = obj["written"]
    doc = json.loads(Path(written).read_text())
    entry = doc["level1"]["1_ReluBias.py"]
    assert Path(written).name == "baseline_time_torch.json"
    assert entry["mean"] > 0 and entry["num_trials"] >= 5 and entry["min"] <= entry["median"] <= entry["max"]
    assert entry["device"] == "cpu" and entry["hardware"]
    assert Path(written).parent.name == entry["hardware"].replace(" ", "_")
    # A baseline measured well enough is cached and read by the next run. One too noisy (a busy
    # machine: CI runs two test processes on two cores) says so, is not cached, and the next run
    # measures it again.
    for _ in range(4):
        assert row["cached"] == (not row["too_noisy"]), row
        again = json.loads(subprocess.run(args, capture_output=True, text=True).stdout)["tasks"][0]
        if row["cached"]:
            assert again["source"] == "cached" and again["eager"] == row["eager"]
            break
        assert again["source"] == "measured"
        row = again
    else:
        pytest.fail(f"the baseline was too noisy to cache four times running: {row['too_noisy']}")
    # an empty task set is a usage error
    (tmp_path / "empty" / "level1").mkdir(parents=True)
    p = subprocess.run(args[:4] + [str(tmp_path / "empty"), "--device", "cpu"], capture_output=True, text=True)
    assert p.returncode == 2 and "no tasks" in p.stderr
