"""Tests of cuda_agent.workspace: init_workspace, the starter model_new.py, and the fixed commands
(`bash utils/compile.sh`, `python3 -m utils.verification`, `python3 -m utils.profiling`) run exactly
as an agent runs them, on the CPU backend."""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from cuda_agent.errors import UsageError
from cuda_agent.tasks import Task, load_task
from cuda_agent.workspace import (FIXED_FILES, TASK_ENV, init_workspace, record_dir, render_skill,
                                  starter_model_new, workspace_task)
from cuda_agent.workspace.commands import compiler_summary, main
from conftest import share_session_builds

REPO = Path(__file__).resolve().parents[1]
KERNELBENCH = REPO.parent / "shared" / "kernelbench"

TASK_SOURCE = textwrap.dedent('''\
    """y = relu(x + bias) with a learned per-column bias."""
    import torch
    import torch.nn as nn

    COLS = 128


    def _helper(n):
        return n


    class Model(nn.Module):
        def __init__(self, features):
            super(Model, self).__init__()
            self.bias = nn.Parameter(torch.randn(_helper(features)))

        def forward(self, x):
            return torch.relu(x + self.bias)


    def get_inputs():
        return [torch.randn(32, COLS)]


    def get_init_inputs():
        return [COLS]


    if __name__ == "__main__":
        print(Model(*get_init_inputs())(*get_inputs()).shape)
    ''')

OTHER_SOURCE = TASK_SOURCE.replace("torch.relu(x + self.bias)", "torch.tanh(x + self.bias)")


def make_task(tmp_path: Path, source: str = TASK_SOURCE, name: str = "bias_relu") -> Task:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return load_task(path)


@pytest.fixture
def cache(tmp_path, monkeypatch, cache_dir) -> Path:
    """A private cache dir, also what the commands find through $CUDA_AGENT_CACHE (with what the
    session's cache has built once and for all: share_session_builds)."""
    d = tmp_path / "cache"
    share_session_builds(d, cache_dir)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(d))
    monkeypatch.delenv(TASK_ENV, raising=False)
    return d


