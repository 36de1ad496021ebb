"""Escape: candidate code that reaches outside its own process (DESIGN section 3, category 14). Each
candidate below tries one way out: the evaluator's installed package, its cache and the baselines'
secret, the home folder, the network, the machine's service sockets, a process that outlives its
evaluation, a fork storm, a huge file, a compile that includes a file outside its folder, a build
that reads the candidate's folder for a later candidate, and the agent's `model_new.py` printing a
file through the workspace's verify. Every one must fail with nothing changed outside the
candidate's folder, and with the verdict the kernel deserves: a wrong kernel stays -1, an honest
kernel that merely tried stays correct.

The static policy is off (`policy="none"`): what is tested is the operating-system sandbox
(`cuda_agent.sandbox`, `evaluate/isolate.py`), not the rules on names. Evaluations run with
`isolation="required"`, so a machine that cannot make a sandbox skips these tests instead of
passing them unsandboxed.
"""

from __future__ import annotations

import hashlib
import json
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import share_session_builds

from cuda_agent import sandbox
from cuda_agent.evaluate import EvalConfig, evaluate, load_candidate
from cuda_agent.tasks import load_task

pytestmark = [pytest.mark.adversarial,
              pytest.mark.skipif(not sandbox.support().ok, reason=f"no sandbox here: {sandbox.support().error}")]

TASK = Path(__file__).parent / "data" / "relu_bias_task.py"
PACKAGE = Path(importlib.util.find_spec("cuda_agent").origin).parent
HONEST = "torch.relu(x + self.bias)"
WRONG = "x + self.bias"  # no relu: wrong on every negative element


def candidate(setup: str, answer: str = HONEST) -> str:
    """A single-file candidate (kernelbench-style, torch ops in forward) that runs `setup` at import."""
    return textwrap.dedent('''\
        import os, sys, socket, subprocess, time
        import torch
        import torch.nn as nn

        def _attempt():
        {setup}

        try:
            _attempt()
        except BaseException as exc:  # the attempt fails; the kernel stays what it is
            print("attempt failed:", type(exc).__name__, exc)

        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(features))

            def forward(self, x):
                return {answer}
        ''').format(setup=textwrap.indent(textwrap.dedent(setup), "    "), answer=answer)


def digest(root: Path) -> dict[str, str]:
    """Every file under `root` and its content's hash (what must not change)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def world(tmp_path, monkeypatch, cache_dir):
    """A home folder with a secret, a cache with the baselines' secret (and the session's
    precompiled headers), and the package: the places an escape would change."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("HOME-SECRET-" + uuid.uuid4().hex)
    (home / "project").mkdir()  # a project of the caller's, with its keys
    (home / "project" / ".env").write_text("API_KEY=HOME-SECRET-" + uuid.uuid4().hex)
    cache = tmp_path / "cache"
    (cache / "baselines").mkdir(parents=True)
    (cache / "baselines" / ".secret").write_text("CACHE-SECRET-" + uuid.uuid4().hex)
    (cache / "baselines" / "entry.json").write_text('{"eager_ms": 1.0}')
    share_session_builds(cache, cache_dir)
    monkeypatch.setenv("HOME", str(home))
    before = {"home": digest(home), "cache": digest(cache / "baselines"), "package": digest(PACKAGE)}
    yield {"home": home, "cache": cache, "tmp": tmp_path, "before": before}
    after = {"home": digest(home), "cache": digest(cache / "baselines"), "package": digest(PACKAGE)}
    assert after == before, "a candidate changed a file outside its folder"


def run(world, source: str, timeout_s: float = 120, timing: bool = False):
    path = world["tmp"] / f"cand_{uuid.uuid4().hex[:8]}.py"
    path.write_text(source)
    cfg = EvalConfig(device="cpu", policy="none", isolation="required", timing=timing, trials=2, stress_trials=0,
                     cache_dir=world["cache"], timeout_s=timeout_s)
    return evaluate(load_task(TASK), load_candidate(path), cfg)


def output(res) -> str:
    return res.candidate_output.get("stdout", "") + res.candidate_output.get("stderr", "")


