"""Candidates' CUDA units through a light torch/extension.h first (worker/light_nvcc.py), and the ninja
file that sends them there (worker/inline_build.py). A stand-in nvcc tells the compiles apart here;
the real one builds candidates through both paths in the GPU test at the end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.evaluate.worker import inline_build
from cuda_agent.evaluate.worker.inline_build import LIGHT_HEADERS, LIGHT_NVCC, TENSOR_HEADERS, light_nvcc_command, shims

# A stand-in for nvcc: logs the header folder each call puts first (null: none); with one of ours
# first it fails on a source that says FULL_ONLY (a name only the full header declares), with the
# tensor one on a source that says TYPES_ONLY (a name of <torch/types.h>), and on any source that
# says BROKEN; otherwise writes the object.
FAKE_NVCC = textwrap.dedent("""
    import json, os, sys
    args = sys.argv[1:]
    src, out = args[args.index("-c") + 1], args[args.index("-o") + 1]
    text = open(src).read()
    shim = os.path.basename(args[1]) if args[0] == "-I" and args[1].endswith("_headers") else None
    with open(sys.argv[0] + ".log", "a") as log:
        log.write(json.dumps({"shim": shim}) + "\\n")
    name = shim or "as written"
    if "BROKEN" in text or (shim and "FULL_ONLY" in text) or (shim == "tensor_headers" and "TYPES_ONLY" in text):
        sys.stderr.write(name + ": error: identifier FULL_ONLY is undefined\\n")
        sys.exit(1)
    sys.stderr.write("warning: from the " + name + " compile\\n")
    open(out, "w").write("object")
