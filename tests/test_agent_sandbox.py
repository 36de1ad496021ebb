"""The agent's shell sandbox: no network, writes only in the workspace and a private /tmp, the whole
process tree killed on timeout, a scrubbed environment, background shells, and a clear refusal to run
unsandboxed unless asked."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import sandbox_unavailable
from cuda_agent import sandbox
from cuda_agent.agent.sandbox import OUTPUT_LIMIT, Sandbox, SandboxUnavailable

needs_ns = pytest.mark.skipif(sandbox_unavailable() is not None, reason=f"no user namespaces here: {sandbox_unavailable()}")


@pytest.fixture
def box(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with Sandbox(ws) as sb:
        yield sb


@needs_ns
def test_isolation_is_reported(box):
    iso = box.isolation
    assert iso["level"] == "sandbox" and iso["unavailable"] is None and iso["mechanism"].startswith("bubblewrap")
    assert iso["network"].startswith("none") and "read-only" in iso["filesystem"]
    assert {"cpu_s", "file_bytes", "open_files"} <= set(iso["limits"]["enforced"])


@needs_ns
def test_commands_write_only_in_the_workspace_and_a_private_tmp(box, tmp_path):
    # /etc is read-only; the test's own folder is under the host's /tmp, which the sandbox replaces
    r = box.run(f"echo hi > made.txt && cat made.txt && echo x > /etc/cuda-agent-evil; "
                f"mkdir -p {tmp_path} && echo x > {tmp_path}/outside.txt; echo y > /tmp/private.txt && cat /tmp/private.txt")
    assert r.exit_code == 0
    lines = r.output.split("\n")
    assert lines[0] == "hi" and "Read-only file system" in r.output and "y" in lines
    assert not Path("/etc/cuda-agent-evil").exists()
    assert (box.root / "made.txt").read_text() == "hi\n"
    assert not (tmp_path / "outside.txt").exists()
    assert "private.txt" in box.run("ls /tmp").output.split()  # the sandbox's /tmp lasts the episode
    assert (box.tmp / "private.txt").exists() and not list(tmp_path.glob("private.txt"))


@needs_ns
def test_commands_have_no_network(box):
    r = box.run("python3 -c \"import socket; s = socket.socket(); s.settimeout(5); "
                "s.connect(('1.1.1.1', 443))\"", timeout_s=30)
    assert r.exit_code != 0 and "unreachable" in r.output.lower()
    assert "lo" in box.run("cat /proc/net/dev").output and "eth0" not in box.run("cat /proc/net/dev").output


@needs_ns
def test_timeout_kills_the_whole_tree(box):
    tag = uuid.uuid4().hex
    r = box.run(f"(exec -a sleeper-{tag} sleep 300) & (exec -a sleeper-{tag} sleep 300) & wait", timeout_s=1.5)
    assert r.timed_out and r.exit_code is None and r.seconds < 15
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", f"sleeper-{tag}"], capture_output=True, text=True).stdout
    assert left == ""


@needs_ns
def test_environment_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "also-secret")
    (tmp_path / "ws").mkdir()
    with Sandbox(tmp_path / "ws", env={"CUDA_AGENT_TASK": "x"}) as box:
        out = box.run("env").output
    assert "secret" not in out and "CUDA_AGENT_TASK=x" in out and f"HOME={tmp_path / 'ws'}" in out


@needs_ns
def test_background_shells_report_only_new_output_and_can_be_killed(box):
    sid = box.start("for i in 1 2 3; do echo tick $i; sleep 0.4; done")
    time.sleep(0.6)
    status, out = box.output(sid)
    assert status == "running" and "tick 1" in out
    time.sleep(1.5)
    status, rest = box.output(sid)
    assert status == "exited 0" and "tick 3" in rest and "tick 1" not in rest  # only what is new
    long = box.start("sleep 300")
    box.kill(long)
    assert box.output(long)[0] == "killed"
    with pytest.raises(KeyError, match="no background shell"):
        box.output("bash_99")


@needs_ns
def test_huge_output_is_clipped(box):
    r = box.run("python3 -c \"print('x' * 200000)\"")
    assert r.truncated and len(r.output) < OUTPUT_LIMIT + 200 and "characters dropped" in r.output


def test_the_sandbox_refuses_to_run_unsandboxed_unless_asked(tmp_path, monkeypatch):
    # a machine whose bwrap cannot make a sandbox (here: a bwrap that is not there)
    monkeypatch.setenv("CUDA_AGENT_BWRAP", str(tmp_path / "no-bwrap"))
    sandbox.support.cache_clear()
    monkeypatch.setattr(sandbox, "support", functools.cache(sandbox.support.__wrapped__))
    (tmp_path / "ws").mkdir()
    with pytest.raises(SandboxUnavailable, match="bwrap.*allow_unsandboxed"):
        Sandbox(tmp_path / "ws")
    with Sandbox(tmp_path / "ws", allow_unsandboxed=True) as box:
        assert box.isolation["level"] == "none" and box.isolation["network"] == "host"
        r = box.run("pwd && echo ok")
        assert r.exit_code == 0 and r.output.split() == [str(tmp_path / "ws"), "ok"]


@needs_ns
def test_workspace_commands_reach_the_evaluator_through_the_bridge(tmp_path, monkeypatch):
    """`python3 -m utils.verification` inside the sandbox (caches read-only, no network) is run by the
    bridge outside, on the bridge's workspace, with the same verdict as a direct run."""
    from cuda_agent.agent.bridge import EvalBridge
    from cuda_agent.tasks import load_task
    from cuda_agent.workspace import init_workspace

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    ws = init_workspace(load_task(Path(__file__).parent / "data" / "relu_bias_task.py"), tmp_path / "ws",
                        device="cpu")
    direct = subprocess.run([sys.executable, "-m", "utils.verification", "--device", "cpu", "--trials", "1"],
                            cwd=ws, capture_output=True, text=True, timeout=600)
    with Sandbox(ws) as box:
        bridge = EvalBridge(ws, box.tmp / "eval.sock")
        box.env["CUDA_AGENT_EVAL_SOCKET"] = box.visible(box.tmp / "eval.sock")
        try:
            r = box.run("python3 -m utils.verification --device cpu --trials 1", timeout_s=600)
            bad = box.run("python3 -c \"from cuda_agent.workspace.commands import forward; "
                          "print(forward('/tmp/eval.sock', 'rm -rf', []))\"", timeout_s=60)
        finally:
            bridge.close()
    assert r.exit_code == direct.returncode and r.output.splitlines()[0] == direct.stdout.splitlines()[0]
    assert [c["command"] for c in bridge.calls] == ["verify"] and bridge.seconds > 0
    assert "malformed request" in bad.output