def test_a_wrong_kernel_that_patches_the_installed_comparison_stays_wrong(world):
    target = PACKAGE / "evaluate" / "compare.py"
    res = run(world, candidate(f'''
        with open({str(target)!r}, "a") as f:
            f.write("\\n# escaped\\n")
        ''', answer=WRONG))
    assert res.isolation["level"] == "sandbox"
    assert res.reward == -1 and not res.correct
    # (read-only mounts; as the sandbox's own user, the installation's files are not its to write either)
    assert "Read-only file system" in output(res) or "Permission denied" in output(res)


@pytest.mark.parametrize("script_in", [None, "home", "/tmp", "project"])
def test_the_cache_the_secret_and_the_home_folder_are_out_of_sight(world, monkeypatch, script_in):
    """Also where the caller's script lies in the home folder, /tmp or a project folder in the home
    folder, which puts that folder on sys.path (what the sandbox binds back for Python to read)."""
    cache, home = world["cache"], world["home"]
    project = home / "project"
    if script_in:
        folder = {"home": str(home), "/tmp": "/tmp", "project": str(project)}[script_in]
        monkeypatch.syspath_prepend(folder)
        monkeypatch.chdir(folder)
    res = run(world, candidate(f'''
        for p in [{str(cache / "baselines" / ".secret")!r}, {str(home / ".ssh" / "id_ed25519")!r},
                  {str(project / ".env")!r}]:
            try:
                print("READ", open(p).read())
            except OSError as exc:
                print("no", p, exc)
        for p in [{str(cache / "baselines" / "entry.json")!r}, {str(home / "planted")!r}]:
            try:
                with open(p, "w") as f:
                    f.write("{{}}")
            except OSError as exc:
                print("no", p, exc)
        '''))
    assert res.correct and res.reward == 1, res.reasons
    assert "SECRET" not in output(res) and "READ" not in output(res)
    assert not (home / "planted").exists()


def test_no_capability_no_mount_and_no_sysctl_of_the_host(world):
    """Where the caller is root, a sandbox whose user were root in its namespace (bwrap keeps
    every capability there) could unmount what hides the home folder, remount the read-only view
    writable, and write the host's sysctls (root's by uid: core_pattern runs a program as root on
    the next crash). The candidate tries each, and in a user namespace of its own too."""
    home = world["home"]
    res = run(world, candidate(f'''
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        status = open("/proc/self/status").read()
        print("CAPS", status.split("CapEff:")[1].split()[0], "UID", os.getuid())

        def escape(who):
            for path in [{str(home)!r}, "/root", "/tmp", "/run"]:
                if libc.umount2(path.encode(), 2) == 0:  # MNT_DETACH
                    print(who, "UNMOUNTED", path, os.listdir(path))
            if libc.mount(None, b"/", None, 32 | 4096, None) == 0:  # MS_REMOUNT | MS_BIND: writable
                print(who, "REMOUNTED")
                open({str(PACKAGE / "escaped")!r}, "w").write("x")
            try:
                with open("/proc/sys/kernel/core_pattern", "r+") as f:  # the same value back
                    f.write(f.read())
                print(who, "WROTE A SYSCTL")
            except OSError as exc:
                print(who, "no sysctl:", exc)
            print(who, "READ", open({str(home / ".ssh" / "id_ed25519")!r}).read())

        pid = os.fork()
        if pid == 0:  # a user namespace of its own, where it holds every capability again
            try:
                if libc.unshare(0x10000000 | 0x00020000) == 0:  # CLONE_NEWUSER | CLONE_NEWNS
                    escape("NESTED")
                else:
                    print("no user namespace:", os.strerror(ctypes.get_errno()))
            except BaseException as exc:
                print("nested attempt failed:", exc)
            os._exit(0)
        os.waitpid(pid, 0)
        escape("SANDBOX")
        '''))
    out = output(res)
    assert res.correct and res.reward == 1, (res.reasons, out)
    assert "CAPS 0000000000000000" in out, out
    for word in ("UNMOUNTED", "REMOUNTED", "WROTE A SYSCTL", "SECRET"):
        assert word not in out, out
    assert "SANDBOX no sysctl" in out and "attempt failed" in out, out
    if os.geteuid() == 0:  # not root, even in its own namespace: root's files stay root's
        assert "UID 0" not in out and res.isolation["user"].startswith("uid "), (out, res.isolation["user"])