def writable(path: Path) -> bool:
    return bool(path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


# --- init_workspace --------------------------------------------------------------------------------

def test_init_writes_the_workspace(tmp_path, cache):
    task = make_task(tmp_path)
    ws = init_workspace(task, tmp_path / "ws", device="cpu", cache_dir=cache)
    assert ws == (tmp_path / "ws").resolve()
    for rel in FIXED_FILES + ("model.py", "SKILL.md"):
        assert (ws / rel).is_file(), rel
        assert not writable(ws / rel), f"{rel} should be read-only"
    assert os.access(ws / "utils" / "compile.sh", os.X_OK)
    assert (ws / "model.py").read_text() == task.source
    assert sorted(p.name for p in (ws / "kernels").iterdir()) == ["example_scale.cpp",
                                                                   "example_scale_binding.cpp"]
    assert writable(ws / "model_new.py") and writable(ws / "kernels" / "example_scale.cpp")
    # The fixed binding files are the evaluator's own.
    template = REPO / "src" / "cuda_agent" / "workspace" / "template"
    assert (ws / "binding.cpp").read_text() == (template / "binding.cpp").read_text()

    # The task is recorded outside the workspace.
    rec = record_dir(ws, cache)
    assert rec.parent == cache / "workspaces" and len(rec.name) == 16
    assert (rec / "task.py").read_text() == task.source
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["task_id"] == "bias_relu" and meta["device"] == "cpu" and meta["task_sha256"] == task.sha256

    skill = (ws / "SKILL.md").read_text()
    assert "{{" not in skill and "bias_relu" in skill
    assert "OpenMP" in skill and "kernels/example_scale.cpp" in skill and "cuBLAS" not in skill
    for needle in ("bash utils/compile.sh", "python3 -m utils.verification", "python3 -m utils.profiling",
                   "REGISTER_BINDING", "atol=0.01", "torch.compile"):
        assert needle in skill, needle


def test_init_for_cuda_writes_a_cuda_example(tmp_path, cache):
    ws = init_workspace(make_task(tmp_path), tmp_path / "ws", device="cuda", cache_dir=cache)
    assert (ws / "kernels" / "example_scale.cu").is_file()
    binding = (ws / "kernels" / "example_scale_binding.cpp").read_text()
    assert "getCurrentCUDAStream" in binding and "REGISTER_BINDING(example_scale" in binding
    skill = (ws / "SKILL.md").read_text()
    assert "cuBLAS" in skill and "kernels/*.cu" in skill and "OpenMP" not in skill
    assert "kernels/example_scale.cu" in (ws / "model_new.py").read_text()
    assert json.loads((record_dir(ws, cache) / "meta.json").read_text())["device"] == "cuda"


def test_skill_states_the_reward_and_the_rules(tmp_path):
    skill = render_skill(make_task(tmp_path), "cpu")
    assert "| 3 | correct and more than 5% faster than both eager and `torch.compile` |" in skill
    assert "| -1 |" in skill and "stress" in skill and "torch::empty" in skill
    assert len(skill.splitlines()) < 220


def test_init_refuses_a_non_empty_directory(tmp_path, cache):
    task = make_task(tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        init_workspace(task, busy, device="cpu", cache_dir=cache)
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]

    ws = init_workspace(task, tmp_path / "ws", device="cpu", cache_dir=cache)
    with pytest.raises(UsageError, match="another task"):
        init_workspace(make_task(tmp_path, OTHER_SOURCE, "other"), ws, device="cpu", cache_dir=cache)

    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        init_workspace(task, tmp_path / "file", device="cpu", cache_dir=cache)
    with pytest.raises(UsageError, match="device"):
        init_workspace(task, tmp_path / "new", device="tpu", cache_dir=cache)


def test_reinit_refreshes_the_fixed_files_only(tmp_path, cache):
    task = make_task(tmp_path)
    ws = init_workspace(task, tmp_path / "ws", device="cpu", cache_dir=cache)
    (ws / "model_new.py").write_text("# my work\n")
    (ws / "kernels" / "mine.cpp").write_text("// my kernel\n")
    (ws / "kernels" / "example_scale.cpp").unlink()
    for rel in ("utils/verification.py", "model.py"):  # the agent chmods and edits fixed files
        os.chmod(ws / rel, 0o644)
        (ws / rel).write_text("print('PASSED')\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (ws / "binding.cpp").unlink()
    (ws / "binding.cpp").symlink_to(outside)  # a link planted where a fixed file belongs

    assert init_workspace(task, ws, device="cpu", cache_dir=cache) == ws
    assert (ws / "model_new.py").read_text() == "# my work\n"
    assert sorted(p.name for p in (ws / "kernels").iterdir()) == ["example_scale_binding.cpp", "mine.cpp"]
    assert (ws / "model.py").read_text() == task.source and not writable(ws / "model.py")
    assert "cuda_agent.workspace.commands" in (ws / "utils" / "verification.py").read_text()
    assert not (ws / "binding.cpp").is_symlink() and outside.read_text() == "untouched"

    # A cleared cache: the workspace's own copy of the task identifies it, and the record is rewritten.
    for f in record_dir(ws, cache).iterdir():
        f.unlink()
    init_workspace(task, ws, device="cpu", cache_dir=cache)
    assert (record_dir(ws, cache) / "task.py").read_text() == task.source


def test_workspace_task_comes_from_the_record_or_the_environment(tmp_path, cache, monkeypatch):
    task = make_task(tmp_path)
    ws = init_workspace(task, tmp_path / "ws", device="cpu", cache_dir=cache)
    os.chmod(ws / "model.py", 0o644)
    (ws / "model.py").write_text(OTHER_SOURCE)  # the agent edits its copy: the record is unaffected
    got, meta = workspace_task(ws, cache)
    assert got.source == task.source and got.id == task.id and meta["device"] == "cpu"
    assert workspace_task(ws)[0].source == task.source  # default cache dir: $CUDA_AGENT_CACHE

    other = make_task(tmp_path, OTHER_SOURCE, "other")
    monkeypatch.setenv(TASK_ENV, other.origin)
    assert workspace_task(ws, cache)[0].source == OTHER_SOURCE

    monkeypatch.delenv(TASK_ENV)
    with pytest.raises(UsageError, match="init-workspace TASK .*CUDA_AGENT_TASK"):
        workspace_task(tmp_path / "elsewhere", cache)


# --- the starter model_new.py ----------------------------------------------------------------------

def test_starter_is_the_reference_renamed(tmp_path, monkeypatch):
    import torch

    source = starter_model_new(TASK_SOURCE, "cpu")
    tree = ast.parse(source)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert classes == ["ModelNew"] and functions == ["_helper"]
    assert not any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree))
    assert "super(ModelNew, self)" in source and "import cuda_extension" in source
    assert "cuda_extension.example_scale_forward(x, 2.0)" in source and "__main__" not in source

    monkeypatch.setitem(sys.modules, "cuda_extension", types.ModuleType("cuda_extension"))
    ref_ns: dict = {}
    exec(compile(TASK_SOURCE, "model.py", "exec"), ref_ns)
    new_ns: dict = {}
    exec(compile(source, "model_new.py", "exec"), new_ns)
    ref = ref_ns["Model"](*ref_ns["get_init_inputs"]())
    new = new_ns["ModelNew"](*ref_ns["get_init_inputs"]())
    new.load_state_dict(ref.state_dict(), strict=True)
    x = ref_ns["get_inputs"]()[0]
    torch.testing.assert_close(new(x), ref(x))


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="no KernelBench checkout next to the repository")
def test_starter_for_every_kernelbench_task():
    files = sorted(KERNELBENCH.glob("level[123]/*.py"))
    assert len(files) > 200
    for f in files:
        source = starter_model_new(load_task(f).source, "cuda")
        tree = ast.parse(source, filename=str(f))
        classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert "ModelNew" in classes and "Model" not in classes, f
        assert not any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree)), f


