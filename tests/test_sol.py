"""The speed of light (evaluate/sol.py, worker/work.py): the reference's work counted against hand
counts, the peaks' table and cache, the SOL time and fraction, the `sol` reward, and the whole
evaluation on the CPU backend carrying `sol`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from cuda_agent.bench.metrics import Outcome, metrics
from cuda_agent.evaluate import EvalConfig, evaluate, load_candidate
from cuda_agent.evaluate.reward import sol_reward
from cuda_agent.evaluate.sol import peaks_for, speed_of_light, table_peaks
from cuda_agent.evaluate.worker.work import WorkCounter
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
F32 = 4


def count(fn, *inputs, module=None):
    with torch.no_grad(), WorkCounter() as w:
        out = fn(*inputs)
    return w.result(list(inputs), out, module if module is not None else fn)


def test_a_matrix_product_is_2mnk_flops_in_the_tf32_class_and_moves_its_operands_once():
    m, k, n = 64, 128, 32
    w = count(lambda a, b: a @ b, torch.randn(m, k), torch.randn(k, n))
    assert w["flops"] == {"tensor_tf32": 2 * m * n * k}
    assert w["bytes"] == (m * k + k * n + m * n) * F32 and w["uncounted"] == []
    half = count(lambda a, b: a @ b, torch.randn(m, k).half(), torch.randn(k, n).half())
    assert half["flops"] == {"tensor_16": 2 * m * n * k} and half["bytes"] == (m * k + k * n + m * n) * 2


def test_a_linear_layer_counts_its_weights_and_bias_as_bytes_moved():
    layer = nn.Linear(128, 32)
    w = count(layer, torch.randn(64, 128))
    assert w["flops"] == {"tensor_tf32": 2 * 64 * 32 * 128}
    assert w["bytes_by"] == {"inputs": 64 * 128 * F32, "outputs": 64 * 32 * F32, "parameters": (128 * 32 + 32) * F32}


def test_elementwise_and_softmax_are_vector_flops_and_bound_by_their_bytes():
    n = 10_000
    relu = count(torch.relu, torch.randn(n))
    assert relu["flops"] == {"vector": n} and relu["bytes"] == 2 * n * F32
    chain = count(lambda x: torch.relu(x * 2 + 1), torch.randn(n))
    assert chain["flops"] == {"vector": 3 * n}  # mul, add, relu: one FLOP per element each
    assert chain["bytes"] == 2 * n * F32  # the intermediates are not the least a kernel must move
    soft = count(lambda x: torch.softmax(x, -1), torch.randn(100, 100))
    assert soft["flops"] == {"vector": 100 * 100} and soft["bytes"] == 2 * 100 * 100 * F32


def test_a_convolution_counts_2_n_cout_hout_wout_cin_k_k():
    conv = nn.Conv2d(3, 8, 3)
    w = count(conv, torch.randn(2, 3, 16, 16))
    assert w["flops"] == {"tensor_tf32": 2 * 2 * 8 * 14 * 14 * 3 * 3 * 3}
    assert w["bytes_by"]["parameters"] == (8 * 3 * 3 * 3 + 8) * F32
    attn = count(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), *(torch.randn(2, 4, 16, 8) for _ in range(3)))
    assert attn["flops"] == {"tensor_tf32": 2 * (2 * 2 * 4 * 16 * 16 * 8)}  # QK^T and PV


def test_work_a_count_cannot_know_is_named_not_guessed():
    w = count(lambda x: torch.sort(x).values * 2, torch.randn(100))
    assert w["uncounted"] == ["aten.sort"] and w["flops"] == {"vector": 100}
    lib = torch.library.Library("cuda_agent_test_sol", "DEF")
    lib.define("opaque(Tensor x) -> Tensor")
    lib.impl("opaque", lambda x: x.clone(), "CPU")
    w = count(lambda x: torch.ops.cuda_agent_test_sol.opaque(x), torch.randn(10))
    assert w["uncounted"] == ["cuda_agent_test_sol.opaque"]
    sol = speed_of_light(w, {"dram_bytes_s": 1e9, "vector": 1e9}, 1.0)
    assert sol["exact"] is False and "cuda_agent_test_sol.opaque" in sol["uncounted"]


def test_the_speed_of_light_is_the_larger_of_memory_and_compute_time():
    peaks = {"dram_bytes_s": 1e12, "vector": 1e12, "tensor_tf32": 1e14}
    mem = speed_of_light({"flops": {"vector": 10**9}, "bytes": 4 * 10**9}, peaks, candidate_ms=8.0)
    assert mem["bound"] == "memory" and mem["time_ms"] == pytest.approx(4.0) and mem["fraction"] == pytest.approx(0.5)
    comp = speed_of_light({"flops": {"tensor_tf32": 10**12, "vector": 10**9}, "bytes": 10**6}, peaks, candidate_ms=44.0)
    assert comp["bound"] == "compute" and comp["time_ms"] == pytest.approx(11.0)  # 10 ms + 1 ms: summed
    assert comp["fraction"] == pytest.approx(0.25) and comp["exact"] is True
    untimed = speed_of_light({"flops": {}, "bytes": 10**9}, peaks, None, "the candidate was not timed (timeout)")
    assert untimed["time_ms"] == pytest.approx(1.0) and untimed["fraction"] is None and "timeout" in untimed["why"]
    fp8 = speed_of_light({"flops": {"tensor_8": 10**12}, "bytes": 1}, peaks, 1.0)
    assert fp8["exact"] is False and any("tensor_8" in u for u in fp8["uncounted"])
    assert speed_of_light(None, peaks, 1.0)["time_ms"] is None


def test_known_gpus_take_their_datasheet_peaks_and_others_are_measured_once(tmp_path):
    assert table_peaks("NVIDIA H100 80GB HBM3")["dram_bytes_s"] == 3.35e12
    assert table_peaks("NVIDIA H100 PCIe")["dram_bytes_s"] == 2.0e12
    assert table_peaks("NVIDIA H200")["dram_bytes_s"] == 4.8e12
    assert table_peaks("NVIDIA A100-SXM4-80GB")["tensor_16"] == 312e12
    assert table_peaks("NVIDIA GeForce GTX 1080") is None
    calls = []

    def measure():
        calls.append(1)
        return {"dram_bytes_s": 5e10, "vector": 1e11}

    cpu = {"type": "cpu", "name": "x86_64", "threads": 2}
    assert peaks_for(cpu, tmp_path, None) is None  # nothing cached, nothing to measure with
    first = peaks_for(cpu, tmp_path, measure)
    again = peaks_for(cpu, tmp_path, lambda: pytest.fail("measured twice"))
    assert calls == [1] and first == again and first["source"].startswith("measured on")
    h100 = peaks_for({"type": "cuda", "name": "NVIDIA H100 80GB HBM3"}, tmp_path, lambda: pytest.fail("measured"))
    assert h100["source"] == "datasheet (H100)"


@pytest.mark.parametrize("correct, fraction, want", [
    (False, 0.9, -1), (True, None, 1), (True, 0.05, 1), (True, 0.2, 2), (True, 0.49, 2), (True, 0.5, 3), (True, 1.2, 3),
])
def test_the_sol_reward_pays_by_the_fraction_of_the_speed_of_light(correct, fraction, want):
    assert sol_reward(correct, fraction) == want


def test_bench_metrics_give_the_quartiles_of_the_sol_fractions_of_correct_timed_tasks():
    outs = [Outcome(f"t{i}", 1, True, 1.0, None, f) for i, f in enumerate((0.1, 0.2, 0.3, 0.4, None))]
    outs.append(Outcome("t9", 1, False, None, None, 0.9))  # not correct: not counted
    sol = metrics(outs)["levels"]["1"]["sol"]
    assert sol == {"timed": 4, "p25": 0.175, "median": 0.25, "p75": 0.325}


def test_an_evaluation_on_the_cpu_carries_sol_from_the_reference_and_the_candidate_time(tmp_path, cache_dir):
    """relu(x + bias) on x of 64 x 256 float32: 2 FLOPs per element, and x, the output and the bias
    moved once; the fraction is the SOL time over the candidate's median; `--reward sol` pays by it."""
    cand = load_candidate(DATA / "relu_bias_model_new.py")
    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", compile_baseline=False,
                     timing_budget_s=0.1, timeout_s=120, reward="sol")
    res = evaluate(load_task(DATA / "relu_bias_task.py"), cand, cfg)
    assert res.correct, res.reasons
    sol = res.sol
    assert sol["flops"] == {"vector": 2 * 64 * 256}
    assert sol["bytes"] == (2 * 64 * 256 + 256) * F32 and sol["exact"] is True
    peaks = sol["peaks"]
    assert peaks["source"].startswith("measured on") and peaks["dram_bytes_s"] > 1e8
    assert sol["time_ms"] == pytest.approx(1e3 * max(sol["bytes"] / peaks["dram_bytes_s"],
                                                     2 * 64 * 256 / peaks["vector"]), rel=1e-3)
    assert sol["fraction"] == pytest.approx(sol["time_ms"] / res.times_ms["candidate"].median, rel=2e-3)
    assert res.reward == sol_reward(True, sol["fraction"])
    assert json.loads(json.dumps(res.to_json()))["sol"]["bound"] in ("memory", "compute")
    # untimed: the SOL time without a fraction, and why
    untimed = evaluate(load_task(DATA / "relu_bias_task.py"), cand, EvalConfig(
        device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False, timeout_s=120))
    assert untimed.sol["fraction"] is None and math.isclose(untimed.sol["time_ms"], sol["time_ms"], rel_tol=1e-3)
    assert "not timed" in untimed.sol["why"] and untimed.reward == 1


