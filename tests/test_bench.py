"""`cuda-agent bench` and `report`: the metric arithmetic on constructed outcomes, matching solutions
in both layouts, the run store (resume after a kill, parameters checked), and the report's files."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.bench.metrics import Outcome, best_of, metrics
from cuda_agent.bench.solutions import find_solutions
from cuda_agent.bench.store import Store
from cuda_agent.errors import UsageError
from cuda_agent.tasks import load_kernelbench

DATA = Path(__file__).parent / "data"
TASK = (DATA / "relu_bias_task.py").read_text()
RIGHT = (DATA / "relu_bias_model_new.py").read_text()


def test_metrics_give_pass_rates_faster_rates_geomeans_and_fast_p_per_level():
    outs = [Outcome("A", 1, True, 2.0, 1.5), Outcome("B", 1, True, 0.5, None), Outcome("C", 1, False),
            Outcome("D", 2, True, 1.04, 0.8), Outcome("E", 2, True, 4.0, 2.0)]
    m = metrics(outs)
    l1, l2, al = m["levels"]["1"], m["levels"]["2"], m["overall"]
    assert list(m["levels"]) == ["1", "2"]
    assert (l1["tasks"], l1["correct"]) == (3, 2) and l1["pass_rate"] == pytest.approx(2 / 3)
    assert l1["faster_eager_rate"] == pytest.approx(1 / 3) and l1["faster_compile_rate"] == pytest.approx(1 / 3)
    assert l1["geomean_eager"] == pytest.approx(1.0) and l1["geomean_eager_all"] == pytest.approx(1.0)
    assert l1["geomean_compile"] == pytest.approx(1.5)  # B has no compile speedup: left out
    assert l1["geomean_compile_all"] == pytest.approx(1.5 ** (1 / 3))  # B and C count as 1.0x
    assert l2["pass_rate"] == 1.0 and l2["faster_eager_rate"] == 0.5  # 1.04x is not "more than 5%"
    assert l2["geomean_eager"] == pytest.approx(math.sqrt(4.16)) and l2["geomean_compile"] == pytest.approx(math.sqrt(1.6))
    assert al["tasks"] == 5 and al["pass_rate"] == pytest.approx(0.8)
    assert al["faster_eager_rate"] == pytest.approx(0.4) and al["faster_compile_rate"] == pytest.approx(0.4)
    assert al["geomean_eager"] == pytest.approx(4.16 ** (1 / 4))
    assert al["geomean_eager_all"] == pytest.approx(4.16 ** (1 / 5))
    fp = al["fast_p_eager"]
    assert fp["0"] == pytest.approx(0.8) and fp["1"] == pytest.approx(0.6) and fp["1.05"] == pytest.approx(0.4)
    assert fp["3"] == pytest.approx(0.2) and fp["5"] == 0.0
    assert al["fast_p_compile"]["1"] == pytest.approx(0.4)
    assert metrics([])["overall"]["tasks"] == 0


def test_the_best_of_a_tasks_samples_takes_each_baselines_best_correct_speedup():
    best = best_of([Outcome("t", 1, True, 1.2, None), Outcome("t", 1, False, 5.0, 5.0),
                    Outcome("t", 1, True, 0.9, 1.3)])
    assert best.correct and best.speedup_eager == 1.2 and best.speedup_compile == 1.3  # failed sample ignored
    assert not best_of([Outcome("t", 1, False), Outcome("t", 1, False)]).correct


def _kernelbench(root: Path) -> Path:
    for rel in ("level1/1_ReluBias.py", "level1/2_TanhBias.py", "level2/1_ReluBias2.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(TASK.replace("torch.relu", "torch.tanh") if "Tanh" in rel else TASK)
    return root


def test_solutions_are_matched_in_both_layouts_and_the_rest_is_unmatched(tmp_path):
    tasks = load_kernelbench(_kernelbench(tmp_path / "kb"))
    sols = tmp_path / "sols"
    (sols / "level1").mkdir(parents=True)
    (sols / "level1" / "1_ReluBias.py").write_text(RIGHT)  # ours, by task id
    (sols / "1_ReluBias2" / "kernels").mkdir(parents=True)  # ours, a workspace named after the task
    (sols / "1_ReluBias2" / "model_new.py").write_text(RIGHT)
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text(RIGHT)  # KernelBench's, takes sample 0
    (sols / "level_1_problem_2_sample_4_kernel.py").write_text(RIGHT)
    (sols / "level_3_problem_9_sample_0_kernel.py").write_text(RIGHT)  # no such task
    (sols / "notes.py").write_text("")
    found = find_solutions(sols, tasks)
    got = {(s.task.id, s.sample): s.path.relative_to(sols).as_posix() for s in found.solutions}
    assert got == {("level1/1_ReluBias", 0): "level_1_problem_1_sample_0_kernel.py",
                   ("level1/1_ReluBias", 1): "level1/1_ReluBias.py",
                   ("level1/2_TanhBias", 4): "level_1_problem_2_sample_4_kernel.py",
                   ("level2/1_ReluBias2", 0): "1_ReluBias2"}
    assert sorted(p.name for p in found.unmatched) == ["level_3_problem_9_sample_0_kernel.py", "notes.py"]
    with pytest.raises(UsageError, match="does not exist"):
        find_solutions(tmp_path / "nowhere", tasks)


def test_store_refuses_a_resume_with_other_arguments(tmp_path):
    with Store(tmp_path / "b.sqlite") as store:
        params = {"taskset": "kb", "solutions": "s", "device": "cpu", "policy": "strict", "tasks": [["a", 1]]}
        assert store.open_run("r", params) is False
        assert store.open_run("r", params) is True  # the same arguments: a resume
        with pytest.raises(UsageError, match="another device"):
            store.open_run("r", {**params, "device": "cuda"})
        with pytest.raises(UsageError, match="no run named 'x'"):
            store.require_run("x")
    (tmp_path / "junk.sqlite").write_text("not a database " * 100)
    with pytest.raises(UsageError, match="not a cuda-agent run store"):
        Store(tmp_path / "junk.sqlite")


def test_a_dumps_entries_not_yet_judged_are_not_evaluated_not_without_a_solution(tmp_path):
    """A dump's claims are stored before its kernels are judged: a task of a cut run that has them
    is `not_evaluated` (the same command resumes it), one that has none is `no_solution`."""
    from cuda_agent.bench.report import write_report
    from cuda_agent.bench.runner import summarize_run

    with Store(tmp_path / "b.sqlite") as store:
        store.open_run("r", {"taskset": "kb", "solutions": "d.json", "device": "cpu", "policy": "kernelbench",
                             "tasks": [["level1/19_ReLU", 1], ["level1/20_LeakyReLU", 1]]})
        store.put_claimed("r", [("level1/19_ReLU", 0, "d.json#0", {"correct": True, "speedup": 2.0})])
        summary = summarize_run(store, "r")
        assert summary.reasons == {"not_evaluated": 1, "no_solution": 1}
        assert [t["reasons"] for t in summary.per_task] == [["not_evaluated"], ["no_solution"]]
        text = write_report(store, "r", tmp_path / "out").read_text()
    assert "1 task(s) of the dump not evaluated yet (the run was cut: the same command resumes it)" in text


def _bench(tmp_path: Path, sols: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "cuda_agent", "bench", str(tmp_path / "kb"), "--solutions", str(sols),
            "--device", "cpu", "--policy", "kernelbench", "--no-compile-baseline", "--trials", "2",
            "--stress-trials", "0", "--jobs", "1", "--out", str(tmp_path / "runs"),
            "--cache-dir", str(tmp_path / "cache"), *extra]


def test_bench_resumes_after_a_kill_and_reports(tmp_path):
    _kernelbench(tmp_path / "kb")
    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text(RIGHT)
    (sols / "level_1_problem_1_sample_1_kernel.py").write_text(RIGHT.replace("x + self.bias", "x - self.bias"))
    (sols / "level_1_problem_2_sample_0_kernel.py").write_text(RIGHT.replace("torch.relu", "torch.tanh"))
    (sols / "level_2_problem_1_sample_0_kernel.py").write_text("this is not python (")
    db = tmp_path / "runs" / "bench.sqlite"

    # killed once the first verdict is stored
    p = subprocess.Popen(_bench(tmp_path, sols, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    stored, end = 0, time.monotonic() + 300
    while time.monotonic() < end and p.poll() is None:
        if db.exists():
            with sqlite3.connect(db) as con:
                try:
                    stored = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
                except sqlite3.OperationalError:  # the file is there, its schema not yet
                    stored = 0
            if stored:
                break
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert 1 <= stored < 4, "the run should have been killed half-way"

    done = subprocess.run(_bench(tmp_path, sols, "--json"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    obj = json.loads(done.stdout)
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
    assert obj["evaluated"] == 4 - stored  # only what the killed run had not stored
    assert obj["run"] == "sols-cpu"
    lv1, lv2, al = obj["levels"]["1"], obj["levels"]["2"], obj["overall"]
    assert (lv1["tasks"], lv1["correct"], lv1["pass_rate"]) == (2, 2, 1.0)  # task 1 by its right sample
    assert (lv2["tasks"], lv2["correct"]) == (1, 0)
    assert al["tasks"] == 3 and al["pass_rate"] == pytest.approx(2 / 3)
    for key in ("faster_eager_rate", "faster_compile_rate", "geomean_eager", "geomean_compile",
                "geomean_eager_all", "geomean_compile_all"):
        assert key in al
    assert al["faster_compile_rate"] == 0 and al["geomean_compile"] is None  # no compile baseline
    assert al["geomean_eager"] > 0
    assert obj["samples"]["1"]["overall"]["correct"] == 0  # the wrong sample, on its own
    assert obj["reasons"] == {"output_mismatch": 1, "load_error": 1}  # the wrong sample, the syntax error

    report = Path(obj["report"])
    text = report.read_text()
    assert "| overall | 3 | 66.7% |" in text and "level2/1_ReluBias2" in text
    for png in ("speedups.png", "fast_p.png", "failures.png"):
        assert (report.parent / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the same arguments again: nothing left to do; other arguments under the same name: refused
    again = json.loads(subprocess.run(_bench(tmp_path, sols, "--json"), capture_output=True, text=True,
                                      timeout=300).stdout)
    assert again["evaluated"] == 0 and again["overall"] == obj["overall"]
    other = subprocess.run(_bench(tmp_path, sols, "--policy", "strict"), capture_output=True, text=True)
    assert other.returncode == 2 and "--run NEW_NAME" in other.stderr

    # a second run with task 2 broken, compared side by side
    sols2 = tmp_path / "sols2"
    sols2.mkdir()
    (sols2 / "level_1_problem_1_sample_0_kernel.py").write_text(RIGHT)
    (sols2 / "level_1_problem_2_sample_0_kernel.py").write_text(RIGHT)  # relu for a tanh task: wrong
    second = subprocess.run(_bench(tmp_path, sols2, "--run", "second", "--no-report"), capture_output=True,
                            text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "overall" in second.stdout and "failures: " in second.stdout
    cmp = subprocess.run([sys.executable, "-m", "cuda_agent", "report", "sols-cpu", "--compare", "second",
                          "--out", str(tmp_path / "runs")], capture_output=True, text=True)
    assert cmp.returncode == 0, cmp.stderr
    text = Path(cmp.stdout.strip()).read_text()
    assert "| overall: sols-cpu | 3 |" in text and "| overall: second | 3 |" in text
    assert "| level1/2_TanhBias | correct," in text and "output_mismatch" in text
    missing = subprocess.run([sys.executable, "-m", "cuda_agent", "report", "nope", "--out", str(tmp_path / "runs")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "no run named 'nope'" in missing.stderr


def test_bench_with_the_agent_takes_each_episodes_final_verdict(tmp_path, cache_dir):
    """`bench --agent`: one episode per task, two at a time, against a scripted OpenAI-compatible
    server; each episode's final evaluation is the task's verdict; a second run has nothing to do."""
    from conftest import sandbox_unavailable
    from cuda_agent.agent.scripted import ScriptedServer, ScriptStep

    if sandbox_unavailable() is not None:
        pytest.skip("no user namespaces for the agent's sandbox here")
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_ReluBias.py").write_text(TASK)
    (tmp_path / "kb" / "level1" / "2_TanhBias.py").write_text(TASK.replace("torch.relu", "torch.tanh"))

    def respond(messages):  # by the state of each conversation: episodes run side by side
        tools = [m for m in messages if m["role"] == "tool"]
        if not tools:
            op = "torch.tanh" if "torch.tanh" in messages[1]["content"] else "torch.relu"
            return ScriptStep(tool_calls=[("Write", {"file_path": "model_new.py",
                                                     "content": RIGHT.replace("torch.relu", op)})])
        if len(tools) == 1:
            return ScriptStep(tool_calls=[("Bash", {"command": "python3 -m utils.verification --device cpu "
                                                               "--trials 1"})])
        return ScriptStep(content="done")

    with ScriptedServer([respond] * 12) as server:
        args = [sys.executable, "-m", "cuda_agent", "bench", str(tmp_path / "kb"), "--agent", "--base-url",
                server.base_url, "--model", "scripted/m1", "--api-key-env", "", "--episodes", "2",
                "--device", "cpu", "--policy", "kernelbench", "--no-compile-baseline", "--trials", "2",
                "--stress-trials", "0", "--out", str(tmp_path / "runs"), "--cache-dir", str(cache_dir),
                "--json"]
        env = {**os.environ, "CUDA_AGENT_CACHE": str(cache_dir)}
        first = subprocess.run(args, capture_output=True, text=True, timeout=900, env=env)
        assert first.returncode == 0, first.stderr
        obj = json.loads(first.stdout)
        again = json.loads(subprocess.run(args, capture_output=True, text=True, timeout=300, env=env).stdout)
    assert obj["run"] == "scripted_m1-cpu" and obj["evaluated"] == 2
    assert obj["overall"]["tasks"] == 2 and obj["overall"]["pass_rate"] == 1.0
    episodes = tmp_path / "runs" / "scripted_m1-cpu" / "episodes" / "level1"
    for task in ("1_ReluBias", "2_TanhBias"):
        traj = (episodes / task / "trajectory.jsonl").read_text().splitlines()
        assert json.loads(traj[-1])["type"] == "final" and json.loads(traj[-1])["result"]["correct"]
    assert again["evaluated"] == 0 and again["overall"] == obj["overall"]


def test_bench_reads_a_leaderboard_dump_split_by_model_and_stores_what_it_claims(tmp_path):
    """`bench --solutions raw_data.json --split-by model`: the leaderboard's rows (problem ids from 0)
    become one run per model, each judged, and each verdict has the dump's claims beside it."""
    _kernelbench(tmp_path / "kb")
    rows = [{"level": 1, "problem_id": 0, "model": "model-a", "code": RIGHT, "correct": True},  # (CPU timing: no claim)
            {"level": 1, "problem_id": 1, "model": "model-a", "code": RIGHT, "speedup": 1.2, "correct": True},
            {"level": 1, "problem_id": 0, "model": "model/b", "code": RIGHT.replace("x + self.bias", "x - self.bias"),
             "speedup": 3.0, "correct": True}]
    dump = tmp_path / "raw_data.json"
    dump.write_text(json.dumps(rows))
    done = subprocess.run(_bench(tmp_path, dump, "--split-by", "model", "--json"),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "read as KernelBench leaderboard" in done.stderr
    runs = {r["run"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(runs) == ["raw_data-cpu-model-a", "raw_data-cpu-model_b"]
    with Store(tmp_path / "runs" / "bench.sqlite") as store:
        a = {(r.task, r.sample): r.result for r in store.records("raw_data-cpu-model-a")}
        assert a[("level1/1_ReluBias", 0)].correct  # problem_id 0 is problem 1
        assert not a[("level1/2_TanhBias", 0)].correct  # a relu kernel for the tanh task
        b = {(r.task, r.sample): r.result for r in store.records("raw_data-cpu-model_b")}
        assert not b[("level1/1_ReluBias", 0)].correct
        claimed = store.claimed("raw_data-cpu-model_b")[("level1/1_ReluBias", 0)]
        assert claimed["correct"] is True and claimed["speedup"] == 3.0 and claimed["model"] == "model/b"
        assert claimed["origin"].endswith("raw_data.json#2")
    # the reports put the claims beside the verdicts: disagreements first, every sample's code in the page
    md = (tmp_path / "runs" / "raw_data-cpu-model_b" / "report.md").read_text()
    assert "## Claimed against measured" in md and "claimed correct, judged not" in md
    assert "0 judged correct here (0 agree on correctness)" in md and "no speedup to set against" in md
    assert "](claims.png)" in md and (tmp_path / "runs" / "raw_data-cpu-model_b" / "claims.png").stat().st_size > 5000
    page = (tmp_path / "runs" / "raw_data-cpu-model-a" / "report.html").read_text()
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    assert [(r["task"], r["correct"], r["claimed_speedup"]) for r in data] == [
        ("level1/2_TanhBias", False, 1.2), ("level1/1_ReluBias", True, None)]  # the disagreement first
    assert data[0]["disagreement"] == "claimed correct, judged not" and "torch.relu" in data[0]["code"]
    assert "data:image/png;base64," in page and "https://" not in page and "http://" not in page
    bad = subprocess.run(_bench(tmp_path, tmp_path / "kb", "--columns", "level=a,problem=b,code=c"),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "read a dump: pass it as --solutions" in bad.stderr


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no Chromium here (Debian's `chromium` package)")
def test_the_html_report_opens_in_chromium_with_every_samples_code_reachable(tmp_path):
    """report.html in a real browser: the script renders every sample's row, and a sample opened
    from the address (`#s=N`, what a click does) shows its code and its reasons."""
    _kernelbench(tmp_path / "kb")
    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text(RIGHT)
    (sols / "level_1_problem_2_sample_0_kernel.py").write_text(RIGHT)
    done = subprocess.run(_bench(tmp_path, sols, "--json"), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    page = tmp_path / "runs" / "sols-cpu" / "report.html"
    assert not (page.parent / "claims.png").exists()  # a folder of kernels claims nothing
    for i in (0, 1):
        dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                              f"{page.as_uri()}#s={i}"], capture_output=True, text=True, timeout=120).stdout
        assert len(re.findall(r'<tr class="row [^"]*" data-id="\d+"', dom)) == 2 and "2 of 2 samples" in dom
        detail = dom.split(f'<tr class="detail" id="detail-{i}">')[1].split("</tr>")[0]
        assert 'class="code"' in detail and "class ModelNew" in detail and "torch.relu" in detail


def test_a_cuda_l1_dump_is_judged_against_its_own_reference_with_tasks_from_dump(tmp_path):
    """CUDA-L1's file as published (one JSON row per line, `ref_code` beside `custom_code`): a
    reference that is not the task set's task is reported and left unjudged; --tasks-from-dump
    judges the kernel against the dump's own reference, under the task set's name."""
    _kernelbench(tmp_path / "kb")
    rows = [{"level_id": 1, "task_id": 1, "ref_code": TASK, "custom_code": RIGHT, "score_default": 1.1},
            {"level_id": 1, "task_id": 2, "ref_code": TASK, "custom_code": RIGHT, "score_default": 2.0},
            {"level_id": 1, "task_id": 3, "ref_code": TASK, "custom_code": "None", "score_default": 7.2},  # no kernel
            {"level_id": 2, "task_id": 1, "ref_code": TASK, "custom_code": RIGHT, "score_default": 1.0}]
    dump = tmp_path / "h100.json"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain = subprocess.run(_bench(tmp_path, dump, "--json", "--no-report"), capture_output=True, text=True, timeout=900)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "read as CUDA-L1" in plain.stderr
    assert "1 solution(s) judged, though the dump's reference differs a little" in plain.stderr
    assert "level1/2_TanhBias: its reference differs a little" in plain.stderr
    own = subprocess.run(_bench(tmp_path, dump, "--tasks-from-dump", "--level", "1", "--run", "own", "--json",
                                "--no-report"),
                         capture_output=True, text=True, timeout=900)
    assert own.returncode == 0, own.stderr[-3000:]
    assert "2 task(s) from the dump's own reference code" in own.stderr  # (not level 2's, nor the row without one)
    with Store(tmp_path / "runs" / "bench.sqlite") as store:
        judged = {r.task: r.result.correct for r in store.records("h100-cpu")}
        assert judged == {"level1/1_ReluBias": True, "level1/2_TanhBias": False,  # a relu kernel, a tanh task
                          "level2/1_ReluBias2": True}
        assert {r.task: r.result.correct for r in store.records("own")} == {
            "level1/1_ReluBias": True, "level1/2_TanhBias": True}  # the dump's relu reference, the set's name


def test_bench_with_shapes_reports_which_kernels_hold_at_other_sizes(tmp_path):
    """`bench --shapes 1`: a task whose batch size is a module constant; a kernel that reshapes to
    the task's batch fails at another, its honest twin passes; the reports say so per task and per
    sample, and the verdicts stay correct (no --require-generalization)."""
    task = TASK.replace("return [torch.randn(64, 256)]", "return [torch.randn(batch_size, 256)]") + "\nbatch_size = 64\n"
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_ReluBias.py").write_text(task)
    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / "level_1_problem_1_sample_0_kernel.py").write_text(RIGHT)
    fixed = RIGHT.replace("torch.relu(x + self.bias)", "torch.relu(x.reshape(64, 256) + self.bias)")
    assert fixed != RIGHT
    (sols / "level_1_problem_1_sample_1_kernel.py").write_text(fixed)
    done = subprocess.run(_bench(tmp_path, sols, "--shapes", "1", "--json"), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    with Store(tmp_path / "runs" / "bench.sqlite") as store:
        got = {r.sample: r.result for r in store.records("sols-cpu")}
    assert got[0].correct and got[1].correct  # KernelBench's contract fixes the shapes
    assert got[0].generalization["generalizes"] is True and got[1].generalization["generalizes"] is False
    md = (tmp_path / "runs" / "sols-cpu" / "report.md").read_text()
    assert "| other sizes |" in md and "| level1/1_ReluBias | 2 | yes |" in md and "| fails |" in md
    page = (tmp_path / "runs" / "sols-cpu" / "report.html").read_text()
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    assert sorted((r["sample"], r["generalizes"]) for r in data) == [(0, True), (1, False)]