# --- the commands, without a build -----------------------------------------------------------------

def test_commands_report_usage_errors(tmp_path, cache, capsys):
    assert main("bogus", tmp_path, []) == 2
    assert "unknown workspace command" in capsys.readouterr().err

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "model_new.py").write_text("")
    assert main("verify", bare, []) == 2
    err = capsys.readouterr().err
    assert "no task is recorded" in err and "cuda-agent init-workspace TASK" in err

    ws = init_workspace(make_task(tmp_path), tmp_path / "ws", device="cpu", cache_dir=cache)
    assert main("verify", ws, ["--trials", "0"]) == 2
    assert "--trials: '0' must be at least 1" in capsys.readouterr().err
    assert main("verify", ws, ["--help"]) == 0
    assert "--trials" in capsys.readouterr().out
    for f in (ws / "kernels").iterdir():
        f.unlink()
    assert main("compile", ws, []) == 1
    assert "nothing to compile" in capsys.readouterr().out
    (ws / "model_new.py").unlink()
    assert main("compile", ws, []) == 2
    assert "model_new.py" in capsys.readouterr().err


def test_compiler_summary_puts_errors_first_with_workspace_paths():
    build = "/home/u/.cache/cuda-agent/builds/" + "ab" * 16 + ".x1y2z3/"
    log = "\n".join([
        "[1/3] c++ -MMD -MF k.o.d " + "-I/some/include " * 30 + f"-c {build}kernels/k.cpp -o k.o",
        f"{build}kernels/k.cpp: In function 'void k_launch(const float*, float*, int64_t)':",
        f"{build}kernels/k.cpp:7:5: error: 'oops' was not declared in this scope",
        "    7 |     oops;",
        "      |     ^~~~",
        f"{build}binding_registry.h:21:7: warning: something harmless",
        "ninja: build stopped: subcommand failed.",
    ])
    text = compiler_summary(log)
    assert text.startswith("errors:\nkernels/k.cpp:7:5: error: 'oops' was not declared in this scope\n"
                           "    7 |     oops;\n")
    assert "/builds/" not in text and "-I/some/include" not in text and "ninja" not in text


