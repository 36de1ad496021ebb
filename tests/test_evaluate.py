"""End-to-end tests of the evaluator on the CPU backend: real worker processes, real verdicts.

Candidates here are small Python ModelNew classes (no compilation), so these tests are about the
pipeline: the result contract, seeds, batching, the comparison's units, files and processes left
behind, the command line. Cheating and faulty candidates (wrong answers, exceptions, crashes, hangs,
floods) are cases of the adversarial suite (test_adversarial.py), one file each with its expected
verdict. Compiled candidates are covered by test_examples.py and test_workspace.py.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from conftest import share_session_builds

from cuda_agent import sandbox
from cuda_agent.evaluate import Code, EvalConfig, EvalResult, evaluate, load_candidate, milestone_reward
from cuda_agent.evaluate.result import TimeStats
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
TASK = DATA / "relu_bias_task.py"

HEADER = "import torch\nimport torch.nn as nn\n"
CORRECT = HEADER + textwrap.dedent("""
    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(features))

        def forward(self, x):
            return (x + self.bias).clamp_min(0)
    """)


def candidate(tmp_path: Path, body: str, name: str = "cand.py") -> Path:
    p = tmp_path / name
    p.write_text(HEADER + textwrap.dedent(body))
    return p


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def run(tmp_path, cand: Path, cache_dir, device="cpu", warm=None, **kw) -> EvalResult:
    """The one-shot `evaluate`, or `warm` (the warm_evaluate fixture) for tests whose subject is not
    the one-shot form's own processes."""
    # These candidates are PyTorch code (no compilation): KernelBench's rules. The strict policy and
    # every cheating category are covered by test_policy.py and test_adversarial.py.
    kw.setdefault("policy", "kernelbench")
    kw.setdefault("compile_baseline", False)
    kw.setdefault("timing_budget_s", 0.1)
    kw.setdefault("timeout_s", 60)
    cfg = EvalConfig(device=device, cache_dir=cache_dir, **kw)
    return (warm or evaluate)(load_task(TASK), load_candidate(cand), cfg)


def codes(res: EvalResult) -> list[str]:
    return [r.code.value for r in res.failures]


# --- pure units ------------------------------------------------------------------------------------

@pytest.mark.parametrize("correct,se,sc,want", [
    (False, 10.0, 10.0, -1),
    (True, None, None, 1),
    (True, 1.05, 2.0, 1),      # exactly 5% faster is not "more than 5%"
    (True, 1.051, 1.0, 2),
    (True, 1.2, None, 2),      # no compile baseline: capped at 2
    (True, 1.2, 1.06, 3),
    (True, 0.9, 1.5, 1),       # beating compile alone earns nothing extra
])
def test_the_reward_is_a_milestone_of_correctness_and_speedups(correct, se, sc, want):
    assert milestone_reward(correct, se, sc) == want


def test_time_stats_give_the_median_range_count_and_interquartile_range():
    st = TimeStats.of([4.0, 1.0, 3.0, 2.0, 100.0])
    assert st.median == 3.0 and st.min == 1.0 and st.max == 100.0 and st.n == 5
    assert st.iqr == pytest.approx(2.0)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="trials"):
        EvalConfig(trials=0)
    with pytest.raises(ValueError, match="seeds: got 2, need 9"):
        EvalConfig(seeds=[1, 2])
    assert EvalConfig(atol=1e-3, rtol=1e-2).norm_tol == pytest.approx(5e-2)
    with pytest.raises(ValueError, match="batch_calls"):
        EvalConfig(batch_calls=0)
    with pytest.raises(ValueError, match="touch='fp8': use one of bf16, tf32"):
        EvalConfig(touch="fp8")


def test_batch_size_fits_the_memory_budget():
    from cuda_agent.evaluate.protocol import batch_size

    assert batch_size(64 * 256 * 4, 64 * 256 * 4, 0.05, 8, 1 << 30) == 8  # small task: the most calls
    assert batch_size(100 << 20, 100 << 20, 0.05, 8, 1 << 30) == 5  # five pairs of 200 MiB fit in 1 GiB
    assert batch_size(4 << 30, 4 << 30, 0.05, 8, 1 << 30) == 1  # huge task: one call per command
    assert batch_size(0, 0, None, 8, 1 << 30) == 8  # scalar-only inputs and outputs, time unknown
    assert batch_size(1024, 1024, 2.0, 8, 1 << 30) == 2  # 2 ms calls: about 5 ms per batch
    assert batch_size(1024, 1024, 40.0, 8, 1 << 30) == 1  # long calls: one per command


