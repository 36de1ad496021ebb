"""Candidates' CUDA units through a light torch/extension.h first (worker/light_nvcc.py), and the ninja
file that sends them there (worker/inline_build.py). A stand-in nvcc tells the compiles apart here;
the real one builds candidates through both paths in the GPU test at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.evaluate.worker import inline_build
from cuda_agent.evaluate.worker.inline_build import LIGHT_HEADERS, LIGHT_NVCC

# A stand-in for nvcc: logs each call's include folders; with the light header's folder first it
# fails on a source that says FULL_ONLY (a name only the full header declares), and on any source
# that says BROKEN; otherwise writes the object.
FAKE_NVCC = textwrap.dedent("""
    import json, sys
    args = sys.argv[1:]
    src, out = args[args.index("-c") + 1], args[args.index("-o") + 1]
    text = open(src).read()
    light = args[:2] == ["-I", sys.argv[0].rsplit("/", 1)[0] + "/shim"]
    with open(sys.argv[0] + ".log", "a") as log:
        log.write(json.dumps({"light": light}) + "\\n")
    if "BROKEN" in text or (light and "FULL_ONLY" in text):
        sys.stderr.write(("light" if light else "as written") + ": error: identifier FULL_ONLY is undefined\\n")
        sys.exit(1)
    sys.stderr.write("warning: from the " + ("light" if light else "written") + " compile\\n")
    open(out, "w").write("object")
""")


def _compile(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess, list[bool], Path]:
    nvcc = tmp_path / "nvcc.py"
    nvcc.write_text(FAKE_NVCC)
    (tmp_path / "shim").mkdir(exist_ok=True)
    src, out = tmp_path / "cuda.cu", tmp_path / "cuda.cuda.o"
    src.write_text(source)
    done = subprocess.run([sys.executable, str(LIGHT_NVCC), str(tmp_path / "shim"), f"{sys.executable} {nvcc}",
                           "-MD", "-MF", f"{out}.d", "-c", str(src), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    log = nvcc.with_name("nvcc.py.log")
    calls = [json.loads(line)["light"] for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls, out


INCLUDES = "#include <cuda_runtime.h>\n  #  include <torch/extension.h>\n"


def test_a_unit_that_includes_the_extension_header_is_compiled_with_the_light_one(tmp_path):
    done, calls, out = _compile(tmp_path, INCLUDES + "torch::Tensor f(torch::Tensor x);\n")
    assert done.returncode == 0 and calls == [True]
    assert out.read_text() == "object"
    assert Path(f"{out}.how").read_text() == "light\n"
    assert "from the light compile" in done.stderr  # its warnings are shown as nvcc's own


def test_a_unit_that_needs_the_full_header_is_compiled_again_as_written(tmp_path):
    done, calls, out = _compile(tmp_path, INCLUDES + "auto g = FULL_ONLY;\n")
    assert done.returncode == 0 and calls == [True, False]
    how, _, why = Path(f"{out}.how").read_text().partition("\n")
    assert how == "as written" and why.startswith("light: error: identifier FULL_ONLY")  # why not light
    assert "error" not in done.stderr  # the light attempt's errors are not the candidate's


def test_a_unit_with_an_error_of_its_own_gets_the_errors_of_its_source_as_written(tmp_path):
    done, calls, out = _compile(tmp_path, INCLUDES + "BROKEN\n")
    assert done.returncode == 1 and calls == [True, False]
    assert done.stderr.count("error") == 1 and done.stderr.startswith("as written: error")
    assert not out.exists() and not Path(f"{out}.how").exists()


@pytest.mark.parametrize("source", ["#include <ATen/ATen.h>\nFULL_ONLY\n",
                                    "// #include <torch/extension.h> (a comment)\n",
                                    '#include "torch/extension.hpp"\n'])
def test_a_unit_without_the_extension_header_is_compiled_once_as_written(tmp_path, source):
    done, calls, out = _compile(tmp_path, source)
    assert done.returncode == 0 and calls == [False]
    assert Path(f"{out}.how").read_text() == "as written\n"


def test_the_shim_is_torch_types_without_operator_registration():
    files = {p.relative_to(LIGHT_HEADERS).as_posix(): p.read_text() for p in LIGHT_HEADERS.rglob("*") if p.is_file()}
    assert sorted(files) == ["torch/extension.h", "torch/library.h"]
    code = {name: [line for line in text.splitlines() if line.strip() and not line.startswith("//")]
            for name, text in files.items()}
    assert code == {"torch/extension.h": ["#pragma once", "#include <torch/types.h>"],
                    "torch/library.h": ["#pragma once"]}


def _syntax(source: str, light: bool) -> subprocess.CompletedProcess:
    import sysconfig

    import torch.utils.cpp_extension as ce

    incs = [w for p in [*ce.include_paths(), sysconfig.get_paths()["include"]] for w in ("-isystem", p)]
    return subprocess.run(["g++", "-std=c++17", "-fsyntax-only", *(["-I", str(LIGHT_HEADERS)] if light else []),
                           *incs, "-x", "c++", "-"], input=source, capture_output=True, text=True, timeout=300)


def test_a_unit_that_registers_operators_needs_the_header_as_written():
    """The light header's torch/library.h is empty: a unit using torch's tensor API compiles with it,
    one that registers operators does not (and so is compiled again as written, where it does)."""
    tensors = "#include <torch/extension.h>\nat::Tensor f(const at::Tensor& a) { return torch::empty_like(a); }\n"
    registers = "#include <torch/extension.h>\nTORCH_LIBRARY(my_ops, m) { m.def(\"f(Tensor a) -> Tensor\"); }\n"
    assert _syntax(tensors, light=True).returncode == 0
    light = _syntax(registers, light=True)
    assert light.returncode != 0 and "error" in light.stderr  # (the macro is unknown)
    assert _syntax(registers, light=False).returncode == 0


def _write(folder: Path, light: bool, monkeypatch, with_cuda: bool = True) -> str:
    """torch's own ninja-file writer through the hook, for a host and a CUDA source in `folder`."""
    import inspect

    import torch.utils.cpp_extension as ce

    monkeypatch.setattr(ce, "_join_cuda_home", lambda *parts: "/opt/cuda/" + "/".join(parts))
    monkeypatch.delenv("PYTORCH_NVCC", raising=False)
    writer = getattr(ce._write_ninja_file, "__wrapped__", ce._write_ninja_file)
    params = inspect.signature(writer).parameters
    kwargs = {k: [] for k in params if "flags" in k}
    kwargs.update(path=str(folder / "build.ninja"), sources=[str(folder / "main.cpp"), str(folder / "cuda.cu")],
                  objects=["main.o", "cuda.cuda.o"], library_target="ext.so", with_cuda=with_cuda)
    if "with_sycl" in params:
        kwargs["with_sycl"] = False
    inline_build._hooked_writer(writer, None, light)(**kwargs)
    return (folder / "build.ninja").read_text()


