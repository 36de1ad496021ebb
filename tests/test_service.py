"""The warm evaluation service (`cuda-agent serve`): the verdicts of an in-process evaluation, many
clients at once, a candidate that crashes or hangs costing only its own verdict, a client that goes
away taking its queued work with it, other users kept out, and the command line around it."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import test_adversarial as adv
from cuda_agent.evaluate import EvalConfig, evaluate, load_candidate
from cuda_agent.evaluate.result import Code
from cuda_agent.evaluate.service import (Service, ServiceClient, ServiceError, connect, ping, private_dir, running,
                                         stop)
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
TASK = load_task(DATA / "relu_bias_task.py")
CORRECT = DATA / "relu_bias_model_new.py"


@pytest.fixture
def sock_dir():
    """A short private folder for the socket (a Unix socket's path is limited to 107 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="ca-svc-"))
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


def _cfg(cache_dir: Path, **kw) -> EvalConfig:
    kw.setdefault("timing", False)
    kw.setdefault("timeout_s", 120)
    return EvalConfig(device="cpu", policy="kernelbench", cache_dir=cache_dir, **kw)


def _case(name: str, tmp_path: Path):
    """An adversarial case, rendered for the CPU backend."""
    path = tmp_path / f"{name}.py"
    path.write_text(adv.BY_ID[name].render("cpu"))
    return load_candidate(path)


def _wait(condition, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_an_evaluation_through_the_service_gets_the_in_process_verdict(cache_dir, sock_dir):
    cfg = _cfg(cache_dir, timing=True, timing_budget_s=0.05, seeds=[11, 12, 13, 14, 15, 16, 17, 18, 19])
    here = evaluate(TASK, load_candidate(CORRECT), cfg)
    with running(cfg, sock_dir / "s.sock"), ServiceClient(sock_dir / "s.sock", config=cfg) as client:
        there = client.evaluate(TASK, load_candidate(CORRECT))  # the client's config, as an Evaluator's
        info = ping(sock_dir / "s.sock")
    assert here.correct and there.correct, there.reasons
    assert there.reward >= 1 and there.failures == []
    assert [t["seed"] for t in there.trials] == [t["seed"] for t in here.trials]
    assert there.errors == here.errors  # the same inputs, the same outputs
    assert there.times_ms["candidate"] is not None and there.timing_check["tampered"] is False
    assert info["served"] == 1 and info["in_flight"] == 0 and info["device"] == "cpu"


def test_several_clients_are_served_at_once(cache_dir, sock_dir):
    cfg = _cfg(cache_dir)
    results = []
    with running(cfg, sock_dir / "s.sock", jobs=2):
        def client() -> None:
            with ServiceClient(sock_dir / "s.sock") as c:
                results.append(c.evaluate(TASK, load_candidate(CORRECT), cfg))

        threads = [threading.Thread(target=client) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        info = ping(sock_dir / "s.sock")
    assert len(results) == 3 and all(r.correct for r in results), [r.reasons for r in results]
    assert info["served"] == 3 and info["workers"]["workers"] >= 6  # a judge and a runner each


def test_a_crashing_candidate_costs_its_verdict_and_not_the_service(cache_dir, sock_dir, tmp_path):
    cfg = _cfg(cache_dir)
    with running(cfg, sock_dir / "s.sock"), ServiceClient(sock_dir / "s.sock") as client:
        crashed = client.evaluate(TASK, _case("cat13_segfault", tmp_path), cfg)
        after = client.evaluate(TASK, load_candidate(CORRECT), cfg)
    assert Code.CRASH in [r.code for r in crashed.failures], crashed.reasons
    assert after.correct, after.reasons


CLIENT = """
import sys
from cuda_agent.evaluate import EvalConfig, load_candidate
from cuda_agent.evaluate.service import ServiceClient
from cuda_agent.tasks import load_task
cfg = EvalConfig(device="cpu", policy="kernelbench", cache_dir=sys.argv[2], timing=False, timeout_s=120)
with ServiceClient(sys.argv[1]) as c:
    c.evaluate(load_task(sys.argv[3]), load_candidate(sys.argv[4]), cfg)
"""


def test_a_killed_client_takes_its_queued_evaluation_with_it(cache_dir, sock_dir, tmp_path):
    """With one evaluation at a time, a hanging candidate holds the service; a second client that is
    killed while its evaluation waits leaves nothing to run, and the hang ends at its time limit."""
    cfg = _cfg(cache_dir)
    path = sock_dir / "s.sock"
    with running(cfg, path, jobs=1), ServiceClient(path) as client:
        hang = client.submit(TASK, _case("cat13_hang", tmp_path), _cfg(cache_dir, timeout_s=20))
        _wait(lambda: ping(path)["in_flight"] == 1, what="the hang to start")
        other = subprocess.Popen([sys.executable, "-c", CLIENT, str(path), str(cache_dir), TASK.origin,
                                  str(CORRECT)])
        _wait(lambda: ping(path)["in_flight"] == 2, what="the second client to queue")
        other.kill()
        other.wait()
        _wait(lambda: ping(path)["cancelled"] == 1, what="the queued evaluation to be dropped")
        res = hang.result(timeout=300)
        info = ping(path)
    assert Code.TIMEOUT in [r.code for r in res.failures], res.reasons
    assert info["served"] == 1 and info["in_flight"] == 0  # the killed client's evaluation never ran


def _ping_as_nobody(path: Path) -> str:
    """Ping the service from a forked child that has become user nobody: "answered", or why not. A
    fork, not a new interpreter: nobody may not be able to run this machine's Python at all."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: socket calls only, then _exit
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(30)
                s.connect(str(path))
                s.sendall(b'{"op": "ping"}\n')
                answer = json.loads(s.makefile().readline())
            said = "answered" if answer.get("ok") else f"refused: {answer.get('error')}"
        except OSError as exc:
            said = f"refused: {exc}"
        os.write(w, said.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = f.read()
    os.waitpid(pid, 0)
    return said


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_is_refused(cache_dir, sock_dir):
    os.chmod(sock_dir, 0o755)  # the test's folder is open; the socket's own folder is private
    path = sock_dir / "private" / "s.sock"
    with running(_cfg(cache_dir), path, warm=0) as service:
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        said = _ping_as_nobody(path)
        assert said.startswith("refused") and "Permission denied" in said, said
        # where the folder and the socket let anyone in (a system that ignores their modes), the
        # service itself checks who is calling
        os.chmod(path.parent, 0o755)
        os.chmod(path, 0o666)
        said = _ping_as_nobody(path)
        assert said == "refused: this service serves uid 0 only", said
        assert service.refused == 1
        assert ping(path)["served"] == 0  # its own user is still served


def test_the_socket_folder_must_be_private(sock_dir):
    made = private_dir(sock_dir / "new")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    open_dir = sock_dir / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    with pytest.raises(ServiceError, match="mode 0700"):
        private_dir(open_dir)


def test_one_service_per_socket_and_a_dead_ones_socket_is_taken_over(cache_dir, sock_dir):
    path = sock_dir / "s.sock"
    with running(_cfg(cache_dir), path, warm=0):
        with pytest.raises(ServiceError, match="already listens"):
            Service(_cfg(cache_dir), path, warm=0)
    assert not path.exists()  # removed on the way out
    path.write_text("a user's file")  # never taken for a dead service's socket
    with pytest.raises(ServiceError, match="not a socket"):
        Service(_cfg(cache_dir), path, warm=0)
    assert path.read_text() == "a user's file"
    path.unlink()
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))  # the socket file of a service that died without removing it
    dead.close()
    with running(_cfg(cache_dir), path, warm=0):
        assert ping(path)["served"] == 0
    # one that is idle for longer than it was told to wait exits by itself
    with running(_cfg(cache_dir), path, warm=0, idle_exit_s=1.0):
        _wait(lambda: not path.exists(), timeout=30, what="the idle service to exit")
    with pytest.raises(ServiceError, match="no service answers"):
        ping(path)


def test_connect_says_when_and_why_it_evaluates_in_process(cache_dir, sock_dir, tmp_path):
    path = sock_dir / "s.sock"
    cfg = _cfg(cache_dir)
    assert connect(cfg, "off", path) == (None, "evaluating in-process (--service off)")
    client, how = connect(cfg, "auto", path)
    assert client is None and "no service at" in how and "cuda-agent serve" in how
    with running(cfg, path, warm=0):
        client, how = connect(_cfg(tmp_path / "other-cache"), "auto", path)
        assert client is None and "uses the cache" in how
        client, how = connect(cfg, "auto", path)
        assert client is not None and how.startswith("evaluating through the service")
        assert client.config is cfg  # evaluations without a config of their own run with this one
        with client:
            [res] = client.map([(TASK, load_candidate(CORRECT))])  # as bench's runner submits
        assert res.correct, res.reasons
        assert res.config["policy"] == "kernelbench" and res.config["cache_dir"] == str(cache_dir)


def _cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuda_agent", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_eval_starts_the_service_and_serve_reports_and_stops_it(cache_dir, sock_dir):
    path = sock_dir / "s.sock"
    env = {**os.environ, "CUDA_AGENT_SOCKET": str(path), "CUDA_AGENT_CACHE": str(cache_dir)}
    args = ["eval", TASK.origin, str(CORRECT), "--device", "cpu", "--policy", "kernelbench", "--no-timing", "--json"]
    out = _cli(*args, "--service", "start", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["correct"] is True
    assert "started the service" in out.stderr
    out = _cli(*args, env=env)  # --service auto: the running one
    assert out.returncode == 0 and "evaluating through the service" in out.stderr, out.stderr
    status = _cli("serve", "--status", "--json", env=env)
    info = json.loads(status.stdout)
    assert info["served"] == 2 and info["cache_dir"] == str(cache_dir)
    stopped = _cli("serve", "--stop", env=env)
    assert stopped.returncode == 0 and f"pid {info['pid']}" in stopped.stdout
    assert not path.exists()
    _wait(lambda: not Path(f"/proc/{info['pid']}").exists() or
          Path(f"/proc/{info['pid']}/stat").read_text().split()[2] == "Z", timeout=60, what="the service to exit")
    again = _cli("serve", "--stop", env=env)
    assert again.returncode == 2 and "no service answers" in again.stderr


def test_sigterm_stops_the_service_cleanly(cache_dir, sock_dir):
    path = sock_dir / "s.sock"
    proc = subprocess.Popen([sys.executable, "-m", "cuda_agent", "serve", "--device", "cpu", "--socket", str(path),
                             "--cache-dir", str(cache_dir)], stdout=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline())["serving"]
    assert first["pid"] == proc.pid and Path(first["socket"]) == path
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0
    assert not path.exists()
    with pytest.raises(ServiceError):
        stop(path)
