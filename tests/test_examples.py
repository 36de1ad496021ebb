"""The bundled examples: their layout, their tasks, and that every candidate passes the evaluator.

Fast tests check the files. `slow` tests compile the CPU candidates (a minute or so each on two
cores; the session cache of conftest.py builds each extension once). `gpu` tests compile and run the
CUDA candidates and are skipped where torch sees no GPU.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.errors import UsageError
from cuda_agent.evaluate import Code, EvalConfig, evaluate, load_candidate
from cuda_agent.examples import EXAMPLES_DIR, Example, get_example, list_examples
from cuda_agent.tasks import load_task

# What each example ships: {device: forms}.
EXPECTED = {
    "elementwise": {"cpu": ("single", "workspace"), "cuda": ("single", "workspace")},
    "fused_bias_chain": {"cpu": ("single", "workspace"), "cuda": ("single", "workspace")},
    "gemm_cublas": {"cuda": ("single", "workspace")},
    "row_softmax": {"cpu": ("single", "workspace"), "cuda": ("single", "workspace")},
}
CPU_JOBS = [(name, form) for name, devs in sorted(EXPECTED.items()) for form in devs.get("cpu", ())]
CUDA_JOBS = [(name, form) for name, devs in sorted(EXPECTED.items()) for form in devs.get("cuda", ())]
SRC = Path(__file__).resolve().parents[1] / "src"


# --- layout (fast) ---------------------------------------------------------------------------------

def test_list_examples_is_sorted_and_complete():
    examples = list_examples()
    assert [e.name for e in examples] == sorted(EXPECTED)
    for e in examples:
        assert isinstance(e, Example)
        assert e.directory == EXAMPLES_DIR / e.name
        assert e.task == e.directory / "task.py" and e.task.is_file()
        assert e.description, f"{e.name}: task.py needs a module docstring (its first line describes it)"
    assert COMPILE_TIMED in CPU_JOBS  # (the compile baseline is tested through that case)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_declares_exactly_its_candidates(name):
    ex = get_example(name)
    for device in ("cpu", "cuda"):
        found = ex.candidates(device)
        assert tuple(found) == EXPECTED[name].get(device, ()), (name, device)
        for form, path in found.items():
            if form == "single":
                assert path == ex.directory / f"{device}_single.py" and path.is_file()
            else:
                assert path == ex.directory / f"{device}_workspace"
                assert (path / "model_new.py").is_file()
                kernels = sorted(p.name for p in (path / "kernels").iterdir())
                assert any(k.endswith("_binding.cpp") for k in kernels), kernels
                want = ".cpp" if device == "cpu" else ".cu"
                assert any(k.endswith(want) and not k.endswith("_binding.cpp") for k in kernels), kernels
    assert ex.devices == tuple(EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_examples_task_loads(name):
    task = load_task(get_example(name).task)
    assert "class Model" in task.source


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_candidates_load_and_define_model_new(name):
    ex = get_example(name)
    for device in ("cpu", "cuda"):
        for form, path in ex.candidates(device).items():
            cand = load_candidate(path)
            assert cand.kind == ("file" if form == "single" else "workspace")
            tree = ast.parse(cand.model_new)
            assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), path
            if form == "workspace":
                assert "import cuda_extension" in cand.model_new
                assert cand.compiled_sources, path
            else:
                assert "load_inline" in cand.model_new


def test_inline_extension_names_are_unique():
    """Two single files sharing a load_inline name would rebuild over each other in the cache."""
    names = []
    for ex in list_examples():
        for device in ("cpu", "cuda"):
            single = ex.candidates(device).get("single")
            if single is None:
                continue
            for node in ast.walk(ast.parse(single.read_text())):
                if isinstance(node, ast.keyword) and node.arg == "name" and isinstance(node.value, ast.Constant):
                    names.append(node.value.value)
    singles = sum(1 for devs in EXPECTED.values() for forms in devs.values() if "single" in forms)
    assert len(names) == singles
    assert len(set(names)) == len(names), names


def test_example_folders_are_data_not_packages():
    """Only the top folder is a package; setuptools ships the rest as package data."""
    stray = [p for p in EXAMPLES_DIR.rglob("__init__.py") if p.parent != EXAMPLES_DIR]
    assert not stray


def test_an_unknown_example_is_a_usage_error_listing_the_names():
    with pytest.raises(UsageError) as info:
        get_example("no_such_example")
    for name in EXPECTED:
        assert name in str(info.value)


def test_examples_module_does_not_import_torch():
    code = ("import sys; import cuda_agent.examples as e; e.list_examples(); "
            "e.get_example('elementwise').candidates('cpu'); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(SRC)})


# --- CPU candidates (compile) ----------------------------------------------------------------------

def _cpu_config(cache_dir: Path, **kw) -> EvalConfig:
    kw.setdefault("compile_baseline", False)
    kw.setdefault("timing_budget_s", 0.2)
    return EvalConfig(device="cpu", cache_dir=cache_dir, **kw)


def _explain(res) -> str:
    return "\n".join(f"{r.code.value}: {r.message[:4000]}" for r in res.reasons)


# The case that is also timed against the torch.compile baseline (one evaluation serves both).
COMPILE_TIMED = ("fused_bias_chain", "workspace")


@pytest.mark.slow
@pytest.mark.parametrize("name,form", CPU_JOBS)
def test_each_cpu_candidate_passes_with_a_speedup(name, form, cache_dir, warm_evaluate):
    ex = get_example(name)
    timed = (name, form) == COMPILE_TIMED
    cfg = _cpu_config(cache_dir, compile_baseline=True, timing_budget_s=0.3) if timed else _cpu_config(cache_dir)
    res = warm_evaluate(load_task(ex.task), load_candidate(ex.candidates("cpu")[form]), cfg)
    assert res.correct, _explain(res)
    assert res.compiled
    assert res.reward >= 1
    assert res.speedup_eager is not None and res.speedup_eager > 0
    assert not res.failures, _explain(res)
    if timed and Code.BASELINE_COMPILE_UNAVAILABLE not in [r.code for r in res.reasons]:
        assert res.speedup_compile is not None and res.speedup_compile > 0
        assert res.times_ms["compile"].median > 0


# --- CUDA candidates (GPU machines only) -----------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name,form", CUDA_JOBS)
def test_each_cuda_candidate_passes(name, form, cache_dir):
    ex = get_example(name)
    cfg = EvalConfig(device="cuda", cache_dir=cache_dir, compile_baseline=False, timing_budget_s=0.5)
    res = evaluate(load_task(ex.task), load_candidate(ex.candidates("cuda")[form]), cfg)
    assert res.compiled, _explain(res)
    assert res.correct, _explain(res)
    assert res.reward >= 1
    assert not res.failures, _explain(res)
    if name == "fused_bias_chain":  # one fused kernel against eager's four
        assert res.speedup_eager is not None and res.speedup_eager > 1.0, res.times_ms
    # the speed of light: counted exactly, the GPU's peaks (its datasheet's where known), and a
    # fraction a real kernel can reach (above 1 only by a miscount)
    sol = res.sol
    assert sol["exact"] is True and sol["bound"] in ("memory", "compute"), sol
    assert 0 < sol["fraction"] <= 1.0, sol
    if any(gpu in str(res.device.get("name")) for gpu in ("H100", "H200", "A100")):
        assert sol["peaks"]["source"].startswith("datasheet"), sol["peaks"]
    if name == "elementwise":  # x in, y out: 2048 x 2048 float32 each, nothing else to move
        assert sol["bytes"] == 2 * 2048 * 2048 * 4 and sol["bound"] == "memory", sol