def test_the_comparison_rejects_each_kind_of_wrong_output_with_its_code():
    import torch

    from cuda_agent.evaluate.compare import compare

    kw = dict(atol=1e-2, rtol=1e-2, norm_tol=1e-2)
    ref = torch.softmax(torch.rand(8, 4096, generator=torch.Generator().manual_seed(0)), dim=1)
    assert compare(ref, ref * (1 + 1e-3), **kw) is None  # e.g. fp16 internal math
    assert compare(ref, ref + 1e-4, **kw).code is Code.OUTPUT_MISMATCH  # +40% on every element
    # all zeros are element-wise within atol of a softmax over many columns, but wrong overall
    assert compare(ref, torch.zeros_like(ref), **kw).code is Code.OUTPUT_MISMATCH
    assert "relative error norm" in compare(ref, torch.zeros_like(ref), **kw).message
    assert compare(ref, ref.double(), **kw).code is Code.DTYPE_MISMATCH
    assert compare(ref, ref.t(), **kw).code is Code.SHAPE_MISMATCH
    assert compare(ref, ref.to("meta"), **kw).code is Code.DEVICE_MISMATCH
    bad = ref.clone()
    bad[3, 7] = float("nan")
    assert compare(ref, bad, **kw).code is Code.NON_FINITE
    assert compare((ref, ref), [ref, ref], **kw).code is Code.STRUCTURE_MISMATCH
    assert compare((ref, ref), (ref,), **kw).code is Code.STRUCTURE_MISMATCH
    ints = torch.arange(10)
    assert compare(ints, ints + (ints == 3), **kw).code is Code.OUTPUT_MISMATCH


def test_a_comparison_in_chunks_finds_the_one_bad_element_and_leaves_the_reference_alone(monkeypatch):
    import torch

    from cuda_agent.evaluate import compare as cmp

    monkeypatch.setattr(cmp, "CHUNK", 1000)
    kw = dict(atol=1e-2, rtol=1e-2, norm_tol=5e-2)
    ref = torch.rand(50, 70, generator=torch.Generator().manual_seed(1))
    ref[0, 3] = float("inf")
    keep = ref.clone()
    out = ref.clone()
    out[40, 2] += 0.5  # in the third chunk
    m = cmp.compare(ref, out, **kw)
    assert m.code is Code.OUTPUT_MISMATCH and "1 of 3500" in m.message and "(40, 2)" in m.message
    stats = {}
    assert cmp.compare(ref, ref * (1 + 1e-4), stats=stats, **kw) is None
    assert 0 < stats["rel_norm"] < 2e-4 and 0 < stats["max_abs"] < 2e-4
    assert torch.equal(ref, keep)  # the reference is never modified by a comparison


# --- end to end ------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_a_correct_candidate_passes_with_a_reward_of_at_least_1(tmp_path, cache_dir, device, warm_evaluate):
    # baselines measured by this evaluation, not read from the session's cache (whose entries fix
    # the batch size: test_cached_baselines_set_the_candidates_batch_size)
    res = run(tmp_path, candidate(tmp_path, CORRECT[len(HEADER):]), cache_dir, device, baseline_cache=False, warm=warm_evaluate)
    assert res.device["type"] == device
    assert res.compiled and res.correct, res.reasons
    assert res.reward >= 1
    assert res.failures == []
    assert len(res.seeds["trials"]) == 5 and len(res.seeds["stress"]) == 2
    assert len(set(res.seeds["all"])) == len(res.seeds["all"])
    assert all(t["passed"] for t in res.trials) and len(res.trials) == 7
    assert res.times_ms["eager"].n >= 5 and res.times_ms["candidate"].n >= 5
    # 64x256 float32 in and out, a reference call far under BATCH_MS on the CPU: every command is a
    # batch of the most calls (8). On a GPU the first call of the reference, which sizes the batch,
    # may be slow (a batch of 5 seen on an H200): at most 8 there.
    assert res.timing_check["baselines"]["source"] == "measured"
    batch = res.timing_check["calls_per_batch"]
    assert batch == 8 if device == "cpu" else 1 <= batch <= 8
    assert 0 < res.timing_check["timed_calls_checked"] < batch * (res.times_ms["candidate"].n + 1)
    assert res.speedup_eager == pytest.approx(res.times_ms["eager"].median / res.times_ms["candidate"].median,
                                              rel=1e-3)
    assert res.speedup_compile is None  # compile baseline off
    assert {"workers", "reference_setup", "load", "weights", "correctness", "timing", "teardown",
            "total"} <= set(res.phases_s)
    if device == "cuda":
        assert res.device["name"] and res.device["capability"] and res.device["cuda"]
    # the JSON form round-trips
    again = EvalResult.from_json(json.loads(json.dumps(res.to_json())))
    assert again.to_json() == res.to_json()