def test_entry_points_do_not_import_from_the_workspace(tmp_path, cache):
    """A `cuda_agent` package planted in the workspace must not replace the real one."""
    ws = init_workspace(make_task(tmp_path), tmp_path / "ws", device="cpu", cache_dir=cache)
    for f in record_dir(ws, cache).iterdir():
        f.unlink()  # no record: the real commands stop early with a usage error
    (ws / "cuda_agent" / "workspace").mkdir(parents=True)
    (ws / "cuda_agent" / "__init__.py").write_text("")
    (ws / "cuda_agent" / "workspace" / "__init__.py").write_text("")
    (ws / "cuda_agent" / "workspace" / "commands.py").write_text(
        "def main(*a):\n    print('verification: PASSED')\n    return 0\n")
    env = agent_env(cache)
    for cmd in (["python3", "-m", "utils.verification"], ["python3", "-m", "utils.profiling"],
                ["bash", "utils/compile.sh"]):
        out = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (cmd, out.stdout, out.stderr)
        assert "PASSED" not in out.stdout and "no task is recorded" in out.stderr


# --- the agent's workflow, with real builds --------------------------------------------------------

KERNEL = textwrap.dedent("""\
    // y = relu(x + bias) over rows x cols, bias per column.
    #include <cstdint>

    static const float kSlope = 1.0f;

    void bias_relu_launch(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const float v = x[r * cols + c] + bias[c];
          y[r * cols + c] = v > 0.0f ? v * kSlope : 0.0f;
        }
      }
    }
    """)

BINDING = textwrap.dedent("""\
    #include <torch/types.h>
    #include <torch/csrc/utils/pybind.h>

    #include "binding_registry.h"

    void bias_relu_launch(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);

    torch::Tensor bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias) {
      TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                  "bias_relu_forward: x must be a contiguous 2-D float32 tensor");
      TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1) && bias.is_contiguous(),
                  "bias_relu_forward: bias must be contiguous, one value per column of x");
      torch::Tensor y = torch::empty_like(x);
      bias_relu_launch(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
      return y;
    }

    static void register_bias_relu(pybind11::module& m) { m.def("bias_relu_forward", &bias_relu_forward); }

    REGISTER_BINDING(bias_relu, register_bias_relu);
    """)

MODEL_NEW = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    import cuda_extension


    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.bias = nn.Parameter(torch.empty(features))

        def forward(self, x):
            return cuda_extension.bias_relu_forward(x, self.bias)
    """)


def agent_env(cache: Path) -> dict[str, str]:
    """The agent's shell: `python3` is this interpreter, cuda_agent importable, a private cache."""
    env = {k: v for k, v in os.environ.items() if k not in (TASK_ENV, "PYTHONPATH")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO / "src")
    env["CUDA_AGENT_CACHE"] = str(cache)
    return env