""")


def _compile(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess, list[str | None], Path]:
    nvcc = tmp_path / "nvcc.py"
    nvcc.write_text(FAKE_NVCC)
    shims = [tmp_path / "tensor_headers", tmp_path / "light_headers"]
    for shim in shims:
        shim.mkdir(exist_ok=True)
    src, out = tmp_path / "cuda.cu", tmp_path / "cuda.cuda.o"
    src.write_text(source)
    done = subprocess.run([sys.executable, str(LIGHT_NVCC), os.pathsep.join(map(str, shims)),
                           f"{sys.executable} {nvcc}", "-MD", "-MF", f"{out}.d", "-c", str(src), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    log = nvcc.with_name("nvcc.py.log")
    calls = [json.loads(line)["shim"] for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls, out


INCLUDES = "#include <cuda_runtime.h>\n  #  include <torch/extension.h>\n"
BOTH = ["tensor_headers", "light_headers"]


def test_a_unit_that_includes_the_extension_header_is_compiled_with_the_lightest_that_compiles_it(tmp_path):
    done, calls, out = _compile(tmp_path, INCLUDES + "torch::Tensor f(torch::Tensor x);\n")
    assert done.returncode == 0 and calls == ["tensor_headers"]
    assert out.read_text() == "object"
    assert Path(f"{out}.how").read_text() == "tensor\n"
    assert "from the tensor_headers compile" in done.stderr  # its warnings are shown as nvcc's own

    (tmp_path / "next").mkdir()
    done, calls, out = _compile(tmp_path / "next", INCLUDES + "auto g = TYPES_ONLY;\n")
    assert done.returncode == 0 and calls == BOTH
    how, _, why = Path(f"{out}.how").read_text().partition("\n")
    assert how == "light" and why.startswith("tensor:\ntensor_headers: error")
    assert "error" not in done.stderr and "from the light_headers compile" in done.stderr


def test_a_unit_that_needs_the_full_header_is_compiled_again_as_written(tmp_path):
    done, calls, out = _compile(tmp_path, INCLUDES + "auto g = FULL_ONLY;\n")
    assert done.returncode == 0 and calls == [*BOTH, None]
    how, _, why = Path(f"{out}.how").read_text().partition("\n")
    assert how == "as written"  # and why not each light header:
    assert why.startswith("tensor:\ntensor_headers: error: identifier FULL_ONLY")
    assert "light:\nlight_headers: error: identifier FULL_ONLY" in why
    assert "error" not in done.stderr  # the light attempts' errors are not the candidate's


@pytest.mark.parametrize("binding", ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"forward\", &f); }",
                                     "void bind(pybind11::module_& m);", "py::object g();"])
def test_a_unit_that_binds_itself_to_python_is_compiled_as_written_at_once(tmp_path, binding):
    done, calls, out = _compile(tmp_path, INCLUDES + "torch::Tensor f(torch::Tensor x);\n" + binding + "\n")
    assert done.returncode == 0 and calls == [None]
    assert Path(f"{out}.how").read_text() == "as written\ntensor, light: not tried: the unit binds itself to Python (pybind11)\n"


def test_a_unit_with_an_error_of_its_own_gets_the_errors_of_its_source_as_written(tmp_path):
    done, calls, out = _compile(tmp_path, INCLUDES + "BROKEN\n")
    assert done.returncode == 1 and calls == [*BOTH, None]
    assert done.stderr.count("error") == 1 and done.stderr.startswith("as written: error")
    assert not out.exists() and not Path(f"{out}.how").exists()


def test_a_unit_calling_a_function_the_first_header_does_not_list_skips_it(tmp_path):
    (tmp_path / "tensor_headers").mkdir()
    (tmp_path / "tensor_headers" / "CALLS").write_text("# what it declares\nzeros empty_like\ncuda::\n")
    done, calls, out = _compile(tmp_path, INCLUDES + "auto f(torch::Tensor x) { return torch::zeros({2}) + "
                                "at::cuda::stream() + torch::matmul(x, x) + at::nn::relu (x); }\n")
    assert done.returncode == 0 and calls == ["light_headers"]
    assert Path(f"{out}.how").read_text() == "light\ntensor: not tried: the unit uses matmul, nn::\n"

    (tmp_path / "next").mkdir()
    (tmp_path / "next" / "tensor_headers").mkdir()
    (tmp_path / "next" / "tensor_headers" / "CALLS").write_text("zeros empty_like\ncuda::\n")
    done, calls, out = _compile(tmp_path / "next", INCLUDES + "auto f(torch::Tensor x) { return torch::zeros({2}) "
                                "+ at::cuda::stream() + torch::empty_like (x) + torch::Tensor(); } // at::matmul\n")
    assert calls == ["tensor_headers"]  # (the comment's call is seen, but it has no parenthesis)


@pytest.mark.parametrize("source", ["#include <ATen/ATen.h>\nFULL_ONLY\n",
                                    "// #include <torch/extension.h> (a comment)\n",
                                    '#include "torch/extension.hpp"\n'])
def test_a_unit_without_the_extension_header_is_compiled_once_as_written(tmp_path, source):
    done, calls, out = _compile(tmp_path, source)
    assert done.returncode == 0 and calls == [None]
    assert Path(f"{out}.how").read_text() == "as written\n"


def test_the_shim_is_torch_types_without_operator_registration():
    files = {p.relative_to(LIGHT_HEADERS).as_posix(): p.read_text() for p in LIGHT_HEADERS.rglob("*") if p.is_file()}
    assert sorted(files) == ["torch/extension.h", "torch/library.h"]
    code = {name: [line for line in text.splitlines() if line.strip() and not line.startswith("//")]
            for name, text in files.items()}
    assert code == {"torch/extension.h": ["#pragma once", "#include <torch/types.h>"],
                    "torch/library.h": ["#pragma once"]}


def _gxx(source: str, shim: Path | None, *flags: str) -> subprocess.CompletedProcess:
    """g++ on `source` (C++ from stdin) with torch's include folders, `shim` first if given."""
    import sysconfig

    import torch.utils.cpp_extension as ce

    incs = [w for p in [*ce.include_paths(), sysconfig.get_paths()["include"]] for w in ("-isystem", p)]
    return subprocess.run(["g++", "-std=c++17", *flags, *(["-I", str(shim)] if shim else []), *incs,
                           "-x", "c++", "-"], input=source, capture_output=True, text=True, timeout=300)


