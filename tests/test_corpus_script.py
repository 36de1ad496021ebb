"""benchmarks/corpus.py's own logic: how the runs are split between concurrent calls, and which
stored verdicts `forget` drops."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_groups_split_the_runs_with_kernels_left_evenly_and_never_overlap(benchmark_script):
    corpus = benchmark_script("corpus")
    runs = ["a", "b", "c", "d", "e"]
    left = {"a": 7, "b": 27, "c": 46, "d": 58, "e": 0}
    groups = [corpus.group_of(runs, left, i, 2) for i in (1, 2)]
    assert sorted(groups[0] + groups[1]) == ["a", "b", "c", "d"]  # every run with work, once; e is done
    loads = [sum(left[r] for r in g) for g in groups]
    assert abs(loads[0] - loads[1]) <= 20, groups
    assert all(g == [r for r in runs if r in g] for g in groups)  # each keeps the run order


def test_forget_drops_the_verdicts_with_the_codes_asked_for(tmp_path, benchmark_script):
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate.result import Code, EvalResult

    corpus = benchmark_script("corpus")
    db = tmp_path / "run.sqlite"
    with Store(db) as store:
        store.open_run("r", {"taskset": "t", "solutions": "s", "device": "cpu", "policy": "none", "tasks": []})
        for task, code in (("oom", Code.OUT_OF_MEMORY), ("ref", Code.REFERENCE_ERROR), ("bad", Code.OUTPUT_MISMATCH)):
            res = EvalResult(task=task, candidate="c")
            res.add(code, "why")
            store.put("r", task, 0, 1, "c", "", res, "v")
    args = type("Args", (), {"runs_dir": tmp_path, "codes": "out_of_memory", "infra": True, "where": []})()
    assert corpus.cmd_forget(args) == 0
    left = {t for (t,) in sqlite3.connect(db).execute("SELECT task FROM results")}
    kinds = {t: json.loads(r)["reasons"][0]["kind"] for t, r in
             sqlite3.connect(db).execute("SELECT task, result FROM results")}
    assert left == {"bad"}, kinds  # reference_error is of kind infra; output_mismatch stays


def test_forget_where_drops_only_the_kernels_named(tmp_path, benchmark_script):
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate.result import Code, EvalResult

    corpus = benchmark_script("corpus")
    db = tmp_path / "run.sqlite"
    with Store(db) as store:
        store.open_run("r", {"taskset": "t", "solutions": "s", "device": "cpu", "policy": "none", "tasks": []})
        for task in ("level3/4_LeNet5", "level3/14_DenseNet", "level3/23_EfficientNetB1"):
            res = EvalResult(task=task, candidate="c")
            res.add(Code.OUTPUT_MISMATCH, "why")
            store.put("r", task, 0, 1, "c", "", res, "v")
    args = type("Args", (), {"runs_dir": tmp_path, "codes": "output_mismatch", "infra": False,
                             "where": ["r/level3/4_", "r/level3/23_"]})()
    assert corpus.cmd_forget(args) == 0
    left = {t for (t,) in sqlite3.connect(db).execute("SELECT task FROM results")}
    assert left == {"level3/14_DenseNet"}  # "level3/4_" is not a part of "level3/14_"


def test_pack_then_restore_carries_the_stores_logs_and_memory_needs(tmp_path, benchmark_script):
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate.result import EvalResult

    corpus = benchmark_script("corpus")
    runs, memory = tmp_path / "device" / "runs", tmp_path / "device" / "memory"
    runs.mkdir(parents=True)
    memory.mkdir()
    (memory / "abc.json").write_text('{"in_bytes": 1, "out_bytes": 2}')
    (runs / "r.log").write_text("bench said this")
    with Store(runs / "r.sqlite") as store:  # open while packing, as bench's is
        store.open_run("r", {"taskset": "t", "solutions": "s", "device": "cpu", "policy": "none", "tasks": []})
        for task in ("a", "b"):
            store.put("r", task, 0, 1, "c", "", EvalResult(task=task, candidate="c"), "v")
        archive = tmp_path / "out" / "corpus-runs.tar.gz"
        pack = type("Args", (), {"runs_dir": runs, "memory": memory, "to": archive})()
        assert corpus.cmd_pack(pack) == 0
    here = tmp_path / "here" / "runs"
    restore = type("Args", (), {"source": str(archive), "runs_dir": here, "force": False})()
    assert corpus.cmd_restore(restore) == 0
    assert corpus.verdicts(here / "r.sqlite") == 2
    assert (here / "r.log").read_text() == "bench said this"
    assert (here.parent / "memory" / "abc.json").is_file()
    assert not list(archive.parent.glob("*.part"))  # written beside, renamed into place


def _script(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """benchmarks/corpus.py in a process of its own (a hang fails the test instead of stopping it)."""
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "corpus.py"), *argv], capture_output=True,
                          text=True, timeout=timeout)


FAKE_BENCH = r'''
import sys, time
from pathlib import Path
sys.path.insert(0, SRC)
from cuda_agent.bench.store import Store
from cuda_agent.evaluate.result import EvalResult

argv = sys.argv[1:]
run, db, sols = (argv[argv.index(k) + 1] for k in ("--run", "--db", "--solutions"))
with open(EVENTS, "a") as f:
    f.write(f"{time.monotonic()} start {run}\n")
kernels = sorted(Path(ROOT, sols).glob("*.py"))
tasks = [[f"level1/{k.name.split('_')[3]}_T", 1] for k in kernels]
with Store(Path(ROOT, db)) as store:
    store.open_run(run, {"taskset": "t", "solutions": sols, "device": "cpu", "policy": "none", "tasks": tasks})
    for task, _ in tasks:
        time.sleep(DELAY[run])
        store.put(run, task, 0, 1, "c", "", EvalResult(task=task, candidate="c"), "v")
with open(EVENTS, "a") as f:
    f.write(f"{time.monotonic()} end {run}\n")
'''


def _staged_with_fake_bench(tmp_path: Path, problems: dict[str, list[int]], delay: dict[str, float],
                            benchmark_script):
    """A staged corpus of empty kernels (`problems` per run, level 1), and a fake bench that stores a
    verdict per kernel every `delay[run]` seconds and logs its start and end to the events file.
    Returns (staged folder, events file, the --cli that calls the fake)."""
    corpus = benchmark_script("corpus")
    staged, events = tmp_path / "staged", tmp_path / "events"
    rows = []
    for run, numbers in problems.items():
        sols = staged / "solutions" / run
        sols.mkdir(parents=True)
        for p in numbers:
            (sols / f"level_1_problem_{p}_sample_0_kernel.py").write_text("")
            rows.append({"run": run, "level": 1, "problem": p, "file": "f", "kernelbench": {"correct": True}})
    (staged / "tasks").mkdir()
    (staged / "selection.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fake = tmp_path / "fake_bench.py"
    fake.write_text(f"SRC = {str(ROOT / 'src')!r}\nROOT = {str(corpus.ROOT)!r}\nEVENTS = {str(events)!r}\n"
                    f"DELAY = {delay!r}\n" + FAKE_BENCH)
    return staged, events, f"{sys.executable} {fake}"


def test_run_starts_the_next_bench_beside_the_tail_of_the_running_one(tmp_path, benchmark_script):
    """With fewer kernels left in the running bench than it has jobs, the next run's bench starts
    beside it; each store gets every verdict."""
    corpus = benchmark_script("corpus")
    staged, events, cli = _staged_with_fake_bench(tmp_path, {"a": [1], "b": [2, 3]}, {"a": 3.0, "b": 0.2},
                                                  benchmark_script)
    argv = ["run", "--staged", str(staged), "--cli", cli, "--device", "cpu", "--jobs", "4"]
    assert _script(argv, timeout=60).returncode == 0
    log = [line.split() for line in events.read_text().splitlines()]
    order = [(what, run) for _, what, run in sorted(log, key=lambda e: float(e[0]))]
    assert order.index(("start", "b")) < order.index(("end", "a")), order  # b beside a's tail
    for run, n in (("a", 1), ("b", 2)):
        assert corpus.verdicts(staged / "runs" / f"{run}.sqlite") == n


def test_run_stops_its_benches_by_the_deadline(tmp_path, benchmark_script):
    # b waits for a's tail, which never comes
    staged, events, cli = _staged_with_fake_bench(tmp_path, {"a": [1, 2, 3, 4, 5], "b": [6]}, {"a": 60.0, "b": 60.0},
                                                  benchmark_script)
    t0 = time.monotonic()
    argv = ["run", "--staged", str(staged), "--cli", cli, "--device", "cpu",
            "--jobs", "2", "--deadline", "6", "--grace", "3", "--min-left", "0"]
    done = _script(argv, timeout=30)
    assert done.returncode == 0, done.stdout
    assert time.monotonic() - t0 < 15
    assert "end" not in events.read_text()  # stopped, not finished
