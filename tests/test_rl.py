"""Training data and rewards (cuda_agent.rl) on real trajectories: episodes run against a scripted
OpenAI-compatible server on the CPU backend, then filtered into RFT data; GAE value targets against
hand-computed cases; the single-turn reward through a real Evaluator."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import sandbox_unavailable
from cuda_agent.agent.llm import ChatClient
from cuda_agent.agent.loop import EpisodeConfig, run_episode
from cuda_agent.agent.scripted import ScriptedServer, ScriptStep
from cuda_agent.evaluate import Code, EvalConfig, Evaluator
from cuda_agent.rl import reward as reward_mod
from cuda_agent.agent.trajectory import read_trajectory
from cuda_agent.rl.rft import longest_loop
from cuda_agent.rl.values import gae, outcome_rewards, segment_mask, value_targets
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
TASK = DATA / "relu_bias_task.py"
RIGHT = (DATA / "relu_bias_model_new.py").read_text()
WRONG = RIGHT.replace("torch.relu(x + self.bias)", "torch.relu(x - self.bias)")
needs_sandbox = pytest.mark.skipif(sandbox_unavailable() is not None, reason="no user namespaces for the sandbox here")


# --- redundant loops ---------------------------------------------------------------------------------

def test_longest_loop_finds_repeated_blocks_of_turns():
    assert longest_loop([]) == (1, 1)
    assert longest_loop(list("abcd")) == (1, 1)
    assert longest_loop(list("abbbc")) == (3, 1)
    assert longest_loop(list("xababab")) == (3, 2)
    assert longest_loop(list("abcabcabcab"), max_period=3) == (3, 3)
    assert longest_loop(list("abcabcabc"), max_period=2) == (1, 1)  # period 3 not looked for
    assert longest_loop(list("aabab")) == (2, 1)  # "aa" and "abab" both twice: the first found


# --- GAE, by hand ------------------------------------------------------------------------------------

def test_gae_skips_observation_tokens_like_verl():
    # tokens: policy, policy, tool, tool, policy; reward 1 on the last
    mask = [1, 1, 0, 0, 1]
    values = [0.5, 0.2, 9.0, 9.0, 0.4]  # the observations' values must not matter
    adv, ret = gae(outcome_rewards(mask, 1.0), values, mask, gamma=1.0, lam=0.95)
    # t=4: delta = 1 - 0.4 = 0.6
    # t=1: delta = 0 + 0.4 - 0.2 = 0.2; A = 0.2 + 0.95 * 0.6 = 0.77
    # t=0: delta = 0 + 0.2 - 0.5 = -0.3; A = -0.3 + 0.95 * 0.77 = 0.4315
    assert adv[[0, 1, 4]] == pytest.approx([0.4315, 0.77, 0.6])
    assert ret[[0, 1, 4]] == pytest.approx([0.9315, 0.97, 1.0])
    # gamma < 1 discounts the bootstrapped value: t=1: 0 + 0.9 * 0.4 - 0.2 = 0.16, + 0.9 * 0.95 * 0.6
    adv, _ = gae(outcome_rewards(mask, 1.0), values, mask, gamma=0.9, lam=0.95)
    assert adv[1] == pytest.approx(0.16 + 0.9 * 0.95 * 0.6)


def test_value_targets_before_any_critic_are_lambda_powers_of_the_reward():
    mask = segment_mask([2, 3, 1, 2], [False, True, False, True])  # prompt, reply, tool output, reply
    assert mask.tolist() == [0, 0, 1, 1, 1, 0, 1, 1]
    t = value_targets(mask, 3.0)
    policy = np.flatnonzero(mask == 1)
    # k policy tokens after each: 4, 3, 2, 1, 0
    assert t[policy] == pytest.approx([3 * 0.95 ** k for k in (4, 3, 2, 1, 0)])
    assert all(math.isnan(x) for x in t[mask == 0])
    with pytest.raises(ValueError, match="no policy-generated token"):
        value_targets([0, 0], 1.0)
    with pytest.raises(ValueError, match="one length"):
        gae([0.0], [0.0, 1.0], [1])


# --- RFT data from real episodes ---------------------------------------------------------------------

def _episode(out: Path, steps: list[ScriptStep], cache_dir: Path) -> dict:
    task = load_task(TASK)
    cfg = EpisodeConfig(device="cpu", max_turns=10, eval=EvalConfig(
        device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False))
    with ScriptedServer(steps) as server:
        run_episode(task, out, ChatClient(server.base_url, "scripted", api_key_env=None, max_retries=0), cfg)
        return {"last_request": server.requests[-1]}


def _write(content: str) -> ScriptStep:
    return ScriptStep(content="Writing ModelNew.", tool_calls=[("Write", {"file_path": "model_new.py", "content": content})])


@needs_sandbox
def test_rft_keeps_rewarded_clean_trajectories_in_verl_sft_format(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache_dir))
    eps = tmp_path / "episodes"
    read = ScriptStep(content="Reading.", tool_calls=[("Read", {"file_path": "model.py"})])
    seen = {
        "good": _episode(eps / "good", [read, _write(RIGHT), ScriptStep(content="Done.")], cache_dir),
        "invalid": _episode(eps / "invalid", [ScriptStep(tool_calls=[("Teleport", {"to": "mars"})]),
                                              _write(RIGHT), ScriptStep(content="Done.")], cache_dir),
        "loop": _episode(eps / "loop", [_write(RIGHT)] + [ScriptStep(tool_calls=[("Bash", {"command": "ls"})])] * 3
                         + [ScriptStep(content="Done.")], cache_dir),
        "wrong": _episode(eps / "wrong", [_write(WRONG), ScriptStep(content="Done.")], cache_dir),
    }
    # an episode cut off while writing, and a file that is no trajectory
    (eps / "cut").mkdir()
    good_lines = (eps / "good" / "trajectory.jsonl").read_text().splitlines()
    (eps / "cut" / "trajectory.jsonl").write_text("\n".join(good_lines[:-1]) + "\n" + good_lines[-1][:40])
    (eps / "junk").mkdir()
    (eps / "junk" / "trajectory.jsonl").write_text("not json\n")

    out = tmp_path / "rft" / "rft.parquet"
    p = subprocess.run([sys.executable, "-m", "cuda_agent", "train", "rft", "--trajectories", str(eps),
                        "--out", str(out), "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["trajectories"] == 6 and report["kept"] == 1
    assert report["rejected"] == {"invalid_tool_calls": 1, "redundant_loop": 1, "reward": 1, "unfinished": 1,
                                  "unreadable": 1}
    assert "junk/trajectory.jsonl:1" in report["unreadable"][0]
    assert json.loads(out.with_suffix(".report.json").read_text()) == report

    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 1 and rows[0]["reward"] >= 1 and rows[0]["source"].endswith("good/trajectory.jsonl")
    messages, tools = json.loads(rows[0]["messages"]), json.loads(rows[0]["tools"])
    # the conversation is the one the model had: the last request's messages, then its final answer
    last = seen["good"]["last_request"]
    assert messages[:-1] == last["messages"]
    assert messages[-1] == {"role": "assistant", "content": "Done."}
    assert tools == last["tools"]  # each schema exactly, with no other tool's parameters
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert json.loads(messages[4]["tool_calls"][0]["function"]["arguments"])["content"] == RIGHT

    # the reasons, one by one, through the library
    traj = read_trajectory(eps / "loop" / "trajectory.jsonl")
    assert longest_loop(traj.turn_signatures()) == (3, 1) and traj.reward >= 1
    assert read_trajectory(eps / "invalid" / "trajectory.jsonl").invalid_tool_calls == 1
    assert not read_trajectory(eps / "cut" / "trajectory.jsonl").finished
    # thresholds are the caller's: allowing one invalid call and longer loops keeps those two as well
    p = subprocess.run([sys.executable, "-m", "cuda_agent", "train", "rft", "--trajectories", str(eps), "--out",
                        str(tmp_path / "loose.parquet"), "--max-invalid-tool-calls", "1", "--loop-repeats", "4"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "kept" in p.stdout and pq.read_table(tmp_path / "loose.parquet").num_rows == 3
    # bad input: a clear error, exit 2
    p = subprocess.run([sys.executable, "-m", "cuda_agent", "train", "rft", "--trajectories", str(tmp_path / "none"),
                        "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 2 and "no such folder" in p.stderr


def test_trajectories_from_before_tool_specs_get_todays_schemas(tmp_path):
    from cuda_agent.agent.toolbox import Toolbox

    path = tmp_path / "trajectory.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"type": "meta", "task": "t", "model": "m", "tools": ["Read", "Bash"]},
        {"type": "message", "turn": 0, "message": {"role": "user", "content": "hi"}},
        {"type": "final", "stop": "finished", "result": {"reward": 2}},
    ]) + "\n")
    traj = read_trajectory(path)
    assert [t["function"]["name"] for t in traj.tools] == ["Bash", "Read"]
    assert traj.tools[1] == next(t for t in Toolbox.specs() if t["function"]["name"] == "Read")
    assert traj.reward == 2 and traj.finished


# --- the single-turn reward ---------------------------------------------------------------------------

def test_single_turn_reward_scores_the_response_s_candidate(tmp_path, monkeypatch):
    task = load_task(TASK)
    cfg = EvalConfig(device="cpu", cache_dir=tmp_path / "cache", policy="kernelbench", timing=False)
    good = f"Here it is.\n```python\n{RIGHT}```\nAnd a usage note:\n```python\nm = ModelNew(256)\n```"
    with Evaluator(cfg, jobs=1, warm=0) as ev:
        res = reward_mod.score_response(task, good, ev)
        assert res.correct and res.reward == 1, res.reasons
        res = reward_mod.score_response(task, f"```python\n{WRONG}```", ev)
        assert res.reward == -1 and res.failures[0].code is Code.OUTPUT_MISMATCH
        res = reward_mod.score_response(task, "I would write a kernel.", ev)
        assert res.reward == -1 and res.failures[0].code is Code.NO_MODEL_NEW
        assert "no closed ```python code block" in res.failures[0].message
    # verl's entry point: the task from the row, the evaluator from the environment's config
    monkeypatch.setenv("CUDA_AGENT_EVAL_CONFIG", json.dumps(
        {"device": "cpu", "cache_dir": str(tmp_path / "cache"), "policy": "kernelbench", "timing": False}))
    try:
        from cuda_agent.rl.data import prompt_rows

        row = prompt_rows([task])[0]
        got = reward_mod.compute_score(row["data_source"], good, "", row["extra_info"])
        assert got["score"] == 1.0 and got["correct"] and got["reasons"] == ""
        got = reward_mod.compute_score(row["data_source"], "no code", "", row["extra_info"])
        assert got["score"] == -1.0 and got["reasons"] == "no_model_new"
        with pytest.raises(ValueError, match="no task_source"):
            reward_mod.compute_score("x", good, "", {})
        assert "class Model" in row["prompt"][1]["content"] and row["agent_name"] == "single_turn_agent"
    finally:
        reward_mod.close_shared_evaluators()