def _syntax(source: str, light: bool) -> subprocess.CompletedProcess:
    return _gxx(source, LIGHT_HEADERS if light else None, "-fsyntax-only")


def test_a_unit_that_registers_operators_needs_the_header_as_written():
    """The light header's torch/library.h is empty: a unit using torch's tensor API compiles with it,
    one that registers operators does not (and so is compiled again as written, where it does)."""
    tensors = "#include <torch/extension.h>\nat::Tensor f(const at::Tensor& a) { return torch::empty_like(a); }\n"
    registers = "#include <torch/extension.h>\nTORCH_LIBRARY(my_ops, m) { m.def(\"f(Tensor a) -> Tensor\"); }\n"
    assert _syntax(tensors, light=True).returncode == 0
    light = _syntax(registers, light=True)
    assert light.returncode != 0 and "error" in light.stderr  # (the macro is unknown)
    assert _syntax(registers, light=False).returncode == 0


# What model-written CUDA units do with torch on the host side, all of it declared by the tensor header.
TENSOR_API = """
#include <torch/extension.h>
torch::Tensor launch(torch::Tensor x, torch::Tensor w, torch::optional<torch::Tensor> bias, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only, got ", x.scalar_type());
    const at::OptionalDeviceGuard guard(x.device());
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(x.device());
    auto out = torch::zeros({x.size(0), w.size(0)}, opts);
    auto tmp = torch::empty_like(x), ones = torch::ones({4}, x.options()), z = torch::zeros_like(out);
    auto full = torch::full({2, 2}, 0.5, opts), r = torch::arange(10, opts);
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "launch", [&] {
        scalar_t* p = x.data_ptr<scalar_t>();
        (void)p;
    });
    if (bias.has_value()) out = out + bias.value();
    out = (out * 2.0 - z).relu().view({-1}).contiguous();
    return out.sum(dim) + tmp.mean() + ones.max() + full.to(torch::kFloat64).to(torch::kF32) + r.size(0);
}
"""


def test_the_tensor_header_declares_what_units_use_and_no_other_operator():
    """A unit using at::Tensor's methods, options, dispatch and torch's factories compiles with the
    tensor header; one using any other operator does not, and compiles with the next header. Among
    those others is `at::var(x, 1)`: ATen/Functions.h adds an `int dim` overload that the operator's
    own header lacks, where `1` would convert to `bool unbiased`; the tensor header must declare no
    operator at all rather than that header alone."""
    done = _gxx(TENSOR_API, TENSOR_HEADERS, "-fsyntax-only")
    assert done.returncode == 0, done.stderr[-2000:]
    others = ("torch::matmul(x, x)", "at::var(x, 1)", "at::numel(x)", "x.index({torch::indexing::Slice()})")
    # one unit, a function per line (lines 2 to 5): each line must have an error of its own
    source = "#include <torch/extension.h>\n" + "".join(
        f"auto f{i}(torch::Tensor x) {{ return {other}; }}\n" for i, other in enumerate(others))
    tensor = _gxx(source, TENSOR_HEADERS, "-fsyntax-only")
    assert tensor.returncode != 0
    for line, other in enumerate(others, start=2):
        assert re.search(rf"^<stdin>:{line}:\d+: error", tensor.stderr, re.M), (other, tensor.stderr[-3000:])
    light = _gxx(source, LIGHT_HEADERS, "-fsyntax-only")
    assert light.returncode == 0, light.stderr[-2000:]


