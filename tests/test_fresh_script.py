"""benchmarks/fresh.py's own logic: how a candidate is made new, how a build's steps are read from
ninja's log, and how runs split over several device calls become one table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_fresh_variant_changes_the_extension_source_and_nothing_else(benchmark_script):
    fresh = benchmark_script("fresh")
    src = 'cuda = """\n#include <torch/extension.h>\n__global__ void k() {}\n"""\nx = 1\n'
    new = fresh.fresh_variant(src, "abc123")
    assert new != src
    assert "// fresh variant abc123" in new.split('"""')[1]  # inside the CUDA source
    assert new.replace("\n// fresh variant abc123", "") == src


def _build_folder(path: Path, log: str, ninja: str) -> Path:
    path.mkdir(parents=True)
    (path / ".ninja_log").write_text(log)
    (path / "build.ninja").write_text(ninja)
    return path


def test_ninja_steps_reads_the_newest_builds_last_run_of_each_target(tmp_path, benchmark_script):
    import os

    fresh = benchmark_script("fresh")
    old = _build_folder(tmp_path / "a-1", "# ninja log v7\n0\t5000\t1\tmain.o\tx\n", "cxx = c++\n")
    os.utime(old / ".ninja_log", (1, 1))
    log = ("# ninja log v7\n"
           "0\t9000\t1\tmain.o\th1\n"
           "0\t40000\t1\tcuda.cuda.o\th2\n"
           "40000\t40300\t1\text.so\th3\n"
           "0\t1200\t2\tmain.o\th4\n")  # built again later: the last run counts
    new = _build_folder(tmp_path / "b-2", log, "nvcc = /usr/local/cuda/bin/nvcc\ncuda_cflags = -O3 -gencode=x\nrule cc\n")
    (new / "cuda.cuda.o.how").write_text("as written\nerror: torch::nn is not a namespace\nhost header: used\n")
    got = fresh.ninja_steps(tmp_path)
    assert got["steps_s"] == {"main.o": 1.2, "cuda.cuda.o": 40.0, "ext.so": 0.3}
    assert got["flags"] == {"nvcc": "/usr/local/cuda/bin/nvcc", "cuda_cflags": "-O3 -gencode=x"}
    assert got["cuda_compile"] == "as written" and got["host_header"] == "used"  # light_nvcc.py's note
    assert got["cuda_why"] == "error: torch::nn is not a namespace"  # why the lighter headers failed
    assert fresh.ninja_steps(tmp_path / "missing") == {}


def _table(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fresh.py"), "table", *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def _row(name: str, total: float, load: float, nvcc: float) -> dict:
    return {"name": name, "correct": True, "reward": 1, "reasons": [], "total_s": total,
            "phases_s": {"load": load, "correctness": 0.5, "timing": 0.4, "total": total},
            "ninja": {"steps_s": {"cuda.cuda.o": nvcc, "main.o": 9.0, "x.so": 0.3}, "flags": {}, "cuda_compile": "light"}}


def test_the_table_merges_runs_split_over_calls(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"alone": [_row("p1", 61.0, 55.0, 50.0)], "alone_pool": {"warm_up_s": 9.5, "warm": True}}))
    b.write_text(json.dumps({"kernelbench_alone": [{"name": "p1", "wall_s": 48.0, "build_s": 40.1, "ninja": {
        "steps_s": {"cuda.cuda.o": 37.5}}}],
        "service": {"eval_cached": {"median_s": 1.81, "walls_s": [1.8], "baselines": ["cached"], "rc": 0}}}))
    out = _table(a, b)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "61.0 s" in text and "48.0 s" in text and "1.81 s" in text  # figures of both files
    assert "build step: nvcc (the CUDA unit) (median of 1)" in text
    assert "50.0 s" in text and "37.5 s" in text
    assert "baselines cached 1/1" in text
    assert "its workers started first (not counted)" in text and "9.5 s" in text
    assert "CUDA units compiled with a light torch/extension.h: tensor / light" in text and "0 / 1 of 1" in text


def test_the_table_says_which_file_is_not_a_runs_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    out = _table(bad)
    assert out.returncode != 0
    assert "bad.json" in out.stderr and "fresh.py run" in out.stderr


def test_the_warm_up_skips_only_tasks_whose_baselines_for_this_gpu_and_memory_record_are_cached(tmp_path, benchmark_script):
    """fresh.py evaluates a task's baselines before a batch unless the cache holds both the entry an
    evaluation on this GPU would look up and the task's memory record; another GPU's or driver's
    entry, or a missing memory record, leaves the task to be evaluated."""
    import types

    from cuda_agent.evaluate import EvalConfig, memory
    from cuda_agent.evaluate.baselines import Baselines, BaselineCache, baseline_key
    from cuda_agent.evaluate.result import TimeStats

    fresh = benchmark_script("fresh")
    cfg = EvalConfig(device="cuda", cache_dir=tmp_path)
    gpu = {"type": "cuda", "name": "NVIDIA H200", "capability": "9.0", "multiprocessors": 132, "memory_gb": 139.8,
           "l2_bytes": 62914560, "cuda": "13.0", "driver": "580.1", "torch": "2.11.0", "python": "3.12.3", "host": "a"}
    a, b, c = (types.SimpleNamespace(source=f"class Model: pass  # {n}\n") for n in "abc")
    st = TimeStats(median=1.0, iqr=0.1, min=0.9, max=1.2, n=10)
    for task in (a, b):
        BaselineCache(tmp_path / "baselines").put(task.source, baseline_key(gpu, cfg.batch_calls, cfg.compile_baseline,
                                                                            cfg.touch),
                                                  Baselines(eager=st, compile=st, compile_error=None, calls_per_batch=8,
                                                            device=gpu, measured_at="2026-12-05T00:00:00"))
    for task in (a, c):
        memory.record(tmp_path, task.source, in_bytes=1 << 20, out_bytes=1 << 20)
    assert fresh.cached_tasks(cfg, [a, b, c], {**gpu, "host": "b"}) == [a]  # (the host is not part of the key)
    assert fresh.cached_tasks(cfg, [a, b, c], {**gpu, "driver": "580.2"}) == []
    assert fresh.cached_tasks(cfg, [a, b, c], None) == []
