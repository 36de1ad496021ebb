"""nvcc's final host compile with a precompiled header of the unit's headers (worker/nvcc_pch.py).

Real nvcc where one is installed (it compiles without a GPU): the first unit builds the header and
gets nvcc's own object; a later unit with the same headers uses it and gets nvcc's object but for
the name of the headers' anonymous namespace; a header gcc refuses leaves the compile to nvcc's
own step; and the cutting of cudafe++'s output on its own, on text of its known shape."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cuda_agent.evaluate.worker import light_nvcc, nvcc_pch, nvcc_stages

NVCC = shutil.which("nvcc")
OBJDUMP = shutil.which("objdump")
needs_tools = pytest.mark.skipif(NVCC is None or OBJDUMP is None, reason="no nvcc or objdump on this machine")
ARCH = "-gencode=arch=compute_90a,code=sm_90a"
# libcu++'s tuple brings an anonymous namespace of the headers (its `ignore`), which the stub names
HEADERS = "#include <cuda/std/tuple>\n#include <cstdio>\n"
UNIT = HEADERS + """
namespace { __global__ void own(float* p) { p[0] = cuda::std::get<0>(cuda::std::make_tuple(1.0f)); } }
__global__ void scale(float* p, float s, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= s; }
void launch(float* p, float s, int n) { scale<<<(n + 255) / 256, 256>>>(p, s, n); own<<<1, 1>>>(p); }
"""
OTHER = HEADERS + """
__global__ void add(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }
void run(float* p, int n) { add<<<(n + 127) / 128, 128>>>(p, n); }
"""


@pytest.fixture
def small_prefix(monkeypatch):
    monkeypatch.setattr(nvcc_pch, "MIN_PREFIX_BYTES", 1 << 16)  # these units' headers are ~3 MB


def _nvcc(tmp_path: Path, src: Path) -> Path:
    out = tmp_path / f"{src.stem}.nvcc.o"
    keep = tmp_path / f"keep-{src.stem}"  # --keep: the object names no temporary file, as nvcc_stages's
    keep.mkdir()
    done = subprocess.run([NVCC, "--keep", "--keep-dir", str(keep), ARCH, "-O3", "-c", str(src), "-o", str(out)],
                          capture_output=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return out


def _with_pch(tmp_path: Path, src: Path) -> tuple[nvcc_stages.Compiled, Path]:
    out = tmp_path / f"{src.stem}.pch.o"
    done = nvcc_stages.compile([NVCC], [ARCH, "-O3", "-c", str(src), "-o", str(out)], str(tmp_path / "pch"))
    assert done is not None
    return done, out


def _normalised(obj: Path) -> str:
    """The object's code, data, relocations and symbols, the anonymous namespaces' names made one."""
    text = "".join(subprocess.run([OBJDUMP, *how, str(obj)], capture_output=True, text=True, check=True).stdout
                   for how in (["-d", "--no-show-raw-insn", "-s"], ["-r"], ["-t"]))
    text = text.replace(str(obj), "OBJ")
    return "\n".join(sorted(re.sub(r"\d*_GLOBAL__N__\w+", "ANON", text).splitlines()))


def _source(tmp_path: Path, name: str, text: str) -> Path:
    src = tmp_path / f"{name}.cu"
    src.write_text(text)
    return src


@needs_tools
def test_the_header_is_built_then_used_and_the_object_is_nvccs_but_for_one_name(tmp_path, small_prefix):
    first, other = _source(tmp_path, "first", UNIT), _source(tmp_path, "other", OTHER)
    assert _with_pch(tmp_path, first)[0].header == ""  # headers seen once: no header built for them yet
    assert not list((tmp_path / "pch").glob(f"*/{nvcc_pch.HEADER}.gch"))
    built, built_out = _with_pch(tmp_path, first)
    assert (built.returncode, built.header) == (0, "built")
    nvcc_first = _nvcc(tmp_path, first)
    assert built_out.read_bytes() == nvcc_first.read_bytes()  # nvcc's own final compile
    [header] = (tmp_path / "pch").glob(f"*/{nvcc_pch.HEADER}.gch")
    used, used_out = _with_pch(tmp_path, other)
    assert (used.returncode, used.header, used.stdout, used.stderr) == (0, "used", b"", b"")
    assert _normalised(used_out) == _normalised(_nvcc(tmp_path, other))
    assert b"_GLOBAL__N__pch_" in used_out.read_bytes()  # the headers' namespace, under the header's name
    again, again_out = _with_pch(tmp_path, first)  # the unit's own anonymous namespace and kernel in it
    assert (again.returncode, again.header) == (0, "used")
    assert _normalised(again_out) == _normalised(nvcc_first)
    assert [p.name for p in (tmp_path / "pch").iterdir() if p.is_dir()] == [header.parent.name]


@needs_tools
def test_a_header_gcc_refuses_leaves_the_compile_to_nvccs_own_step(tmp_path, small_prefix):
    first, other = _source(tmp_path, "first", UNIT), _source(tmp_path, "other", OTHER)
    assert [_with_pch(tmp_path, first)[0].header for _ in range(2)] == ["", "built"]
    [header] = (tmp_path / "pch").glob(f"*/{nvcc_pch.HEADER}.gch")
    header.write_bytes(b"not a precompiled header")
    done, out = _with_pch(tmp_path, other)
    assert (done.returncode, done.header, done.stderr) == (0, "not used", b"")  # gcc's warning is not shown
    assert out.read_bytes() == _nvcc(tmp_path, other).read_bytes()


@needs_tools
def test_small_headers_are_not_precompiled(tmp_path):
    done, out = _with_pch(tmp_path, _source(tmp_path, "small", OTHER))
    assert (done.returncode, done.header) == (0, "")
    assert not (tmp_path / "pch").exists() and out.read_bytes() == _nvcc(tmp_path, tmp_path / "small.cu").read_bytes()


NAME = b"_GLOBAL__N__0a1b2c3d_4_unit_cu_5e6f7a8b"
PREFIX = (b'# 1 "unit.cu"\n'
          b"namespace outer { namespace inner { \n"
          + b'namespace %s __attribute__((visibility("hidden")))  { }; using namespace ::outer::inner::%s; \n' % (NAME, NAME)
          + b'namespace %s __attribute__((visibility("hidden")))  { \nconstexpr inline int ignore = 0; \n}\n}}\n' % NAME
          + b"int header_padding;\n" * 64)
OWN = b'# 3 "unit.cu"\nint own() { return outer::inner::ignore; }\n#define _NV_ANON_NAMESPACE %s\n' % NAME
ARGV = ["gcc", "-c", "-x", "c++", "unit.cudafe1.cpp", "-o", "unit.o"]


def test_the_prefix_is_cut_at_the_units_first_own_line_with_aliases_for_the_namespace():
    pragmas = (b'#pragma GCC diagnostic push\n#pragma GCC diagnostic ignored "-Wattributes"\n'
               b"#pragma GCC visibility push ( default )\nint shown;\n#pragma GCC visibility pop\n")
    assert nvcc_pch.split(PREFIX + pragmas + OWN, ARGV, "unit.cudafe1.cpp", dict(os.environ), min_prefix=0)
    s = nvcc_pch.split(PREFIX + OWN, ARGV, "unit.cudafe1.cpp", dict(os.environ), min_prefix=0)
    assert s is not None and NAME not in s.header_text and b"header_padding" in s.header_text
    fixed = b"_GLOBAL__N__pch_" + s.key[:16].encode()
    assert s.header_text.count(fixed) == 3
    assert s.rest == (b'# 1 "unit.cu"\n' + b"namespace outer { namespace inner { namespace %s = ::outer::inner::%s; }}\n"
                      % (NAME, fixed) + OWN)
    other_unit = nvcc_pch.split((PREFIX + OWN).replace(NAME, b"_GLOBAL__N__99_other"), ARGV, "unit.cudafe1.cpp",
                                dict(os.environ), min_prefix=0)
    assert other_unit is not None and other_unit.key == s.key  # the same headers: the same precompiled header
    flags = nvcc_pch.split(PREFIX + OWN, [*ARGV, "-O2"], "unit.cudafe1.cpp", dict(os.environ), min_prefix=0)
    assert flags is not None and flags.key != s.key


@pytest.mark.parametrize("text", [
    PREFIX + b"auto p = &outer::inner::%s::ignore;\n" % NAME + OWN,  # the name used some other way
    PREFIX + b"namespace _GLOBAL__N__another __attribute__((visibility(\"hidden\")))  { }\n" + OWN,  # two names
    PREFIX.replace(b'# 1 "unit.cu"\n', b""),  # not cudafe++'s first line
    PREFIX,  # no line of the unit's own
    PREFIX + b"#pragma pack(1)\n" + OWN,  # state the header might not carry over
    PREFIX + b"#pragma GCC visibility push(hidden)\n" + OWN,  # pushed, never popped
])
def test_text_of_another_shape_is_not_cut(text):
    assert nvcc_pch.split(text, ARGV, "unit.cudafe1.cpp", dict(os.environ), min_prefix=0) is None


def test_a_header_is_used_only_by_a_builds_only_cuda_unit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not light_nvcc.only_cuda_unit()  # no ninja file: not torch's build
    rule = "rule cuda_compile\n  command = nvcc -c $in -o $out\n"
    (tmp_path / "build.ninja").write_text(rule + "build a.cuda.o: cuda_compile /x/a.cu\nbuild main.o: compile /x/main.cpp\n")
    assert light_nvcc.only_cuda_unit()
    (tmp_path / "build.ninja").write_text(rule + "build a.cuda.o: cuda_compile /x/a.cu\nbuild b.cuda.o: cuda_compile /x/b.cu\n")
    assert not light_nvcc.only_cuda_unit()


@needs_tools
def test_light_nvcc_gives_the_header_to_a_builds_only_cuda_unit_and_notes_it(tmp_path, small_prefix, monkeypatch):
    def build(folder: str, text: str, units: int) -> str:
        work = tmp_path / folder
        work.mkdir()
        src = _source(work, "unit", text)
        edges = "".join(f"build u{i}.cuda.o: cuda_compile {src}\n" for i in range(units))
        (work / "build.ninja").write_text("rule cuda_compile\n  command = nvcc -c $in -o $out\n" + edges)
        monkeypatch.chdir(work)
        assert light_nvcc.main(["--pch", str(tmp_path / "pch"), str(tmp_path / "shim"), NVCC, ARCH,
                                "-c", str(src), "-o", str(work / "u0.cuda.o")]) == 0
        return (work / "u0.cuda.o.how").read_text()

    assert build("two-units", UNIT, 2) == "as written\n"  # no header for a build of several CUDA units
    assert build("first", UNIT, 1) == "as written\n"  # these headers seen once
    assert build("second", UNIT, 1) == "as written\nhost header: built\n"
    assert build("third", OTHER, 1) == "as written\nhost header: used\n"


def test_only_gccs_final_compiles_get_a_header(tmp_path):
    clang = tmp_path / "clang++"
    clang.write_text("#!/bin/sh\necho 'clang version 17.0.6'\n")
    clang.chmod(0o755)
    assert not nvcc_pch.is_gcc(str(clang), dict(os.environ))
    assert not nvcc_pch.is_gcc(str(tmp_path / "missing"), dict(os.environ))
    assert nvcc_pch.prepare(str(tmp_path / "pch"), [str(clang), "-c", "x.cpp"], "x.cpp", str(tmp_path),
                            dict(os.environ)) == nvcc_pch.Attempt()
    if shutil.which("gcc"):
        assert nvcc_pch.is_gcc("gcc", dict(os.environ))


GPU_BUILD = r"""
import json, sys
from pathlib import Path
from cuda_agent.evaluate.worker import inline_build
inline_build.install(sys.argv[1] + "/pch", sys.argv[1] + "/builds", light_headers=True, tensor_header=True)  # as by default
from torch.utils.cpp_extension import load_inline
import torch
body = '''
#include <torch/extension.h>
#include <cuda/std/tuple>
namespace {
__device__ float bias;
__global__ void add(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + bias + cuda::std::get<0>(cuda::std::make_tuple(%d.f));
}
}
torch::Tensor f(torch::Tensor x) {
    auto y = torch::empty_like(x);
    float b = %s;
    TORCH_CHECK(cudaMemcpyToSymbol(bias, &b, sizeof b) == cudaSuccess);
    add<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
'''
x = torch.arange(4, dtype=torch.float32, device="cuda")
rows = []
for k, b in [(1, "0.5f"), (2, "0.25f"), (3, "0.125f")]:
    m = load_inline(name=f"pch_{k}", cpp_sources=["torch::Tensor f(torch::Tensor x);"], cuda_sources=[body % (k, b)],
                    functions=["f"])
    [how] = Path(m.__file__).parent.glob("*.cuda.o.how")
    rows.append({"out": m.f(x).tolist(), "how": how.read_text().splitlines()})