def test_seeds_replay_the_same_trials(tmp_path, cache_dir, warm_evaluate):
    cand = candidate(tmp_path, CORRECT[len(HEADER):])
    seeds = list(range(101, 110))
    res = run(tmp_path, cand, cache_dir, seeds=seeds, timing=False, warm=warm_evaluate)
    assert res.seeds["all"] == seeds
    assert [t["seed"] for t in res.trials] == seeds[:7]
    assert res.correct and res.reward == 1


def test_with_one_call_per_command_every_timed_call_is_checked(tmp_path, cache_dir, warm_evaluate):
    """batch_calls=1: every trial and every timed call is its own command (the protocol of tasks
    too large for batches); every timed call checked."""
    cand = candidate(tmp_path, CORRECT[len(HEADER):])
    res = run(tmp_path, cand, cache_dir, batch_calls=1, timed_check_fraction=1.0, warm=warm_evaluate)
    assert res.correct and res.reward >= 1, res.reasons
    assert res.timing_check["calls_per_batch"] == 1
    assert res.timing_check["timed_calls_checked"] == res.times_ms["candidate"].n + 1  # + the warm-up


def test_a_correct_candidate_too_slow_to_time_is_correct_untimed_not_timed_out(tmp_path, cache_dir, warm_evaluate):
    # each call takes 1.5 s: the 3 trials fit in timeout_s, the least timing (a warm-up batch and 6 of
    # samples) does not. Timing it would end in a timeout (reward -1) for a correct candidate.
    body = """
    import time
    class ModelNew(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(f))
        def forward(self, x):
            time.sleep(1.5)
            return (x + self.bias).clamp_min(0)
    """
    res = run(tmp_path, candidate(tmp_path, body), cache_dir, timeout_s=12, trials=3, stress_trials=0,
              policy="none", warm=warm_evaluate)
    assert res.correct and res.reward == 1 and not res.failures
    skipped = [r for r in res.reasons if r.code is Code.TIMING_SKIPPED]
    # (1.5 s of sleep, and the harness's time around the call: more on a loaded machine)
    assert len(skipped) == 1 and re.search(r"candidate took 1\.[5-9]\d* s in the correctness", skipped[0].message)
    assert res.speedup_eager is None and res.times_ms.get("candidate") is None