def agent(ws: Path, env: dict[str, str], *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), cwd=ws, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.slow
def test_the_agents_compile_verify_profile_workflow_judges_the_recorded_task(tmp_path, cache):
    task = make_task(tmp_path)
    ws = init_workspace(task, tmp_path / "ws", device="cpu", cache_dir=cache)
    (ws / "kernels" / "bias_relu.cpp").write_text(KERNEL)
    (ws / "kernels" / "bias_relu_binding.cpp").write_text(BINDING)
    (ws / "model_new.py").write_text(MODEL_NEW)
    env = agent_env(cache)

    out = agent(ws, env, "bash", "utils/compile.sh")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "compiled OK" in out.stdout and "bias_relu_forward, example_scale_forward" in out.stdout
    out = agent(ws, env, "bash", "utils/compile.sh")
    assert out.returncode == 0 and "compiled OK (cached" in out.stdout, out.stdout + out.stderr

    out = agent(ws, env, "python3", "-m", "utils.verification", "--trials", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("verification: PASSED") and "2 trial(s)" in out.stdout

    out = agent(ws, env, "python3", "-m", "utils.profiling", "--json", "--trials", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout)  # exactly one JSON object on stdout
    assert res["correct"] is True and res["reward"] in (1, 2, 3) and res["task"] == "bias_relu"
    assert res["times_ms"]["candidate"]["median"] > 0 and res["times_ms"]["eager"]["median"] > 0
    assert res["phases_s"]["build_cached"] is True  # profiling reused the build compile.sh made

    # Editing the workspace's model.py changes nothing: the recorded task is the reference. The edit
    # makes the broken kernel below right, if model.py were read.
    os.chmod(ws / "model.py", 0o644)
    (ws / "model.py").write_text(TASK_SOURCE.replace("torch.relu(x + self.bias)",
                                                     "torch.relu(x + self.bias) * 1.5"))
    out = agent(ws, env, "python3", "-m", "utils.verification", "--trials", "2")
    assert out.returncode == 0 and "PASSED" in out.stdout, out.stdout + out.stderr

    (ws / "kernels" / "bias_relu.cpp").write_text(KERNEL.replace("kSlope = 1.0f", "kSlope = 1.5f"))
    out = agent(ws, env, "bash", "utils/compile.sh")
    assert out.returncode == 0, out.stdout + out.stderr
    out = agent(ws, env, "python3", "-m", "utils.verification", "--trials", "2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.startswith("verification: FAILED") and "[output_mismatch]" in out.stdout
    assert "next:" in out.stdout and "\x1b[" not in out.stdout

    out = agent(ws, env, "python3", "-m", "utils.profiling", "--trials", "1")
    assert out.returncode == 1 and "reward: -1" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_compile_reports_errors_for_the_model(tmp_path, cache):
    ws = init_workspace(make_task(tmp_path), tmp_path / "ws", device="cpu", cache_dir=cache)
    (ws / "kernels" / "example_scale.cpp").write_text(
        (ws / "kernels" / "example_scale.cpp").read_text().replace("x[i] * alpha", "x[i] * alpha + oops"))
    env = agent_env(cache)
    out = agent(ws, env, "bash", "utils/compile.sh")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.startswith("compile FAILED")
    assert "kernels/example_scale.cpp:" in out.stdout and "oops" in out.stdout and "/builds/" not in out.stdout
    assert "next: fix the first error above, then run `bash utils/compile.sh` again" in out.stdout

    # A launcher declared in the binding but defined nowhere: it compiles, and fails to load.
    (ws / "kernels" / "example_scale.cpp").write_text("// emptied\n")
    out = agent(ws, env, "bash", "utils/compile.sh")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "does not load" in out.stdout and "undefined symbol" in out.stdout
    assert "example_scale_launch(float const*, float*, float, long)" in out.stdout


SCALE_TASK = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return x * 2.0


    def get_inputs():
        return [torch.randn(4096, 1024)]


    def get_init_inputs():
        return []
    ''')


@pytest.mark.gpu
def test_cuda_workspace_example_kernel_builds_and_verifies(tmp_path, cache):
    """The CUDA example kernel that init-workspace writes is a working kernel, end to end."""
    ws = init_workspace(make_task(tmp_path, SCALE_TASK, "scale"), tmp_path / "ws", device="cuda",
                        cache_dir=cache)
    (ws / "model_new.py").write_text(textwrap.dedent("""\
        import torch.nn as nn

        import cuda_extension


        class ModelNew(nn.Module):
            def forward(self, x):
                return cuda_extension.example_scale_forward(x, 2.0)
        """))
    env = agent_env(cache)
    out = agent(ws, env, "bash", "utils/compile.sh")
    assert out.returncode == 0 and "compiled OK" in out.stdout, out.stdout + out.stderr
    out = agent(ws, env, "python3", "-m", "utils.verification")
    assert out.returncode == 0 and out.stdout.startswith("verification: PASSED"), out.stdout + out.stderr
    out = agent(ws, env, "python3", "-m", "utils.profiling", "--json")
    res = json.loads(out.stdout)
    assert res["correct"] is True and res["reward"] >= 1 and res["device"]["type"] == "cuda"