def test_no_network_not_even_the_loopback(world):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.settimeout(0.2)
    accepted = []

    def serve():
        end = time.monotonic() + 60
        while time.monotonic() < end and not accepted:
            try:
                accepted.append(server.accept())
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        res = run(world, candidate(f'''
            s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
            s.sendall(b"escaped")
            '''))
    finally:
        time.sleep(0.5)
        server.close()
    assert not accepted
    assert res.correct and "attempt failed" in output(res)


@pytest.mark.skipif(not os.access("/run", os.W_OK), reason="needs a folder of its own under /run (root)")
def test_no_service_socket_of_the_machine_not_even_through_a_read_only_mount(world):
    """A Unix socket is connected to through a read-only mount and from another network
    namespace; the machine's services keep theirs under /run (Docker's answers root, whose uid a
    root caller's sandbox keeps). A root-only one here: the candidate must not reach it."""
    folder = Path(tempfile.mkdtemp(prefix="cuda-agent-test-", dir="/run"))
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "service.sock"))
    server.listen()
    served = []
    threading.Thread(target=lambda: served.append(server.accept()), daemon=True).start()
    try:
        res = run(world, candidate(f'''
            s = socket.socket(socket.AF_UNIX)
            s.connect({str(folder / "service.sock")!r})
            print("CONNECTED")
            '''))
        assert res.correct and "CONNECTED" not in output(res) and "attempt failed" in output(res), output(res)
        assert not served
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_detached_process_dies_with_its_evaluation(world):
    marker = world["tmp"] / "written-later"
    res = run(world, candidate(f'''
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3); open({str(marker)!r}, 'w').write('x')"],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        '''))
    time.sleep(5)
    assert not marker.exists()
    assert res.reward in (-1, 1)  # an honest kernel; the evaluator may still count the child against it
    alive = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True).stdout
    assert alive == ""


DAEMON = """
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "daemon-up-{pid}"), "w").close()  # it exists now
t = time.time()
while time.time() - t < 60:  # burn a core whenever the candidate is stopped (its baselines being timed)
    try:
        state = open("/proc/%d/stat" % {pid}).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        break
    if state == "T":
        end = time.time() + 0.01
        while time.time() < end:
            pass
    else:
        time.sleep(0.001)
"""


def test_a_double_forked_process_is_hidden_work_and_stops_with_the_candidate(world):
    """A process that leaves the candidate's process group and its parent (double fork, new
    session) escapes the guard's check of its children and a process-group stop; it stays in the
    sandbox's process tree. After `load`, the harness finds it: `hidden_work`, no timing, nothing
    cached. And stopping the sandbox stops it too."""
    res = run(world, candidate(f'''
        subprocess.run([sys.executable, "-c", {DAEMON!r}.format(pid=os.getpid())])
        up, t = os.path.join(os.environ.get("TMPDIR", "/tmp"), "daemon-up-%d" % os.getpid()), time.time()
        while not os.path.exists(up) and time.time() - t < 30:  # `load` ends once the daemon runs
            time.sleep(0.01)
        '''), timing=True)
    assert res.reward == -1 and [r.code.value for r in res.reasons] == ["hidden_work"], res.reasons
    assert "started by the candidate" in res.reasons[0].message and "after `load`" in res.reasons[0].message
    assert not any(res.times_ms.values())