def test_the_ninja_file_names_the_light_nvcc_and_a_folder_keeps_its_first_choice(tmp_path, monkeypatch):
    # (`nvcc = ...`; in some torch versions the compile rule's compiler is `nvcc_from_env = ...`)
    lines = [x for x in _write(tmp_path, True, monkeypatch).splitlines() if x.startswith("nvcc")]
    assert any(str(LIGHT_NVCC) in x and "/opt/cuda/bin/nvcc" in x for x in lines)
    assert "PYTORCH_NVCC" not in os.environ  # set for the writer's call only
    other = tmp_path / "other"
    other.mkdir()
    assert str(LIGHT_NVCC) not in _write(other, False, monkeypatch)
    # a folder built without it keeps building without it: a changed nvcc would rebuild everything
    assert str(LIGHT_NVCC) not in _write(other, True, monkeypatch)
    host_only = tmp_path / "host"
    host_only.mkdir()
    assert str(LIGHT_NVCC) not in _write(host_only, True, monkeypatch, with_cuda=False)


def test_the_light_nvcc_runs_nvcc_itself_even_with_a_compiler_cache_on_path(tmp_path, monkeypatch):
    import torch.utils.cpp_extension as ce

    monkeypatch.setattr(ce, "_wrap_compiler", lambda compiler: ["ccache", *([compiler] if isinstance(compiler, str)
                                                                             else compiler)])
    lines = [x for x in _write(tmp_path, True, monkeypatch).splitlines() if x.startswith("nvcc")]
    [line] = [x for x in lines if str(LIGHT_NVCC) in x]
    assert line.endswith(f"{LIGHT_HEADERS} /opt/cuda/bin/nvcc") and "ccache" not in line  # nvcc_stages can split it


GPU_BUILD = r"""
import json, sys
from pathlib import Path
from cuda_agent.evaluate.worker import inline_build
inline_build.install(None, sys.argv[1], light_headers=True)
from torch.utils.cpp_extension import load_inline
import torch
body = '''
#include <torch/extension.h>
__global__ void add_one(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] + 1.f; }
torch::Tensor f(torch::Tensor x) {
    auto y = torch::empty_like(x);
    add_one<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    %s
    return y;
}
'''
extra = sys.argv[2]
m = load_inline(name="light_" + ("full" if extra else "types"), cpp_sources=["torch::Tensor f(torch::Tensor x);"],
                cuda_sources=[body % extra], functions=["f"])
x = torch.arange(4, dtype=torch.float32, device="cuda")
[how] = Path(m.__file__).parent.glob("*.cuda.o.how")
print(json.dumps({"out": m.f(x).tolist(), "how": how.read_text().splitlines()[0]}))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("extra, how", [("", "light"),
                                        ("y = torch::nn::functional::relu(y);", "as written")])
def test_cuda_extensions_build_and_run_through_either_compile(tmp_path, extra, how):
    out = subprocess.run([sys.executable, "-c", GPU_BUILD, str(tmp_path / "builds"), extra],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"out": [1.0, 2.0, 3.0, 4.0], "how": how}
