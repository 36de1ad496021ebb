"""Workspace builds (evaluate/build.py): the content-addressed cache, and the incremental slot in which
a workspace's next build compiles again only the units whose source changed."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.evaluate import build
from cuda_agent.evaluate.build import MODULE_NAME, build_extension, stage_sources
from cuda_agent.evaluate.candidate import Candidate

KERNEL = "void twice_launch(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = %s * x[i]; }\n"
BINDING = """
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "binding_registry.h"
#include "twice.h"
void twice_launch(const float* x, float* y, long n);
torch::Tensor twice(const torch::Tensor& x) {
  auto y = torch::empty_like(x);
  twice_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
static void reg(pybind11::module& m) { m.def("twice", &twice); }
REGISTER_BINDING(twice, reg);
"""


def _candidate(ws: Path, factor: str = "2.0f", header: str = "// nothing\n") -> Candidate:
    return Candidate(origin=str(ws), kind="workspace", model_new="# ModelNew\n",
                     kernels={"twice.cpp": KERNEL % factor, "twice_binding.cpp": BINDING, "twice.h": header})


def _slot(cache: Path) -> Path:
    [slot] = [d for d in (cache / "builds" / "incremental").iterdir() if d.is_dir()]
    return slot


def _objects(slot: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (slot / "build").glob("*.o")}


def _call(so: Path, factor_expected: float) -> None:
    """Load the module in a process of its own (one module of this name per process, as in a runner)."""
    code = ("import importlib.machinery as m, importlib.util as u, sys, torch\n"
            "spec = u.spec_from_file_location('cuda_extension', sys.argv[1],\n"
            "    loader=m.ExtensionFileLoader('cuda_extension', sys.argv[1]))\n"
            "mod = u.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            "print(mod.twice(torch.ones(3)).tolist())")
    out = subprocess.run([sys.executable, "-c", code, str(so)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([factor_expected] * 3)


@pytest.mark.slow
def test_a_workspaces_next_build_compiles_only_what_changed_a_held_slot_is_not_waited_for(tmp_path):
    cache, ws = tmp_path / "cache", tmp_path / "ws"
    first = build_extension(_candidate(ws), "cpu", None, cache, 600)
    assert first.ok and not first.cached, first.log
    slot = _slot(cache)
    before = _objects(slot)
    assert set(before) == {"twice.o", "twice_binding.o"}
    # our binding.cpp was compiled once for this toolchain, outside the slot, and linked from there
    [shared] = (cache / "builds" / "binding").glob("*/binding.o")
    shared_mtime = shared.stat().st_mtime_ns
    ninja = (slot / "build" / "build.ninja").read_text()
    assert str(shared) in ninja and "build binding.o:" not in ninja

    time.sleep(0.05)
    second = build_extension(_candidate(ws, "3.0f"), "cpu", None, cache, 600)
    assert second.ok and not second.cached and second.key != first.key, second.log
    after = _objects(slot)
    assert after["twice.o"] != before["twice.o"]  # the edited kernel was compiled again
    assert after["twice_binding.o"] == before["twice_binding.o"]
    # each key's module is its own: the first build's published module still doubles
    _call(second.so_path, 3.0)
    assert first.so_path.is_file() and first.so_path != second.so_path

    third = build_extension(_candidate(ws, "3.0f", "// a header edited\n"), "cpu", None, cache, 600)
    assert third.ok, third.log
    rebuilt = _objects(slot)
    assert all(rebuilt[name] != after[name] for name in after)  # a header: every unit again

    # the same sources again: the content-addressed cache, no build at all
    again = build_extension(_candidate(ws, "3.0f", "// a header edited\n"), "cpu", None, cache, 600)
    assert again.cached and again.so_path == third.so_path

    # a slot held by another build of this workspace is not waited for, and a killed build clears it
    before = _objects(slot)
    with open(slot / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        other = build_extension(_candidate(ws, "5.0f"), "cpu", None, cache, 600)
    assert other.ok and not other.cached, other.log
    assert _objects(slot) == before  # built in a fresh folder, the slot untouched
    _call(other.so_path, 5.0)
    assert shared.stat().st_mtime_ns == shared_mtime  # every build linked the one object

    killed = build_extension(_candidate(ws, "7.0f"), "cpu", None, cache, 0.5)
    assert killed.timed_out and not killed.ok
    assert not (slot / "build").exists()  # nothing half-written is left for the next build


def test_staging_removes_the_objects_that_may_no_longer_match(tmp_path):
    ws, src = tmp_path / "ws", tmp_path / "slot"
    src.mkdir()
    stage_sources(src, _candidate(ws))
    assert (src / "kernels" / "twice.cpp").read_text() == KERNEL % "2.0f" and (src / "binding.cpp").is_file()
    (src / "build").mkdir()
    for name in ("binding.o", "twice.o", "twice_binding.o", f"{MODULE_NAME}.so", "lock", "build.ninja"):
        (src / "build" / name).write_text("x")
    kept_mtime = (src / "kernels" / "twice_binding.cpp").stat().st_mtime_ns

    stage_sources(src, _candidate(ws, "4.0f"))
    assert sorted(p.name for p in (src / "build").iterdir()) == ["binding.o", "build.ninja", "twice_binding.o"]
    assert (src / "kernels" / "twice_binding.cpp").stat().st_mtime_ns == kept_mtime  # unchanged: not written

    (src / "build" / "twice.o").write_text("x")
    (src / "kernels" / "leftover.cu").write_text("// from an earlier candidate")
    (src / "build" / "leftover.cuda.o").write_text("x")
    stage_sources(src, _candidate(ws, "4.0f"))
    assert not (src / "kernels" / "leftover.cu").exists() and not (src / "build" / "leftover.cuda.o").exists()
    assert (src / "build" / "twice.o").exists()

    stage_sources(src, _candidate(ws, "4.0f", "#define CHANGED 1\n"))
    assert not (src / "build").exists()


def test_slots_are_pruned_to_the_most_recent_never_one_in_use(tmp_path):
    root = tmp_path / "incremental"
    slots = []
    for i in range(5):
        d = root / f"{i:024x}"
        d.mkdir(parents=True)
        (d / ".lock").touch()
        os.utime(d, (1000 + i, 1000 + i))
        slots.append(d)
    with open(slots[0] / ".lock", "a") as held:  # the oldest, but another build holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        build._prune_slots(root, keep=2, holding=slots[1])
    assert sorted(d.name for d in root.iterdir()) == sorted(d.name for d in (slots[0], slots[1], slots[3], slots[4]))