def test_stopping_a_sandbox_stops_every_process_in_it(tmp_path):
    """`sandbox.stop` on a sandbox's tree: a grandchild in a session of its own is stopped too."""
    sup = sandbox.reaching(sandbox.support(), [tmp_path], "the test")
    sandbox.hand_over(tmp_path, sup)
    spec = sandbox.Spec(writable=[str(tmp_path)], cwd=str(tmp_path))
    script = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork(): os._exit(0)\n"
              "    open('ready', 'w').close()\n    time.sleep(60)\ntime.sleep(60)")
    proc = sandbox.start(spec, [sys.executable, "-c", script], sup, start_new_session=True)

    def pythons() -> list[int]:
        return [p for p in sandbox.tree([proc.pid])
                if sandbox.describe(p).split("(", 1)[-1].startswith(f"{sys.executable} -c")]

    def session(pid: int) -> str:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3]

    try:
        # Listed only once the middle process is gone: a listing taken before it exits holds it,
        # and it may exit (not stop) once it is signalled.
        deadline = time.monotonic() + 30
        while not ((tmp_path / "ready").exists() and len(pythons()) == 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        found = pythons()
        assert len(found) == 2, [sandbox.describe(p) for p in sandbox.tree([proc.pid])]
        assert session(found[0]) != session(found[1])  # the grandchild left the parent's session
        stopped = sandbox.stop([proc.pid])
        assert set(found) <= stopped
        deadline = time.monotonic() + 10  # `stop` waits 1 s; a loaded machine may take longer
        while any(sandbox.state(p) != "T" for p in found) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [sandbox.state(p) for p in found] == ["T", "T"]
        sandbox.cont(stopped)
        assert all(sandbox.state(p) in ("S", "R") for p in found), [sandbox.state(p) for p in found]
    finally:
        proc.kill()
        proc.wait()


def test_a_fork_storm_and_a_huge_file_end_the_evaluation_not_the_machine(world):
    res = run(world, candidate('''
        kids = []
        for _ in range(100000):
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            kids.append(pid)
        '''), timeout_s=60)
    said = (res.reasons, res.isolation.get("limits_hit"), output(res)[-2000:])
    assert not res.correct or "attempt failed" in output(res), said
    if sandbox.support().cgroup:  # the limit is the sandbox's process count: the verdict names it
        assert "pids" in res.isolation["limits_hit"] and "limit_exceeded" in [r.code.value for r in res.reasons], said
    res = run(world, candidate('''
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        with open("big", "wb") as f:
            f.seek(100 << 30)
            f.write(b"x")
        '''))
    assert res.correct and "File too large" in output(res), (sandbox.support(), res.reasons, output(res)[-2000:])


def test_filling_the_disk_ends_the_evaluation_at_the_sandboxs_limit(world, monkeypatch):
    """The candidate's folders are on the machine's disk: writing without end is stopped at the
    sandbox's disk limit (here lowered to 64 MiB), with a verdict that names it, and its files go."""
    from cuda_agent.evaluate import isolate

    monkeypatch.setattr(isolate, "DISK_BYTES", 64 << 20)
    res = run(world, candidate('''
        chunk = os.urandom(1 << 20)
        for i in range(100000):
            with open(f"fill{i}", "wb") as f:
                for _ in range(16):
                    f.write(chunk)
        '''), timeout_s=60)
    assert res.reward == -1 and "limit_exceeded" in [r.code.value for r in res.reasons], res.reasons
    assert "disk" in res.isolation["limits_hit"]
    assert "disk (64 MiB" in next(r.message for r in res.reasons if r.code.value == "limit_exceeded")
    assert not list(Path(tempfile.gettempdir()).glob("cuda-agent-eval-*/stage/fill0"))


def test_a_compile_cannot_include_a_file_outside_its_folder(world):
    secret = world["cache"] / "baselines" / ".secret"
    res = run(world, candidate(f'''
        from torch.utils.cpp_extension import load_inline
        load_inline("leak", cpp_sources='#include "{secret}"\\nint f() {{ return 0; }}', functions=["f"],
                    extra_cflags=["-O2"])  # (the adversarial suite's flags: the session's header serves it)
        '''))
    assert "SECRET" not in output(res) and "SECRET" not in " ".join(r.message for r in res.reasons)
    assert res.correct and "attempt failed" in output(res)


def test_verify_in_a_workspace_cannot_print_a_file_outside_it(world, tmp_path, monkeypatch):
    """The agent's verify runs `model_new.py` in the evaluator: the sandbox, not the agent's shell,
    is what keeps it from the caller's files (here the bundled example's workspace, which prints
    a file of the home folder at import)."""
    import shutil

    from cuda_agent.workspace import init_workspace

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(world["cache"]))
    example = PACKAGE / "examples" / "elementwise"
    secret = world["home"] / ".ssh" / "id_ed25519"
    ws = init_workspace(load_task(example / "task.py"), tmp_path / "ws", device="cpu")
    shutil.rmtree(ws / "kernels")
    shutil.copytree(example / "cpu_workspace" / "kernels", ws / "kernels")
    model_new = (example / "cpu_workspace" / "model_new.py").read_text()
    (ws / "model_new.py").write_text(f"try:\n    print(open({str(secret)!r}).read())\nexcept OSError as e:\n"
                                     f"    print('no:', e)\n" + model_new)
    env = {**os.environ, "CUDA_AGENT_CACHE": str(world["cache"]), "CUDA_AGENT_SERVICE": "off"}
    r = subprocess.run([sys.executable, "-m", "cuda_agent", "workspace", "verify", str(ws), "--device", "cpu",
                        "--trials", "1"], capture_output=True, text=True, timeout=900, env=env)
    assert "HOME-SECRET" not in r.stdout + r.stderr
    assert "verification: PASSED" in r.stdout, r.stdout + r.stderr


