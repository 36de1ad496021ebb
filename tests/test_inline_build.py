"""Candidates' own `load_inline` builds (worker/inline_build.py): with a precompiled torch/extension.h
(the first build with a set of flags makes the header beside it, later builds include it, and the
extensions they build work the same), and in folders named by their sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BUILD = r"""
import json, sys
from pathlib import Path
from cuda_agent.evaluate.worker import inline_build
inline_build.install(sys.argv[1], None)
from torch.utils.cpp_extension import load_inline
import torch
src = "torch::Tensor shifted(torch::Tensor x) { return x.clamp_min(0) + %s; }" % sys.argv[2]
build = Path(sys.argv[3])
m = load_inline(name="pch_" + sys.argv[2], cpp_sources=[src], functions=["shifted"],
                extra_cflags=json.loads(sys.argv[4]), build_directory=str(build))
print(json.dumps({"out": m.shifted(torch.tensor([-1.0, 2.0])).tolist(),
                  "included": "-include" in (build / "build.ninja").read_text()}))
"""


def _build(root: Path, n: int, tmp_path: Path, cflags: tuple[str, ...] = ("-O1",)) -> dict:
    build = tmp_path / f"build{n}"
    build.mkdir()
    out = subprocess.run([sys.executable, "-c", BUILD, str(root), str(n), str(build), json.dumps(cflags)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


ROUTED = r"""
import json, sys
from pathlib import Path
from cuda_agent.evaluate.worker import inline_build
inline_build.install(sys.argv[1], sys.argv[2])
from torch.utils.cpp_extension import load_inline
import torch
src = "torch::Tensor shifted(torch::Tensor x) { return x.clamp_min(0) + %s; }" % sys.argv[3]
m = load_inline(name="routed", cpp_sources=[src], functions=["shifted"], extra_cflags=["-O1"])
folder = Path(m.__file__).parent
print(json.dumps({"out": m.shifted(torch.tensor([-1.0, 2.0])).tolist(), "folder": str(folder),
                  "included": "-include" in (folder / "build.ninja").read_text()}))
"""


def _routed(tmp_path: Path, shift: int, timeout: float = 900) -> dict:
    out = subprocess.run([sys.executable, "-c", ROUTED, str(tmp_path / "pch"), str(tmp_path / "builds"),
                          str(shift)], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_first_build_makes_the_header_and_later_builds_are_found_by_their_sources_or_use_it(tmp_path):
    """One folder of precompiled headers through the test (each costs a compile of torch's headers)."""
    root = tmp_path / "pch"
    first = _routed(tmp_path, 1)
    assert first["out"] == [1.0, 3.0] and not first["included"]  # the first build made the header beside it
    [made] = [d for d in root.iterdir() if d.is_dir()]
    assert (made / "torch_ext.h.gch").stat().st_size > 1_000_000
    folder = Path(first["folder"])
    assert folder.parent == tmp_path / "builds" and folder.name.startswith("routed-")
    [so] = folder.glob("routed*.so")
    built_at = so.stat().st_mtime_ns
    (folder / "lock").write_text("")  # a build killed mid-way left torch's lock: nobody holds it
    # the same sources again (another candidate, another process): the same folder, no rebuild, though
    # a precompiled header exists by now and the old lock is there
    again = _routed(tmp_path, 1, timeout=300)
    assert again == first
    assert so.stat().st_mtime_ns == built_at
    assert not (folder / "lock").exists()
    other = _routed(tmp_path, 2)  # other sources: a folder of their own, built with the header
    assert other["out"] == [2.0, 4.0] and other["included"]
    assert Path(other["folder"]) != folder
    # the same flags with the empty word of KernelBench's template (`extra_cflags=[""]`), in a build
    # folder of the candidate's own: the same header
    own = _build(root, 3, tmp_path, cflags=("-O1", ""))
    assert own == {"out": [3.0, 5.0], "included": True}
    assert [d for d in root.iterdir() if d.is_dir()] == [made]


def test_only_the_most_recently_used_headers_are_kept(tmp_path):
    from cuda_agent.evaluate.worker.nvcc_pch import prune

    for i, name in enumerate("abcdef"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "torch_ext.h.gch").write_text("x")
        (tmp_path / f"{name}.lock").write_text("")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    (tmp_path / ".f0a1.work").mkdir()  # a build under way is not a header
    prune(tmp_path, keep=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".f0a1.work", "c", "c.lock", "d", "d.lock", "e", "e.lock",
                                                           "f", "f.lock"]


LOAD = r"""
import json, sys
from pathlib import Path
from cuda_agent.evaluate.worker import inline_build
inline_build.install(sys.argv[1], None)
from torch.utils.cpp_extension import load
build = Path(sys.argv[2])
src = build / "plus.cpp"
src.write_text('#include <pybind11/pybind11.h>\nint plus(int x) { return x + 1; }\n'
               'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("plus", &plus); }\n')
m = load("plain_plus", sources=[str(src)], extra_cflags=["-O1"], build_directory=str(build))
print(json.dumps({"out": m.plus(41), "included": "-include" in (build / "build.ninja").read_text()}))
"""


def test_a_load_of_sources_without_torchs_header_gets_no_precompiled_header(tmp_path):
    """A `load` of a unit that does not include torch/extension.h (pybind11 alone) is built as
    torch builds it: no header of torch's put in front of it, and none built beside it."""
    (tmp_path / "build").mkdir()
    out = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "pch"), str(tmp_path / "build")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"out": 42, "included": False}
    assert not (tmp_path / "pch").exists() or not any((tmp_path / "pch").iterdir())
