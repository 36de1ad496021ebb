"""nvcc's host and device chains side by side (worker/nvcc_stages.py), against nvcc itself.

Real nvcc where one is installed (it compiles without a GPU): the same object file byte for byte,
the same errors and exit status, a dependency file ninja reads, and nvcc run as it is wherever
the plan is not the known shape."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.evaluate.worker import nvcc_stages
from cuda_agent.evaluate.worker.inline_build import LIGHT_NVCC

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")
ARCH = "-gencode=arch=compute_90a,code=sm_90a"

GOOD = """
#include <cstdio>
__global__ void scale(float* p, float s, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= s; }
void launch(float* p, float s, int n) { int unused; scale<<<(n + 255) / 256, 256>>>(p, s, n); }
"""
HOST_ERROR = "int f( { }\n"  # both front ends would reject it; nvcc shows cudafe++'s errors only
DEVICE_ERROR = "int h() { return 1; }\n__global__ void k(int* p) { *p = h(); }\n"  # cicc's alone


def _nvcc_as_is(tmp_path: Path, src: Path, extra: list[str]) -> tuple[subprocess.CompletedProcess, Path]:
    keep = tmp_path / "keep"
    keep.mkdir(exist_ok=True)
    out = tmp_path / f"{src.stem}.nvcc.o"
    done = subprocess.run([NVCC, "--keep", "--keep-dir", str(keep), ARCH, *extra, "-c", str(src), "-o", str(out)],
                          capture_output=True, cwd=tmp_path)
    return done, out


def _split(tmp_path: Path, src: Path, extra: list[str]) -> tuple[nvcc_stages.Compiled | None, Path]:
    out = tmp_path / f"{src.stem}.split.o"
    return nvcc_stages.compile([NVCC], [ARCH, *extra, "-c", str(src), "-o", str(out)]), out


def _source(tmp_path: Path, name: str, text: str) -> Path:
    src = tmp_path / f"{name}.cu"
    src.write_text(text)
    return src


@needs_nvcc
def test_the_object_file_is_nvccs_own_byte_for_byte(tmp_path):
    src = _source(tmp_path, "good", GOOD)
    plain, plain_out = _nvcc_as_is(tmp_path, src, ["-O3"])
    split, split_out = _split(tmp_path, src, ["-O3"])
    assert plain.returncode == 0 and split is not None and split.returncode == 0
    assert split_out.read_bytes() == plain_out.read_bytes()
    assert split.stderr == plain.stderr and b"unused" in split.stderr  # the front ends' warnings, in nvcc's order
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".nvcc-")]  # its work folder is gone


@needs_nvcc
@pytest.mark.parametrize("text, status", [(HOST_ERROR, 2), (DEVICE_ERROR, 1)])
def test_a_unit_that_does_not_compile_fails_as_nvcc_fails(tmp_path, text, status):
    src = _source(tmp_path, "bad", text)
    plain, _ = _nvcc_as_is(tmp_path, src, [])
    split, out = _split(tmp_path, src, [])
    assert split is not None
    assert (split.returncode, split.stderr, split.stdout) == (plain.returncode, plain.stderr, plain.stdout)
    assert split.returncode == status and b"error" in split.stderr and not out.exists()


@needs_nvcc
def test_two_architectures_give_nvccs_object_too(tmp_path):
    src = _source(tmp_path, "two", GOOD)
    archs = ["-gencode=arch=compute_80,code=sm_80"]
    plain, plain_out = _nvcc_as_is(tmp_path, src, archs)
    split, split_out = _split(tmp_path, src, archs)
    assert split is not None and split.returncode == plain.returncode == 0
    assert split_out.read_bytes() == plain_out.read_bytes()


@needs_nvcc
def test_the_dependency_file_is_written_and_ninja_reads_it(tmp_path):
    ninja = shutil.which("ninja")
    if ninja is None:
        pytest.skip("no ninja")
    _source(tmp_path, "unit", GOOD)
    (tmp_path / "build.ninja").write_text(
        "rule cuda_compile\n  depfile = $out.d\n  deps = gcc\n"
        f"  command = {sys.executable} {LIGHT_NVCC} {tmp_path / 'shim'} {NVCC} "
        f"--generate-dependencies-with-compile --dependency-output $out.d {ARCH} -c $in -o $out\n"
        "build unit.o: cuda_compile unit.cu\n")
    built = subprocess.run([ninja], cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    deps = subprocess.run([ninja, "-t", "deps"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "(VALID)" in deps and "unit.cu" in deps and "cuda_runtime.h" in deps
    assert "no work to do" in subprocess.run([ninja], cwd=tmp_path, capture_output=True, text=True).stdout


@needs_nvcc
@pytest.mark.parametrize("extra", [["--keep"], ["-E"], ["--dryrun"], ["-rdc=true", "--threads", "2"]])
def test_options_that_change_nvccs_plan_leave_the_unit_to_nvcc(tmp_path, extra):
    src = _source(tmp_path, "opt", GOOD)
    assert nvcc_stages.plan([NVCC], [*extra, "-c", str(src), "-o", str(tmp_path / "o.o")], str(tmp_path)) is None


def test_a_command_in_front_of_nvcc_leaves_the_unit_to_it(tmp_path):
    src = _source(tmp_path, "ccache", GOOD)
    args = ["-c", str(src), "-o", str(tmp_path / "o.o")]
    assert nvcc_stages.plan(["ccache", "nvcc"], args, str(tmp_path)) is None
    assert nvcc_stages.plan([sys.executable], args, str(tmp_path)) is None
