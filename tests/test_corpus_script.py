"""benchmarks/corpus.py's own logic: how the runs are split between concurrent calls, and which
stored verdicts `forget` drops."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _corpus():
    spec = importlib.util.spec_from_file_location("corpus_script", ROOT / "benchmarks" / "corpus.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["corpus_script"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_groups_split_the_runs_with_kernels_left_evenly_and_never_overlap():
    corpus = _corpus()
    runs = ["a", "b", "c", "d", "e"]
    left = {"a": 7, "b": 27, "c": 46, "d": 58, "e": 0}
    groups = [corpus.group_of(runs, left, i, 2) for i in (1, 2)]
    assert sorted(groups[0] + groups[1]) == ["a", "b", "c", "d"]  # every run with work, once; e is done
    loads = [sum(left[r] for r in g) for g in groups]
    assert abs(loads[0] - loads[1]) <= 20, groups
    assert all(g == [r for r in runs if r in g] for g in groups)  # each keeps the run order


def test_forget_drops_the_verdicts_with_the_codes_asked_for(tmp_path):
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate.result import Code, EvalResult

    corpus = _corpus()
    db = tmp_path / "run.sqlite"
    with Store(db) as store:
        store.open_run("r", {"taskset": "t", "solutions": "s", "device": "cpu", "policy": "none", "tasks": []})
        for task, code in (("oom", Code.OUT_OF_MEMORY), ("ref", Code.REFERENCE_ERROR), ("bad", Code.OUTPUT_MISMATCH)):
            res = EvalResult(task=task, candidate="c")
            res.add(code, "why")
            store.put("r", task, 0, 1, "c", "", res, "v")
    args = type("Args", (), {"runs_dir": tmp_path, "codes": "out_of_memory", "infra": True})()
    assert corpus.cmd_forget(args) == 0
    left = {t for (t,) in sqlite3.connect(db).execute("SELECT task FROM results")}
    kinds = {t: json.loads(r)["reasons"][0]["kind"] for t, r in
             sqlite3.connect(db).execute("SELECT task, result FROM results")}
    assert left == {"bad"}, kinds  # reference_error is of kind infra; output_mismatch stays


def test_pack_then_restore_carries_the_stores_logs_and_memory_needs(tmp_path):
    from cuda_agent.bench.store import Store
    from cuda_agent.evaluate.result import EvalResult

    corpus = _corpus()
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