def test_workers_end_when_their_harness_is_killed(tmp_path, cache_dir):
    """A worker busy in a command (here a candidate spinning in __init__) does not read its channel;
    when the harness is killed outright it must still go, with what it started, instead of holding
    a core (or a GPU) for good."""
    tag = f"cuda-agent-orphan-{uuid.uuid4().hex}"  # (a sandboxed candidate writes no file outside its folder)
    body = f"""
    import os, subprocess, sys
    class ModelNew(nn.Module):
        def __init__(self, f):
            super().__init__()
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {tag!r}])
            while True:
                pass
    """
    cand = candidate(tmp_path, body, "spin.py")
    harness = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from cuda_agent.evaluate import EvalConfig, evaluate, load_candidate
        from cuda_agent.tasks import load_task
        cfg = EvalConfig(device="cpu", cache_dir={str(cache_dir)!r}, policy="none", timeout_s=600,
                         build_timeout_s=600, compile_baseline=False)
        evaluate(load_task({str(TASK)!r}), load_candidate({str(cand)!r}), cfg)
        """)])
    try:
        deadline = time.monotonic() + 120
        while not (found := subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()):
            assert time.monotonic() < deadline and harness.poll() is None, "the candidate never started"
            time.sleep(0.2)
        child = int(found[0])
        with open(f"/proc/{child}/stat") as f:
            pids = [child, int(f.read().rsplit(")", 1)[1].split()[1])]  # and its parent, the candidate
    finally:
        harness.kill()
        harness.wait()
    deadline = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if _running(p)]
    for p in alive:
        os.kill(p, 9)
    assert not alive, f"processes {alive} outlived their harness"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


STALE_LOCK_NAME = "cuda_agent_test_stale_build_lock"
# (-O2: the adversarial suite's flags, so the session's precompiled header serves the build)
INLINE_CPU = f"""
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="{STALE_LOCK_NAME}", functions=["relu_bias"], extra_cflags=["-O2"], cpp_sources='''
#include <torch/extension.h>
torch::Tensor relu_bias(torch::Tensor x, torch::Tensor b) {{ return (x + b).clamp_min(0); }}
''')

class ModelNew(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(f))
    def forward(self, x):
        return ext.relu_bias(x, self.bias)
"""


def test_a_build_lock_left_by_a_killed_build_does_not_hang_the_next_evaluation(tmp_path, monkeypatch, cache_dir):
    """torch's load_inline waits without end for a lock file that only its builder removes; a worker
    killed mid-build leaves it in the extension's build folder, which the next evaluation reuses.
    The cache is named relative to the caller's folder (`--cache-dir .cache`): the runner works in
    a folder of its own, and the build must still land, and be found again, in the caller's."""
    monkeypatch.chdir(tmp_path)
    share_session_builds(tmp_path / "rel-cache", cache_dir)
    path = candidate(tmp_path, INLINE_CPU, "inline.py")
    # unsandboxed, the candidate builds in a folder of the cache that later evaluations share
    first = run(tmp_path, path, Path("rel-cache"), build_timeout_s=600, isolation="off")
    assert first.correct, first.reasons
    [build] = (tmp_path / "rel-cache" / "torch_extensions" / "by_source").glob(f"{STALE_LOCK_NAME}-*")
    (build / "lock").write_text("")  # as a build killed before it finished leaves it
    res = run(tmp_path, path, Path("rel-cache"), build_timeout_s=90, isolation="off")
    assert res.correct, res.reasons
    assert not (build / "lock").exists()
    # sandboxed, the harness builds (evaluate/isolate.py) in the caller's cache too, and finds it again
    if sandbox.support().ok:
        for _ in range(2):
            res = run(tmp_path, path, Path("rel-cache"), build_timeout_s=600)
            assert res.correct and res.isolation["level"] == "sandbox", res.reasons
        assert len(list((tmp_path / "rel-cache" / "builds" / "inline").iterdir())) == 1


def test_a_live_evaluations_build_lock_is_left_alone(tmp_path, monkeypatch):
    import fcntl

    from cuda_agent.evaluate.worker.runner import claim_extension_dir
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "lock").write_text("")
    with open(tmp_path / ".users.lock", "a") as other:  # another evaluation of the candidate, alive
        fcntl.flock(other, fcntl.LOCK_SH)
        mine = claim_extension_dir()
        assert (tmp_path / "ext" / "lock").exists()
    mine.close()
    again = claim_extension_dir()  # nobody else alive now: the lock is stale
    assert not (tmp_path / "ext" / "lock").exists()
    again.close()


def test_an_evaluation_leaves_no_files_behind_even_after_a_crash(tmp_path, cache_dir):
    work = tmp_path / "work"
    work.mkdir()
    # a verdict, and a candidate process that dies while it loads
    for body, failures in ((CORRECT[len(HEADER):], []), ("import os\nos._exit(3)\n", ["crash"])):
        res = run(tmp_path, candidate(tmp_path, body), cache_dir, work_dir=work, policy="none")
        assert codes(res) == failures, res.reasons
        assert list(work.iterdir()) == []


