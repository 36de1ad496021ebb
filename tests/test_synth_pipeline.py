"""`cuda-agent synth` end to end on the CPU backend: composition, the filters on planted bad tasks,
decontamination against KernelBench, the dataset files, resuming, and the dataset as a task set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.errors import UsageError
from cuda_agent.synth.compose import compose_offline
from cuda_agent.synth.config import parse_mix
from cuda_agent.synth.filters import ProbePool, rescale
from cuda_agent.synth.pipeline import SynthConfig, run_synth
from cuda_agent.synth.similarity import kernelbench_index
from cuda_agent.tasks import load_taskset

KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"

HEAD = "import torch\nimport torch.nn as nn\n\n"
TAIL = "\ndef get_init_inputs():\n    return []\n"


def _task(forward: str, inputs: str = "return [torch.randn(batch_size, 256, 256)]", batch: int | None = 8) -> str:
    size = f"batch_size = {batch}\n" if batch is not None else "batch_size_ = 8\nbatch_size = batch_size_\n"
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.w = nn.Parameter(torch.randn(256))\n\n"
            f"    def forward(self, x):\n        {forward}\n\n\n{size}\n\ndef get_inputs():\n    {inputs}\n" + TAIL)


PLANTED = {
    # name: (source, scalable, expected reason)
    "stochastic": (_task("return torch.nn.functional.dropout(x, 0.5, training=True)"), True, "nondeterministic"),
    "constant": (_task("return torch.zeros_like(x) + 3.0"), True, "constant_output"),
    "input_independent": (_task("return self.w.expand_as(x) + 1e-5 * x"), True, "input_independent"),
    "too_fast": (_task("return x * 2", "return [torch.randn(batch_size, 4)]", batch=None), False, "too_fast"),
    "non_finite": (_task("return torch.log(x - 100.0)"), True, "non_finite"),
    "broken": (_task("return x @ torch.randn(3, 3)"), True, "eager_error"),
    "syntax": ("import torch\ndef get_inputs(:\n", True, "load_error"),
}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    p = ProbePool("cpu", 2, [None], tmp / "probe.log", tmp / "locks", timeout_s=120, window_ms=(0.5, 50.0))
    yield p
    p.close()


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_bad_tasks_are_rejected_with_the_right_reason(pool, name):
    source, scalable, reason = PLANTED[name]
    v = pool.fit(source, name, scalable)
    assert not v.ok and v.reason == reason, (v.reason, v.message)
    assert v.message


def test_a_good_task_is_accepted_and_a_hanging_one_times_out(tmp_path):
    # A generous limit for the good tasks (torch.compile on a loaded CI machine once took over 20 s),
    # a short one for the hang
    p = ProbePool("cpu", 1, [None], tmp_path / "probe.log", tmp_path / "locks", timeout_s=180, window_ms=(0.05, 50.0))
    try:
        v = p.fit(_task("return torch.tanh(x) * self.w"), "good", True)
        assert v.ok, v.message
        assert 0.05 <= v.facts["eager_ms"] <= 50.0 and v.facts["compile_ms"] > 0
        hang = _task("import time\n        time.sleep(3600)\n        return x")
        p.timeout_s = 10
        t = p.fit(hang, "hang", True)
        assert not t.ok and t.reason == "timeout" and "within 10 s" in t.message
        p.timeout_s = 180
        again = p.fit(_task("return torch.tanh(x) * self.w"), "good-again", True)  # the process was replaced
        assert again.ok, again.message
    finally:
        p.close()


def test_the_batch_is_rescaled_into_the_window(tmp_path, cache_dir):
    """A draft far under the window is rescaled up into it. Its batch of one (256 elements) is under
    torch's grain of intra-op parallelism, so one thread runs it: 0.05-0.07 ms alone, 0.1-0.15 ms
    with a neighbour busy on both cores, far under 2 ms. (A 256x256 batch runs on two threads, and
    a neighbour process of `pytest -n 2` holding a core stretched it from 0.16 ms to 8-18 ms, into
    the old window of 2-50 ms: nothing to rescale.) The window is wide enough to hold what such a
    neighbour does to the rescaled draft (multi-threaded by then, up to 17x slower: 0.48 -> 8.5 ms
    at a batch of 1000); and the probe times under the cache's CPU lock, the one the evaluations of
    the other process time under, so the two do not time at once."""
    p = ProbePool("cpu", 1, [None], tmp_path / "probe.log", cache_dir, timeout_s=60, window_ms=(2.0, 800.0))
    try:
        v = p.fit(_task("return torch.tanh(x) * self.w", "return [torch.randn(batch_size, 256)]", batch=1),
                  "small", True)
        assert v.ok, v.message
        assert 2.0 <= v.facts["eager_ms"] <= 800.0
        assert v.rescaled >= 1 and v.batch > 1 and f"batch_size = {v.batch}\n" in v.source
    finally:
        p.close()
    assert rescale(10, 0.1, 0, (1.0, 100.0), 1 << 30) == 1000  # to the window's geometric middle (10 ms)
    assert rescale(10, 0.1, 1 << 30, (1.0, 100.0), 4 << 30) == 40  # capped by memory


def test_drafts_are_reproducible_and_the_mix_is_respected():
    assert compose_offline(7, 3).source == compose_offline(7, 3).source
    assert compose_offline(7, 3).source != compose_offline(8, 3).source
    counts = [len(compose_offline(0, i, parse_mix("2:1,3:1")).ops) for i in range(40)]
    assert set(counts) == {2, 3}
    with pytest.raises(UsageError):
        parse_mix("7:1")


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")
def test_a_synth_run_accepts_n_decontaminated_tasks_that_load_and_run(tmp_path):
    n = 4  # each task costs a probe and a torch.compile timing (C++ builds on the CPU backend)
    out = tmp_path / "ds"
    cmd = [sys.executable, "-m", "cuda_agent", "synth", "--out", str(out), "--n", str(n), "--device", "cpu",
           "--seed", "3", "--kernelbench", str(KERNELBENCH), "--json", "--window", "0.2,50"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["accepted"] == n and summary["complete"]
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    rejections = [json.loads(line) for line in (out / "rejections.jsonl").read_text().splitlines()]
    assert len(rows) == n and summary["attempts"] == len(rows) + len(rejections)
    assert sorted(r["attempt"] for r in rows + rejections) == list(range(summary["attempts"]))
    index = kernelbench_index(KERNELBENCH)
    for r in rows:
        assert set(r) >= {"id", "code", "ops", "num_ops", "eager_ms", "compile_ms", "max_kernelbench_similarity", "seed"}
        assert r["num_ops"] == len(r["ops"]) and 1 <= r["num_ops"] <= 5 and r["seed"] == 3
        assert 0.2 <= r["eager_ms"] <= 50
        score, _ = index.max_similarity(r["code"])
        assert score < 0.9 and abs(score - r["max_kernelbench_similarity"]) < 1e-3
    # the dataset is a task set: every row loads, and runs as a task
    tasks = load_taskset(out)
    assert [t.name for t in tasks] == [r["id"] for r in rows] or sorted(t.name for t in tasks) == sorted(r["id"] for r in rows)
    import torch

    for t in tasks:
        ns: dict = {}
        exec(compile(t.source, t.name, "exec"), ns)
        torch.manual_seed(0)
        y = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
        assert isinstance(y, torch.Tensor) and torch.isfinite(y).all()
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("parquet", data_files=str(out / "tasks.parquet"), split="train")
    assert ds.num_rows == len(rows) and ds[0]["id"] == rows[0]["id"] and list(ds[0]["ops"]) == rows[0]["ops"]
    stats = (out / "stats.md").read_text()
    assert f"| accepted | {len(rows)} of {n} requested |" in stats and (out / "num_ops.png").stat().st_size > 1000


def test_a_run_resumes_where_it_stopped(tmp_path):
    out = tmp_path / "ds"
    cfg = SynthConfig(out=out, n=1, device="cpu", seed=5, window_ms=(0.2, 50.0), workers=2)
    first = run_synth(cfg)
    assert first["accepted"] == 1
    rows1 = (out / "tasks.jsonl").read_text().splitlines()
    # a kill in the middle of a write leaves half a line: dropped on resume
    with open(out / "rejections.jsonl", "a") as f:
        f.write('{"attempt": 99, "rea')
    cfg.n = 2
    second = run_synth(cfg)
    rows2 = (out / "tasks.jsonl").read_text().splitlines()
    assert second["accepted"] == 2 and rows2[:1] == rows1
    attempts = [json.loads(x)["attempt"] for x in rows2] + [
        json.loads(x)["attempt"] for x in (out / "rejections.jsonl").read_text().splitlines()]
    assert sorted(attempts) == list(range(second["attempts"]))  # each attempt once, none lost or repeated
    with pytest.raises(UsageError, match="other settings"):
        run_synth(SynthConfig(out=out, n=2, device="cpu", seed=6, window_ms=(0.2, 50.0)))


def test_llm_composer_feeds_the_same_filters(tmp_path):
    """--composer llm through the real client over HTTP: a good task is accepted, one without code and
    one that is constant are rejected with their reasons."""
    from cuda_agent.agent.llm import ChatClient
    from cuda_agent.agent.scripted import ScriptedServer, ScriptStep

    good = _task("return torch.tanh(x) * self.w")
    steps = [ScriptStep(content="No code, sorry."),
             ScriptStep(content=f"```python\n{_task('return torch.zeros_like(x)')}```"),
             ScriptStep(content=f"Here it is.\n```python\n{good}```")]
    with ScriptedServer(steps) as server:
        client = ChatClient(server.base_url, "scripted", api_key_env=None, max_retries=0)
        summary = run_synth(SynthConfig(out=tmp_path / "llm", n=1, device="cpu", composer="llm", workers=1,
                                        window_ms=(0.05, 50.0), model="scripted"), llm=client)
    assert summary["accepted"] == 1 and summary["attempts"] == 3
    assert summary["rejections"] == {"no_code": 1, "constant_output": 1}
    row = json.loads((tmp_path / "llm" / "tasks.jsonl").read_text())
    assert row["composer"] == "llm" and row["attempt"] == 2 and "torch.tanh(x)" in row["code"]


def test_a_broken_probe_stops_the_run_with_a_clear_error(tmp_path, monkeypatch):
    from cuda_agent.errors import CudaAgentError
    from cuda_agent.synth import filters

    monkeypatch.setattr(filters.ProbePool, "fit",
                        lambda self, source, name, scalable: filters.Verdict(False, "probe_error", "boom"))
    with pytest.raises(CudaAgentError, match="probe.log"):
        run_synth(SynthConfig(out=tmp_path / "ds", n=2, device="cpu", workers=1))
    lines = (tmp_path / "ds" / "rejections.jsonl").read_text().splitlines()
    assert len(lines) == 20 and all(json.loads(x)["reason"] == "probe_error" for x in lines)


def test_out_of_memory_beside_other_probes_is_probed_again_alone(tmp_path):
    """The first probe of this draft 'runs out of memory' (as beside a big neighbour on a GPU); with
    two probes on the device it is probed again alone and accepted. (Its flag file is written in the
    probe's sandbox, whose /tmp is its own: the second try, in the same process, finds it.)"""
    flag = Path("/tmp") / f"cuda-agent-test-oom-once-{os.getpid()}-{tmp_path.name}"
    oom_once = _task(f"import os\n        if not os.path.exists({str(flag)!r}):\n"
                     f"            open({str(flag)!r}, 'w').close()\n"
                     "            raise torch.OutOfMemoryError('CUDA out of memory (a neighbour)')\n"
                     "        return torch.tanh(x) * self.w")
    p = ProbePool("cpu", 2, [None], tmp_path / "probe.log", tmp_path / "locks", timeout_s=120, window_ms=(0.05, 50.0))
    try:
        v = p.fit(oom_once, "oom-once", True)
        assert v.ok, (v.reason, v.message)
        assert p.reruns == 1
    finally:
        p.close()
        flag.unlink(missing_ok=True)  # (where the probes ran unsandboxed)


def test_out_of_memory_in_the_timing_is_out_of_memory_not_a_probe_error(tmp_path):
    """On the H200, 12 probes on one GPU ran out of memory in the checks and the timing, outside the
    forward's try: those drafts must get `out_of_memory` (which the pool retries alone), not probe_error."""
    from cuda_agent.synth.probe import Prober

    calls = tmp_path / "calls"
    fourth_call_fails = _task(f"with open({str(calls)!r}, 'a') as f:\n"
                              "            f.write('x')\n"
                              f"        if len(open({str(calls)!r}).read()) == 4:\n"
                              "            raise torch.OutOfMemoryError('CUDA out of memory (in the timing)')\n"
                              "        return torch.tanh(x) * self.w")
    reply = Prober().cmd_probe(source=fourth_call_fails, name="oom-timing", device="cpu", window_ms=[0.0, 1e9],
                               atol=1e-2, rtol=1e-2, budget_s=0.05, lock=None)
    assert calls.read_text() == "xxxx"  # three checking calls, then the first timed one
    assert reply["accepted"] is False and reply["reason"] == "out_of_memory", reply
    assert "in the timing" in reply["message"]