def test_a_unit_as_load_inline_writes_it_compiles_with_the_tensor_header_alone():
    """`load_inline` puts `#include <torch/types.h>` first in every CUDA source: with the tensor
    folder first, that line gets the tensor header too, not torch's <torch/types.h> beside it (which
    would define torch's dtype names twice, so that no load_inline unit compiled with it). A name only
    the full header declares still fails there."""
    prefix = "#include <torch/types.h>\n"  # cpp_extension.load_inline's first line for CUDA sources
    done = _gxx(prefix + TENSOR_API, TENSOR_HEADERS, "-fsyntax-only")
    assert done.returncode == 0, done.stderr[-2000:]
    source = prefix + "#include <torch/extension.h>\nauto f(torch::Tensor x) { return torch::matmul(x, x); }\n"
    tensor = _gxx(source, TENSOR_HEADERS, "-fsyntax-only")
    assert tensor.returncode != 0 and "matmul" in tensor.stderr
    assert _gxx(source, LIGHT_HEADERS, "-fsyntax-only").returncode == 0


def test_every_function_the_tensor_header_lists_is_declared_by_it():
    names = [w for line in (TENSOR_HEADERS / "CALLS").read_text().splitlines() if not line.startswith("#")
             for w in line.split()]
    functions = [n for n in names if not n.endswith("::")]
    assert {"zeros", "empty", "empty_like", "zeros_like", "ones", "full", "dtype"} <= set(functions)
    source = "#include <torch/extension.h>\nnamespace check {\n" + "".join(
        f"using torch::{n};\nusing at::{n};\n" for n in functions) + "}\n"
    done = _gxx(source, TENSOR_HEADERS, "-fsyntax-only")
    assert done.returncode == 0, done.stderr[-2000:]