def test_stale_directories_of_killed_evaluations_are_swept(tmp_path, cache_dir):
    work = tmp_path / "work"
    work.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a harness pid that no longer exists
    stale = [work / f"cuda-agent-eval-{gone.pid}-abc", work / f"cuda-agent-shm-{gone.pid}-def"]
    live = work / f"cuda-agent-eval-{os.getpid()}-xyz"  # an evaluation still running: kept
    for d in (*stale, live):
        d.mkdir()
        (d / "buf").write_bytes(b"x" * 1000)
    run(tmp_path, candidate(tmp_path, "x = 1\n"), cache_dir, work_dir=work, timing=False)
    assert sorted(p.name for p in work.iterdir()) == [live.name]


def test_a_child_process_left_running_is_hidden_work_and_is_killed(tmp_path, cache_dir):
    import os

    seconds = f"1000.{uuid.uuid4().int % 10**12}"  # a command line to find it by, from outside its sandbox
    body = ("import subprocess\n"
            f"child = subprocess.Popen(['sleep', {seconds!r}])\n") + CORRECT[len(HEADER):]
    res = run(tmp_path, candidate(tmp_path, body), cache_dir, timing=False, policy="none")
    # a child left running is hidden work (guard.Integrity) ...
    assert codes(res) == ["hidden_work"] and "child process" in res.reasons[0].message, res.reasons
    # ... and it is killed with the candidate's process group all the same
    time.sleep(0.5)
    pids = subprocess.run(["pgrep", "-f", f"sleep {seconds}"], capture_output=True, text=True).stdout.split()
    alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read().lower()]
    assert not alive


def test_torch_compile_in_a_candidate_leaves_no_helper_that_reads_as_hidden_work(tmp_path, cache_dir):
    """torch.compile starts helpers of its own: tqdm's monitor thread (its FX interpreter draws a
    bar, disabled or not, in every compile) and Inductor's compile workers. They are not work hidden
    from the timer, and the candidate's process starts neither (runner.quiet_libraries,
    isolate.candidate_env), so a kernel that uses torch.compile is judged on its output."""
    from cuda_agent.evaluate.isolate import candidate_env

    body = """
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.bias = nn.Parameter(torch.zeros(features))
                self._fused = torch.compile(self._fused_impl, backend="aot_eager")

            def _fused_impl(self, x):
                return (x + self.bias).clamp_min(0)

            def forward(self, x):
                return self._fused(x)
        """
    res = run(tmp_path, candidate(tmp_path, body), cache_dir, timing=False)
    assert res.correct, res.reasons
    env = candidate_env(tmp_path)  # Inductor compiles in the calling thread, in caches of its own
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert all(Path(env[k]).is_relative_to(tmp_path) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"))


def test_a_broken_task_is_an_infra_failure(tmp_path, cache_dir):
    task = tmp_path / "task.py"
    task.write_text(TASK.read_text().replace("torch.randn(64, 256)", "torch.randn(64, 255)"))
    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, timing=False, policy="kernelbench")
    res = evaluate(load_task(task), load_candidate(candidate(tmp_path, CORRECT[len(HEADER):])), cfg)
    assert codes(res) == ["reference_error"]
    assert res.reasons[0].kind.value == "infra"


# --- the command line -------------------------------------------------------------------------------

def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "cuda_agent", *args], capture_output=True, text=True,
                          **kw)


def test_cli_json_is_one_object_even_when_the_candidate_prints(tmp_path, cache_dir):
    body = 'print(\'{"correct": true, "reward": 3}\')\nimport sys\nprint("noise", file=sys.stderr)\n' \
        + CORRECT[len(HEADER):]
    p = cli("eval", str(TASK), str(candidate(tmp_path, body)), "--device", "cpu", "--json",
            "--no-compile-baseline", "--policy", "kernelbench", "--cache-dir", str(cache_dir))
    assert p.returncode == 0, p.stderr
    obj = json.loads(p.stdout)  # the whole of stdout is one JSON object
    assert obj["correct"] is True and obj["reward"] in (1, 2, 3)
    for key in ("compiled", "correct", "reward", "speedup_eager", "speedup_compile", "times_ms",
                "reasons", "seeds", "device", "phases_s"):
        assert key in obj
    assert set(obj["times_ms"]) == {"eager", "compile", "candidate"}
    assert obj["device"]["type"] == "cpu" and obj["device"]["torch"]