def test_verify_does_not_follow_a_workspace_link_out_of_it(world, tmp_path, monkeypatch):
    """The evaluator reads the workspace outside any sandbox: a `model_new.py` (or `kernels/`)
    that the agent's shell linked to a file of the caller's would be read as its source, and the
    syntax error quoting it would show it to the model. A link that stays in the workspace is fine."""
    from cuda_agent.workspace import init_workspace

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(world["cache"]))
    example = PACKAGE / "examples" / "elementwise"
    ws = init_workspace(load_task(example / "task.py"), tmp_path / "ws", device="cpu")
    (ws / "model_new.py").unlink()
    (ws / "model_new.py").symlink_to(world["home"] / ".ssh" / "id_ed25519")
    env = {**os.environ, "CUDA_AGENT_CACHE": str(world["cache"]), "CUDA_AGENT_SERVICE": "off"}
    verify = [sys.executable, "-m", "cuda_agent", "workspace", "verify", str(ws), "--device", "cpu", "--trials", "1"]
    r = subprocess.run(verify, capture_output=True, text=True, timeout=900, env=env)
    assert "HOME-SECRET" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert r.returncode != 0 and "outside the workspace" in r.stdout + r.stderr, r.stdout + r.stderr
    shutil.rmtree(ws / "kernels")
    (ws / "mine").mkdir()
    shutil.copytree(example / "cpu_workspace" / "kernels", ws / "mine" / "kernels")
    (ws / "kernels").symlink_to("mine/kernels")
    (ws / "mine" / "model_new.py").write_text((example / "cpu_workspace" / "model_new.py").read_text())
    (ws / "model_new.py").unlink()
    (ws / "model_new.py").symlink_to(ws / "mine" / "model_new.py")
    r = subprocess.run(verify, capture_output=True, text=True, timeout=900, env=env)
    assert "verification: PASSED" in r.stdout, r.stdout + r.stderr