print(json.dumps(rows))
"""


@pytest.mark.gpu
def test_extensions_built_with_the_header_run_their_kernels_and_device_variables(tmp_path):
    """The third extension's CUDA unit reads its headers from the precompiled header that the
    second one built (the first one's headers were seen once); its kernel and its own anonymous
    namespace's device variable (set through the stub's registration) work, and so do libcu++'s."""
    import json
    import sys

    out = subprocess.run([sys.executable, "-c", GPU_BUILD, str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    first, second, third = json.loads(out.stdout.strip().splitlines()[-1])
    assert first == {"out": [1.5, 2.5, 3.5, 4.5], "how": ["tensor"]}
    assert second == {"out": [2.25, 3.25, 4.25, 5.25], "how": ["tensor", "host header: built"]}
    assert third == {"out": [3.125, 4.125, 5.125, 6.125], "how": ["tensor", "host header: used"]}


def test_a_header_whose_build_failed_is_not_tried_again_at_once(tmp_path):
    def build() -> nvcc_pch.Building:
        return nvcc_pch.Building(tmp_path, "k", "h.h", b"#error no\n", lambda header: ["false"])

    first = build()
    assert first.proc is not None and not first.finish()  # `false` fails: nothing published
    assert (tmp_path / "k.failed").exists() and not (tmp_path / "k").exists()
    assert build().proc is None  # not tried again for a while
    old = time.time() - nvcc_pch.FAILED_WAIT_S - 1
    os.utime(tmp_path / "k.failed", (old, old))
    again = build()
    assert again.proc is not None
    again.finish()