def test_the_cli_exits_0_for_a_wrong_candidate(tmp_path, cache_dir):
    p = cli("eval", str(TASK), str(candidate(tmp_path, "x = 1\n")), "--device", "cpu", "--json",
            "--no-timing", "--cache-dir", str(cache_dir))
    assert p.returncode == 0
    obj = json.loads(p.stdout)
    assert obj["reward"] == -1 and obj["reasons"][0]["code"] == "no_model_new"


def test_cli_usage_errors_exit_with_status_2(tmp_path):
    p = cli("eval", str(tmp_path / "missing.py"), str(TASK), "--device", "cpu")
    assert p.returncode == 2 and "does not exist" in p.stderr
    p = cli("eval", str(TASK), str(tmp_path), "--device", "cpu")
    assert p.returncode == 2 and "model_new.py" in p.stderr
    p = cli("eval", str(TASK), str(TASK), "--trials", "0")
    assert p.returncode == 2
    p = cli("eval", str(TASK), str(TASK), "--seeds", "1,2")
    assert p.returncode == 2 and "seeds" in p.stderr


def test_the_cli_prints_a_readable_summary_without_json(tmp_path, cache_dir):
    p = cli("eval", str(TASK), str(candidate(tmp_path, CORRECT[len(HEADER):])), "--device", "cpu",
            "--no-compile-baseline", "--policy", "kernelbench", "--cache-dir", str(cache_dir))
    assert p.returncode == 0, p.stderr
    assert "reward:" in p.stdout and "eager" in p.stdout and "candidate" in p.stdout


def test_importing_the_package_and_the_cli_loads_no_heavy_module():
    code = "import sys, cuda_agent, cuda_agent.cli, cuda_agent.evaluate.evaluation; " \
           "print(sorted(m for m in ('torch','numpy','openai','rich') if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


# --- the harness's clock against the candidate's claims --------------------------------------------

def test_timing_check_flags_under_reporting_only():
    from cuda_agent.evaluate.protocol import timing_check

    trusted = TimeStats.of([0.10] * 40)  # the protocol costs the baselines' commands 0.1 ms
    honest = {"claimed": [0.5] * 40, "walls": [0.5 + 0.15] * 40}  # a little more overhead: tolerated
    liar = {"claimed": [0.05] * 40, "walls": [0.5 + 0.12] * 40}  # claims a tenth of its real time
    for cand, tampered in ((honest, False), (liar, True)):
        check = timing_check(cand["claimed"], cand["walls"], trusted, "cuda")
        assert check["tampered"] is tampered, check
        assert check["trusted_overhead_ms"] == pytest.approx(0.1)
    # the CPU backend's floor is looser (three processes share a few cores)
    check = timing_check([0.3] * 40, [0.8] * 40, trusted, "cpu")
    assert not check["tampered"]
    # and a long trusted overhead (the CPU backend's cache flushes) widens the tolerance with it
    slow = TimeStats.of([4.0] * 40)
    assert not timing_check([5.0] * 40, [5.0 + 4.9] * 40, slow, "cpu")["tampered"]
    assert timing_check([1.0] * 40, [5.0 + 4.9] * 40, slow, "cpu")["tampered"]


@pytest.mark.parametrize("flagged_looks", [1, 2])
def test_a_flagged_timing_check_takes_a_second_look(tmp_path, cache_dir, monkeypatch, flagged_looks):
    """A first look that the check flags (load beside the candidate: delays only add to the
    harness's clock) is followed by a second; only a candidate flagged in both is convicted."""
    from cuda_agent.evaluate import protocol

    looks = []

    def flagging(claimed, walls, trusted, device):
        check = real(claimed, walls, trusted, device)
        looks.append(len(walls))
        check["tampered"] = len(looks) <= flagged_looks
        return check

    real = protocol.timing_check
    monkeypatch.setattr(protocol, "timing_check", flagging)
    res = run(tmp_path, candidate(tmp_path, CORRECT), cache_dir)
    assert len(looks) == 2 and all(n >= 5 for n in looks), looks  # each look: min_iters batches at least
    assert set(res.timing_check["first_look"]) == {"trusted_overhead_ms", "candidate_overhead_ms", "tolerance_ms"}
    if flagged_looks == 1:
        assert res.correct and codes(res) == [] and res.speedup_eager is not None
    else:
        assert codes(res) == ["timing_tampered"] and res.reward == -1
        assert "in two looks" in res.failures[0].message