def test_nvccs_headers_asked_for_by_a_sandboxed_build_are_built_by_the_harness_under_its_own_key(tmp_path):
    """A sandboxed build cannot write the cache's headers for nvcc's final compile; it leaves a
    request (the compile's command and cudafe++'s output) that the harness turns into a header in
    a sandbox of its own, under the key it derives itself: the file name a request was given does
    not decide where its header goes. A prefix gets a header the second time it is seen."""
    from cuda_agent.evaluate.isolate import Builds, CandidateBox
    from cuda_agent.evaluate.worker import nvcc_pch

    box = CandidateBox(sandbox.support(), tmp_path / "cache", None, gpu=False)
    try:
        builds = Builds(box, 300)
        prefix = "".join(f"int declared_{i}(int);\n" for i in range(nvcc_pch.MIN_PREFIX_BYTES // 20 + 1000))
        text = f'# 1 "unit.cu"\n{prefix}# 3 "unit.cu"\nint own() {{ return declared_1(2); }}\n'.encode()
        source = str(tmp_path / "unit.cudafe1.cpp")
        argv = ["c++", "-c", source, "-o", str(tmp_path / "unit.o")]
        from cuda_agent.evaluate.process import scrubbed_env

        key = nvcc_pch.split(text, argv, source, scrubbed_env({})).key
        root = tmp_path / "cache" / "pch-nvcc"
        for sighting in (1, 2):
            requests = tmp_path / f"requests{sighting}"
            requests.mkdir()
            (requests / "forged-key.json").write_text(json.dumps({"argv": argv, "source": source}))
            (requests / "forged-key.cpp").write_bytes(text)
            builds._nvcc_headers(requests)
            assert not requests.exists()
            assert (root / f"{key}.seen").exists()
            assert (root / key / f"{nvcc_pch.HEADER}.gch").is_file() == (sighting == 2)
        assert not (root / "forged-key").exists()
    finally:
        box.close()


def test_a_drafted_task_is_probed_in_the_sandbox(world):
    """synth's probes run drafted tasks (an LLM's code under `--composer llm`) in a sandbox of their
    own: a draft that writes into the home folder and the cache at import, and leaves a detached
    process behind, changes nothing outside and gets its probe process replaced; its verdict is
    still the task's own (it is a fine task otherwise), timed under the device lock that the pool
    holds for it."""
    from cuda_agent.synth.filters import ProbePool

    marker = world["home"] / "draft-was-here"
    source = textwrap.dedent(f'''\
        import os, subprocess, sys
        import torch
        import torch.nn as nn

        for target in ({str(marker)!r}, {str(world["cache"] / "baselines" / "entry.json")!r}):
            try:
                open(target, "w").write("x")
            except OSError as exc:
                print("write failed:", exc)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)

        class Model(nn.Module):
            def forward(self, x):
                return torch.tanh(x) * 2

        batch_size = 64

        def get_inputs():
            return [torch.randn(batch_size, 4096)]

        def get_init_inputs():
            return []
        ''')
    pool = ProbePool("cpu", 1, [None], world["tmp"] / "probe.log", world["cache"], timeout_s=180,
                     window_ms=(0.001, 1000.0), isolation="required")
    try:
        first = pool._all[0]
        v = pool.fit(source, "draft", scalable=False)
        assert v.ok, v.message
        assert pool._all[0] is not first  # replaced: the sleeper it left would meet the next draft
        assert not first.box.work.exists()  # its sandbox ended with it
    finally:
        pool.close()
    assert not marker.exists()
    assert "write failed" in (world["tmp"] / "probe.log").read_text()


@pytest.fixture
def open_tmp():
    """A temporary folder every user may enter down to (pytest's own root is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="cuda-agent-test-"))
    path.chmod(0o755)
    yield path
    for d, _, _ in os.walk(path):
        os.chmod(d, 0o755)
    shutil.rmtree(path, ignore_errors=True)


def test_a_cache_the_sandbox_user_cannot_enter_has_its_views_moved_where_it_can(open_tmp, monkeypatch):
    """Where sandboxes run as their own user (root callers) and a folder above the cache is 0700
    (root's home holding the default cache, pytest's temporary root), bwrap cannot bind the cache's
    builds and headers: they move to a folder of this cache's own that the user can reach, linked
    from the cache, and bwrap is given the real folders at the cache's paths."""
    from cuda_agent.evaluate import isolate

    private = open_tmp / "home"
    cache = private / "cache"
    (cache / "builds" / "old").mkdir(parents=True)
    private.chmod(0o700)
    uid = os.geteuid() + 4242  # no owner of anything here: "others" bits decide
    assert sandbox.unreachable(cache, uid) == str(private)
    parent = open_tmp / "var-tmp"
    parent.mkdir()
    monkeypatch.setattr(isolate, "VIEWS_PARENT", str(parent))
    views = isolate.cache_views(cache, uid)
    assert views == [str(cache / name) for name in isolate.VIEWS]
    for v in views:
        real = Path(os.path.realpath(v))
        assert Path(v).is_symlink() and real.is_dir() and parent in real.parents
        assert sandbox.unreachable(real, uid) is None
    assert not (cache / "builds" / "old").exists()  # what was there is built again, not half moved
    (cache / "builds" / "lib.so").write_bytes(b"x")  # the harness writes through the link
    sup = sandbox.Support("/bin/bwrap", "bubblewrap 0.11.0", uid, None, None, None)
    argv = sandbox.command(sandbox.Spec(readable=views, hidden=[str(cache)]).with_defaults(), ["true"], sup)
    binds = {argv[i + 2]: argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert binds[str(cache / "builds")] == os.path.realpath(cache / "builds")
    # a reachable cache keeps its folders
    open_cache = open_tmp / "open" / "cache"
    assert isolate.cache_views(open_cache, uid) and not (open_cache / "builds").is_symlink()
    # a views folder someone else made first (VIEWS_PARENT is writable by all) is not used
    if os.geteuid() != 0:
        return  # (making a folder another user's takes root)
    other = open_tmp / "home2"
    (other / "cache").mkdir(parents=True)
    other.chmod(0o700)
    taken = Path(isolate.VIEWS_PARENT) / f"cuda-agent-views-{os.geteuid()}" / \
        hashlib.sha256(str((other / "cache").resolve()).encode()).hexdigest()[:16]
    taken.mkdir()
    os.chown(taken, uid, uid)
    isolate.cache_views(other / "cache", uid)
    assert not (other / "cache" / "builds").is_symlink()


def test_what_is_bound_back_never_shows_what_is_hidden(open_tmp, monkeypatch):
    """Of the folders Python must read (bound back where a hidden folder covers them): one that is
    a hidden folder, or holds the machine's (a home folder, /tmp), is not bound; one that holds a
    hidden folder of the evaluator's (a cache) is, and that folder is hidden again over it."""
    home, project = open_tmp / "home", open_tmp / "home" / "project"
    cache = project / ".cache" / "cuda-agent"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    spec = sandbox.Spec(readable=[str(home), "/tmp", str(project), str(cache)], hidden=[str(cache)]).with_defaults()
    argv = sandbox.command(spec, ["true"], sandbox.Support("/bin/bwrap", "bubblewrap 0.11.0", None, None, None, None))
    bound = [argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert str(project) in bound and not {str(home), "/tmp", str(cache)} & set(bound)
    mounts = [(a, argv[i + 1]) for i, a in enumerate(argv) if a in ("--tmpfs", "--ro-bind")]
    assert mounts.index(("--tmpfs", str(cache))) > mounts.index(("--ro-bind", str(project)))
    assert mounts.index(("--tmpfs", str(home))) < mounts.index(("--ro-bind", str(project)))


def test_a_sandbox_bwrap_cannot_make_is_an_error_with_bwraps_message(tmp_path):
    """Where bwrap exits before its sandbox begins (here a stand-in that fails as bwrap does), the
    start raises bwrap's own message, not a broken pipe."""

    class Joined:  # a cgroup the sandbox joins (the start then waits on bwrap's report)
        dirs = [tmp_path]

        def add(self, pid):
            pass

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho \"bwrap: Can't mount tmpfs on /newroot/tmp: Operation not permitted\" >&2\nexit 1\n")
    fake.chmod(0o755)
    sup = sandbox.Support(str(fake), "bubblewrap 0.11.0", None, "v2", None, None)
    with pytest.raises(sandbox.SandboxError, match="bwrap could not make the sandbox .exit status 1.: bwrap: Can't mount"):
        sandbox.start(sandbox.Spec(), ["true"], sup, Joined(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_folder_the_sandbox_user_cannot_reach_is_an_error_that_names_it(open_tmp):
    """Rather than bwrap failing at setup (a broken pipe at the evaluator), the start says which
    folder its user cannot enter and what to do."""
    private = open_tmp / "private"
    (private / "work").mkdir(parents=True)
    private.chmod(0o700)
    uid = os.geteuid() + 4242
    sup = sandbox.Support("/bin/bwrap", "bubblewrap 0.11.0", uid, None, None, None)
    with pytest.raises(sandbox.SandboxError, match=f"cannot enter {private}.*o\\+x"):
        sandbox.start(sandbox.Spec(writable=[str(private / "work")]), ["true"], sup)
    # a caller's sandbox there runs as the caller; a folder of the caller's own, 0700 as mkdtemp
    # makes them, is handed over to the sandbox's user: only the way to it counts
    assert sandbox.reaching(sup, [private / "work"], "the test").uid is None
    mine = Path(tempfile.mkdtemp(dir=open_tmp))
    assert sandbox.reaching(sup, [mine], "the test").uid == uid


def test_a_build_that_reads_the_candidates_folder_unnamed_is_not_shared(world):
    """A build's key is its inputs; one whose ninja file reads the candidate's folder without
    naming it (a glob) would publish, under inputs another candidate may send too, what the first
    candidate's files made. The folder is in a build's view only where its inputs name it."""
    def builder(tag):
        return candidate(f'''
            # {tag}
            import glob
            from cuda_agent.evaluate.worker import serve
            d = "/tmp/cuda-agent-builds/globbed"
            os.makedirs(d, exist_ok=True)
            with open(d + "/build.ninja", "w") as f:
                f.write("rule grab\\n  command = cat /tmp/cuda-agent-eval-*/stage/*.py > $out\\nbuild out.so: grab\\n")
            print("BUILD", serve.request("ninja", dir=d))
            with open(d + "/out.so") as f:
                print("TAGS", sorted(set(t for t in ("TAG-A", "TAG-B") if t in f.read())))
            ''')
    a = run(world, builder("TAG-A"))
    assert "TAG-A" not in output(a).split("TAGS", 1)[-1], output(a)  # (its own folder is not in view either)
    b = run(world, builder("TAG-B"))
    assert "TAG-A" not in output(b).split("TAGS", 1)[-1], output(b)


def test_a_build_that_leaves_links_gets_neither_a_file_nor_a_write_outside(world):
    """The harness copies a build's outputs to the candidate and writes the build's log into its
    folder, outside the sandbox: links the build left there (its output to the home folder's key,
    its log to a file of the home folder's) must be dropped, not followed."""
    home = world["home"]
    res = run(world, candidate(f'''
        from cuda_agent.evaluate.worker import serve
        d = "/tmp/cuda-agent-builds/linked"
        os.makedirs(d, exist_ok=True)
        with open(d + "/build.ninja", "w") as f:
            f.write("rule link\\n  command = ln -sf {home / ".ssh" / "id_ed25519"} out.so && "
                    "ln -sf {home / "planted"} .cuda-agent-log && echo WRITTEN-BY-THE-BUILD\\n"
                    "build out.so: link\\n")
        print("BUILD", serve.request("ninja", dir=d))
        print("GOT", open(d + "/out.so").read())
        '''))
    out = output(res)
    assert res.correct, (res.reasons, out)
    assert "BUILD" in out and "SECRET" not in out, out
    assert not (home / "planted").exists()


def test_load_builds_sources_from_the_candidates_own_folder(world):
    """The honest case beside the one above: `load` of a source file in the candidate's folder
    names it in the ninja file, so that build sees the folder."""
    res = run(world, candidate('''
        from torch.utils.cpp_extension import load
        with open("plus.cpp", "w") as f:
            f.write("#include <pybind11/pybind11.h>\\n"  # (not torch's headers: a quicker build)
                    "int plus(int x) { return x + 1; }\\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\\"plus\\", &plus); }\\n")
        ext = load("staged_plus", sources=[os.path.abspath("plus.cpp")])
        print("PLUS", ext.plus(41))
        '''))
    assert res.correct and "PLUS 42" in output(res), (res.reasons, output(res)[-3000:])


def test_an_extension_built_on_forwards_first_call_builds_in_the_sandbox(world):
    """Building lazily, on the first call of forward rather than at import, is an honest pattern
    (CUDA-L1's kernels call load_inline there): that build asks the harness for its ninja run (and
    a precompiled header) during `run`, and is answered there as in `load`. (A one-rule ninja file
    stands in for torch's, which takes minutes to compile on a small machine.)"""
    res = run(world, textwrap.dedent('''\
        import os
        import torch
        import torch.nn as nn
        from cuda_agent.evaluate.worker import serve

        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(features))
                self.built = None

            def forward(self, x):
                if self.built is None:
                    d = "/tmp/cuda-agent-builds/lazy"
                    os.makedirs(d, exist_ok=True)
                    with open(d + "/build.ninja", "w") as f:
                        f.write("rule make\\n  command = echo LAZY-BUILD > $out\\nbuild out.so: make\\n")
                    print("BUILD", serve.request("ninja", dir=d))
                    self.built = open(d + "/out.so").read().strip()
                    print("GOT", self.built)
                return torch.relu(x + self.bias)
        '''))
    assert res.correct and "GOT LAZY-BUILD" in output(res), (res.reasons, output(res)[-3000:])
