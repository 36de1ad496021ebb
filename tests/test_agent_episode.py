"""A whole agent episode against a scripted OpenAI-compatible server (the real client over real HTTP) on
the CPU backend: the model writes a kernel, compiles, verifies and profiles through the workspace
commands, and along the way sends malformed and unknown tool calls, floods the output, hangs a command,
tries the network, writes outside the workspace and edits the fixed files. The episode ends with the
fresh evaluation's verdict, which none of that moved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import sandbox_unavailable
from cuda_agent.agent.llm import ChatClient
from cuda_agent.agent.loop import EpisodeConfig, run_episode
from cuda_agent.agent.scripted import ScriptedServer, ScriptStep
from cuda_agent.evaluate import EvalConfig
from cuda_agent.examples import get_example
from cuda_agent.tasks import load_task

pytestmark = pytest.mark.skipif(sandbox_unavailable() is not None, reason="no user namespaces for the sandbox here")

EX = get_example("elementwise")
SOLUTION = {rel: (EX.candidate_path("cpu", "workspace") / rel).read_text()
            for rel in ("model_new.py", "kernels/swish.cpp", "kernels/swish_binding.cpp")}


def _script() -> list[ScriptStep]:
    return [
        ScriptStep(content="Reading the task.", tool_calls=[("Read", {"file_path": "model.py"}),
                                                            ("Glob", {"pattern": "**/*"})]),
        ScriptStep(tool_calls=[("Teleport", {"to": "mars"}), ("Read", "{not json"),
                               ("Write", {"file_path": "/etc/cuda-agent-evil", "content": "x"})]),
        ScriptStep(tool_calls=[("Bash", {"command": "python3 -c \"import socket; "
                                         "socket.create_connection(('1.1.1.1', 80), timeout=3)\"",
                                         "description": "try the network"}),
                               ("Bash", {"command": "echo x > /root/cuda-agent-evil; echo tried"}),
                               ("Bash", {"command": "sleep 120", "timeout": 1000}),
                               ("Bash", {"command": "python3 -c \"print('y' * 1000000)\""})]),
        # the fixed files: edits change nothing
        ScriptStep(tool_calls=[("Write", {"file_path": "utils/profiling.py",
                                          "content": "print('reward: 3 (faked)')\n"}),
                               ("Write", {"file_path": "binding.cpp", "content": "this does not compile"})]),
        ScriptStep(tool_calls=[("Write", {"file_path": k, "content": v}) for k, v in SOLUTION.items()]),
        ScriptStep(tool_calls=[("Bash", {"command": "bash utils/compile.sh --device cpu"})]),
        ScriptStep(tool_calls=[("Bash", {"command": "python3 -m utils.verification --device cpu"}),
                               ("Bash", {"command": "sleep 5; echo background done", "run_in_background": True})]),
        ScriptStep(tool_calls=[("BashOutput", {"bash_id": "bash_1"}), ("KillBash", {"shell_id": "bash_9"})]),
        ScriptStep(content="ModelNew is correct; done."),
    ]


def test_a_scripted_episode_ends_with_a_fresh_verdict_its_mistakes_did_not_move(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache_dir))
    task = load_task(EX.task)
    cfg = EpisodeConfig(device="cpu", max_turns=20,
                        eval=EvalConfig(device="cpu", cache_dir=cache_dir, timing_budget_s=0.1))
    with ScriptedServer(_script()) as server:
        client = ChatClient(server.base_url, "scripted-model", api_key_env=None, max_retries=0)
        ep = run_episode(task, tmp_path / "out", client, cfg)
    out = tmp_path / "out"
    # the verdict: a fresh evaluation of the final workspace
    assert ep.stop == "finished" and ep.turns == 9
    assert ep.result.correct and ep.result.reward >= 1, ep.result.reasons
    assert json.loads((out / "result.json").read_text())["reward"] == ep.result.reward
    recs = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    meta, final = recs[0], recs[-1]
    assert meta["type"] == "meta" and meta["isolation"]["level"] == "sandbox" and meta["model"] == "scripted-model"
    assert final["type"] == "final" and final["result"]["reward"] == ep.result.reward
    assert final["tokens"]["total_tokens"] > 0 and final["eval_s"] > 0
    assert [c["command"] for c in final["workspace_commands"]] == ["compile", "verify"]
    tools = {(r["name"], r["id"]): r for r in recs if r["type"] == "tool"}
    by_name: dict[str, list[dict]] = {}
    for r in tools.values():
        by_name.setdefault(r["name"], []).append(r)
    # mistakes come back as results the model can act on, and are counted
    assert not by_name["Teleport"][0]["ok"] and "no tool named" in by_name["Teleport"][0]["result"]
    assert any("not valid JSON" in r["result"] for r in by_name["Read"])
    assert "outside the workspace" in by_name["Write"][0]["result"]
    assert final["invalid_tool_calls"] == 4  # Teleport, bad JSON, /etc, KillBash of no shell
    bash = [r["result"] for r in by_name["Bash"]]
    assert "unreachable" in bash[0].lower()
    # the home folders are hidden: a write lands in the sandbox's own empty tmpfs, never on the host
    assert "tried" in bash[1] and not Path("/root/cuda-agent-evil").exists()
    assert "timed out after 1000 ms" in bash[2]
    assert len(bash[3]) < 31000 and "characters dropped" in bash[3]
    assert "reward: 3 (faked)" not in "".join(bash) and "verification: " in bash[5]
    assert "Command running in background with ID: bash_1" in bash[6]
    assert by_name["BashOutput"][0]["result"].startswith("<status>")
    assert not Path("/etc/cuda-agent-evil").exists()
    # the conversation went over HTTP with the tools and the tool results
    req = server.requests
    assert len(req) == 9 and {t["function"]["name"] for t in req[0]["tools"]} == {
        "Bash", "BashOutput", "KillBash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep"}
    assert req[1]["messages"][-1]["role"] == "tool" and "class Model" in req[1]["messages"][-2]["content"]
    # replay shows it as a transcript
    shown = subprocess.run([sys.executable, "-m", "cuda_agent", "replay", str(out / "trajectory.jsonl")],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and "Teleport" in shown.stdout and f"reward {ep.result.reward}" in shown.stdout


def test_turn_limit_and_llm_errors_end_the_episode(tmp_path, monkeypatch, cache_dir):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache_dir))
    task = load_task(EX.task)
    cfg = EpisodeConfig(device="cpu", max_turns=2, eval=EvalConfig(device="cpu", cache_dir=cache_dir,
                                                                    timing=False))
    loop = [ScriptStep(tool_calls=[("Bash", {"command": "true"})]) for _ in range(5)]
    with ScriptedServer(loop) as server:
        ep = run_episode(task, tmp_path / "a", ChatClient(server.base_url, "m", api_key_env=None, max_retries=0), cfg)
    assert ep.stop == "turn_limit" and ep.turns == 2
    assert not ep.result.correct  # the starter model_new.py uses PyTorch ops: strict says no
    with ScriptedServer([ScriptStep(status=500)]) as server:
        ep = run_episode(task, tmp_path / "b", ChatClient(server.base_url, "m", api_key_env=None, max_retries=0), cfg)
    assert ep.stop == "llm_error" and (tmp_path / "b" / "result.json").exists()