@pytest.mark.parametrize("device", DEVICES)
def test_the_tf32_touch_leaves_the_processes_precision_as_it_was(tmp_path, cache_dir, device):
    """EvalConfig.touch="tf32": every process that times runs TF32 products before each call. The
    candidate's precision switches, read after its timed calls, show nothing it did not set (a
    leak would be recorded as reduced_precision), and the baselines are keyed by the touch."""
    res = run(tmp_path, candidate(tmp_path, CORRECT[len(HEADER):]), cache_dir, device, touch="tf32")
    assert res.correct, res.reasons
    assert Code.REDUCED_PRECISION not in [r.code for r in res.reasons]
    assert res.device["candidate_precision"]["matmul_allow_tf32"] is False
    plain = run(tmp_path, candidate(tmp_path, CORRECT[len(HEADER):]), cache_dir, device)
    assert plain.timing_check["baselines"]["key"] != res.timing_check["baselines"]["key"]


TF32_STATES = ["", "torch.backends.cuda.matmul.allow_tf32 = True", "torch.backends.cuda.matmul.allow_tf32 = False",
               "torch.backends.cuda.matmul.fp32_precision = 'ieee'", "torch.set_float32_matmul_precision('high')",
               "torch.backends.fp32_precision = 'tf32'"]


@pytest.mark.parametrize("setting", TF32_STATES)
def test_tf32_matmul_puts_back_whatever_the_process_set(setting):
    """The tf32 touch forces TF32 for its own products only: whichever API the process used to set
    its precision (the older allow_tf32, the newer fp32_precision, the global one), every switch
    reads the same after, and a getter that raised before raises after (torch refuses to mix the
    APIs, and the touch must not turn a process's working setting into a refused one)."""
    script = f"""
import json, torch
from cuda_agent.evaluate.timing import tf32_matmul
from cuda_agent.evaluate.worker.common import read_switch as read
{setting}
def state():
    m = torch.backends.cuda.matmul
    return [read(lambda: m.allow_tf32), m.fp32_precision, torch.backends.fp32_precision,
            read(torch.get_float32_matmul_precision)]
before = state()
with tf32_matmul():
    inside = torch.backends.cuda.matmul.fp32_precision
print(json.dumps([before, inside, state()]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, inside, after = json.loads(out.stdout.splitlines()[-1])
    assert inside == "tf32"
    assert after == before


@pytest.mark.parametrize("switch", [
    "torch.backends.cuda.matmul.allow_tf32 = True",
    "torch.backends.cuda.matmul.fp32_precision = 'tf32'",  # torch's newer API: an honest candidate
    "torch.backends.fp32_precision = 'tf32'",  # the newer global switch (the older getters refuse)
])
def test_reduced_precision_is_recorded(tmp_path, cache_dir, switch, warm_evaluate):
    body = switch + "\n" + CORRECT[len(HEADER):]
    res = run(tmp_path, candidate(tmp_path, body), cache_dir, timing=False, warm=warm_evaluate)
    assert res.correct, res.reasons
    assert Code.REDUCED_PRECISION in [r.code for r in res.reasons]
    assert res.device["candidate_precision"]["matmul_allow_tf32"] is True


def test_a_forked_worker_compiles_in_the_calling_thread_though_inductor_was_configured_before_the_fork():
    """A worker forked from a zygote has Inductor's config from before the fork (the op guard's
    warm-up imports it, deciding its compile threads from the zygote's machine); the candidate's
    process must still compile in the calling thread, or its compile workers read as hidden work."""
    code = ("import os, sys\n"
            "os.environ.pop('TORCHINDUCTOR_COMPILE_THREADS', None)\n"
            "import torch._inductor.config as c\n"
            "c.compile_threads = 4  # as the zygote's many-core machine decided\n"
            "os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = '1'  # the candidate's environment, too late\n"
            "from cuda_agent.evaluate.worker.runner import quiet_libraries\n"
            "quiet_libraries()\n"
            "print(c.compile_threads)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1"]