def test_counting_and_measuring_leave_the_judges_process_as_it_was():
    """A judge serves the next evaluation only if its process is as it started (judge.py's
    `process_state`): the count's dispatch mode must not pull in torch._dynamo (it replaces
    `torch.manual_seed`), nor the peaks' measure leave a precision switch rewritten."""
    from cuda_agent.evaluate.worker.judge import process_state, state_changes
    from cuda_agent.evaluate.worker.work import measure_peaks

    before = process_state()
    count(lambda a: torch.relu(a @ a), torch.randn(8, 8))
    measure_peaks(torch.device("cpu"))
    assert state_changes(before, process_state()) == []


def test_the_judges_first_prepare_counts_the_work_and_still_times_the_reference(tmp_path):
    """The work is counted on the first trial's reference call; the warm call after it still says
    how long one call takes (`ref_ms`, which sizes the batches from the first command on)."""
    from cuda_agent.evaluate.worker.judge import Judge

    judge = Judge()
    judge.cmd_setup(task_source=(DATA / "relu_bias_task.py").read_text(), origin="relu_bias_task.py",
                    device="cpu", init_seed=1, weights_seed=2, shm_dir=str(tmp_path), touch="bf16")
    prep = judge.cmd_prepare([{"trial": "c0", "seed": 3, "stress": None, "fill": None}])
    assert prep["work"]["flops"] == {"vector": 2 * 64 * 256}
    assert prep["ref_ms"] is not None and prep["ref_ms"] > 0