def _functions(obj: Path) -> dict[str, list[str]]:
    """Each function `obj` defines (global, weak or local): its instructions, addresses left out,
    with the symbols its relocations name (what it calls and loads)."""
    defined = {parts[2] for parts in (line.split() for line in subprocess.run(
        ["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines())
        if len(parts) == 3 and parts[1] in "TtW" and not parts[2].startswith("_GLOBAL__sub_I_")}
    out: dict[str, list[str]] = {}
    current = None
    for line in subprocess.run(["objdump", "-dr", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head or line.startswith("Disassembly of section"):
            current = head.group(1) if head else None
            if current:
                out.setdefault(current, [])
        elif current and line.strip():
            line = re.sub(r"^\s*[0-9a-f]+:\s*", "", line)
            line = re.sub(r"\.(rodata|LC)\S*", ".rodata", line)  # where the unit's strings landed
            out[current].append(re.sub(r"[0-9a-f]+ <[^>]*>", "<jump>", line))
    return {name: code for name, code in out.items() if name in defined}



def test_a_unit_that_compiles_with_the_tensor_header_calls_what_it_calls_with_the_full_one(tmp_path):
    """The same unit compiled (g++ -O0, no inlining) with the tensor header and with torch's own
    <torch/extension.h>: every function both objects define has the same instructions and calls the
    same functions, so no overload resolution or template changed with the headers left out."""
    objects = {}
    for name, shim in (("tensor", TENSOR_HEADERS), ("full", None)):
        objects[name] = tmp_path / f"{name}.o"
        done = _gxx(TENSOR_API, shim, "-O0", "-c", "-o", str(objects[name]))
        assert done.returncode == 0, done.stderr[-2000:]
    tensor, full = _functions(objects["tensor"]), _functions(objects["full"])
    own = [n for n in tensor if "launch" in n]
    assert own and all(n in full for n in own)  # the unit's function and its dispatch lambdas
    common = sorted(set(tensor) & set(full))
    assert len(common) > 100
    assert [n for n in common if tensor[n] != full[n]] == []


def _write(folder: Path, light: bool, monkeypatch, with_cuda: bool = True, pch_root: Path | None = None) -> str:
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
    inline_build._hooked_writer(writer, pch_root, light)(**kwargs)
    return (folder / "build.ninja").read_text()


def test_a_build_made_before_its_header_was_published_is_the_same_build_less_the_header(tmp_path, monkeypatch):
    """The harness finds a sandboxed build by its inputs (isolate.Builds._ninja), and falls back to
    them without the header's `-include` (`without_header`): the ninja file written once the
    header is published, less that, is the one written before it was, and nothing else changes."""
    started = []
    monkeypatch.setattr(inline_build, "_start_pch", lambda root, digest, cmd: started.append(digest))
    (tmp_path / "main.cpp").write_text("#include <torch/extension.h>\nint f() { return 1; }\n")
    before = _write(tmp_path, False, monkeypatch, with_cuda=False, pch_root=tmp_path / "pch").encode()
    [digest] = started  # no header yet: one was started (here: not built) and the build goes without
    (tmp_path / "pch" / digest).mkdir(parents=True)
    (tmp_path / "pch" / digest / f"{inline_build.HEADER}.gch").write_text("published")
    (tmp_path / "build.ninja").unlink()  # (a fresh folder: the next candidate's, in its own sandbox)
    after = _write(tmp_path, False, monkeypatch, with_cuda=False, pch_root=tmp_path / "pch").encode()
    assert b"-include " in after and b"-include " not in before
    assert inline_build.without_header({"build.ninja": after, "main.cpp": b"x"}) == {"build.ninja": before, "main.cpp": b"x"}
    assert inline_build.without_header({"build.ninja": before}) == {"build.ninja": before}


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

    # (torch 2.11 has no such hook: there the test shows only that the line ends with the real nvcc)
    monkeypatch.setattr(ce, "_wrap_compiler", lambda compiler: ["ccache", *([compiler] if isinstance(compiler, str)
                                                                             else compiler)], raising=False)
    lines = [x for x in _write(tmp_path, True, monkeypatch).splitlines() if x.startswith("nvcc")]
    [line] = [x for x in lines if str(LIGHT_NVCC) in x]
    assert line.endswith(f"{shims(False)} /opt/cuda/bin/nvcc") and "ccache" not in line  # nvcc_stages can split it


def test_the_tensor_header_is_tried_first_only_where_asked():
    import os
    import shlex

    def folders(tensor_header: bool) -> list[str]:
        return shlex.split(light_nvcc_command("/opt/cuda/bin/nvcc", None, tensor_header))[-2].split(os.pathsep)

    assert folders(False) == [str(LIGHT_HEADERS)]
    assert folders(True) == [str(TENSOR_HEADERS), str(LIGHT_HEADERS)]


GPU_BUILD = r"""
import json, sys
from pathlib import Path
from cuda_agent.evaluate.worker import inline_build
inline_build.install(None, sys.argv[1], light_headers=True, tensor_header=True)
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
m = load_inline(name="light_" + sys.argv[3], cpp_sources=["torch::Tensor f(torch::Tensor x);"],
                cuda_sources=[body % extra], functions=["f"])
x = torch.arange(4, dtype=torch.float32, device="cuda")
[how] = Path(m.__file__).parent.glob("*.cuda.o.how")
print(json.dumps({"out": m.f(x).tolist(), "how": how.read_text().splitlines()[0], "why": how.read_text()}))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("extra, how", [("", "tensor"),
                                        ("y = y + torch::matmul(x.view({1, -1}), x.view({-1, 1})).sum() * 0;", "light"),
                                        ("y = torch::nn::functional::relu(y);", "as written")])
def test_cuda_extensions_build_and_run_through_each_compile(tmp_path, extra, how):
    out = subprocess.run([sys.executable, "-c", GPU_BUILD, str(tmp_path / "builds"), extra, how.replace(" ", "_")],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    why = got.pop("why")  # light_nvcc's note: why each lighter header did not compile the unit
    assert got == {"out": [1.0, 2.0, 3.0, 4.0], "how": how}, why[-3000:]
