"""Shape trials (`EvalConfig.shapes`, evaluate/shapes.py): which of a task's sizes may change, and
end to end on the CPU backend, that a candidate with the task's sizes baked in is told from a
general one without its reward changing, unless `require_generalization`.

The candidates here are PyTorch code (kernelbench profile, no compilation), so these stay fast; a
compiled C++ kernel with the element count as a constant, and its honest twin, are cases of the
adversarial suite (cat10_hardcoded_numel, honest/any_size_ext).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cuda_agent.evaluate import Code, EvalConfig, EvalResult, evaluate, load_candidate
from cuda_agent.evaluate.shapes import analyse, max_in_bytes, scaled, size_sets
from cuda_agent.tasks import load_task

HEADER = "import torch\nimport torch.nn as nn\n"

# relu(x + bias): the bias's length is built into the model; the batch and the middle dimension
# are the inputs' alone.
TASK = HEADER + textwrap.dedent("""
    class Model(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.bias = nn.Parameter(torch.randn(features))

        def forward(self, x):
            return torch.relu(x + self.bias)

    batch_size = 16
    dim = 32
    features = 64

    def get_inputs():
        return [torch.randn(batch_size, dim, features)]

    def get_init_inputs():
        return [features]
    """)

MODEL_NEW = """
    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.bias = nn.Parameter(torch.zeros(features))

        def forward(self, x):
{body}
    """

HONEST = "            return (x + self.bias).clamp_min(0)"
# the task's shape written into forward: an error at any other size
RESHAPED = "            return (x.reshape(16, 32, 64) + self.bias).clamp_min(0)"
# a fixed element count, as a kernel launched over the task's n: at a larger size the output's
# tail is never written; at a smaller one every element is (and nothing shows)
FIXED_COUNT = """\
            n = 16 * 32 * 64
            out = torch.zeros_like(x).view(-1)
            flat = (x + self.bias).clamp_min(0).reshape(-1)
            out[:n] = flat[:n]
            return out.view_as(x)"""


def _file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _candidate(tmp_path: Path, body: str) -> Path:
    return _file(tmp_path, "cand.py", HEADER + textwrap.dedent(MODEL_NEW.format(body=body)))


def _run(evaluate, tmp_path: Path, cache_dir: Path, body: str, task: str = TASK, **kw) -> EvalResult:
    kw = {"policy": "kernelbench", "timing": False, "timeout_s": 60, "shapes": 2, **kw}
    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, **kw)
    return evaluate(load_task(_file(tmp_path, "task.py", task)), load_candidate(_candidate(tmp_path, body)), cfg)


# --- which sizes change, and to what (pure) --------------------------------------------------------

def test_only_the_constants_get_inputs_alone_reads_are_scaled():
    sizes = analyse(TASK)
    assert sizes.scalable == ("batch_size", "dim") and sizes.why is None
    assert sizes.values == {"batch_size": 16, "dim": 32, "features": 64}
    sets = size_sets(sizes)
    assert [s for s, _, _ in sets] == [1.5, 0.5, 2.0, 0.25, 3.0, 0.125]
    assert sets[0][1] == {"batch_size": 24, "dim": 48} and sets[1][1] == {"batch_size": 8, "dim": 16}


def test_constants_the_model_is_built_from_stay_with_the_ones_they_come_from():
    src = HEADER + textwrap.dedent("""
        N = 4
        M = 8
        K = 2 * M          # K builds the model: M stays, and so does K
        rows = N * 16      # computed again when N is scaled
        shape = (N, 3)     # computed once at import: N would not reach it
        class Model(nn.Module):
            def __init__(self, k):
                super().__init__()
            def forward(self, x, y):
                return x
        def _make(r):
            return torch.randn(r, L)
        L = 12
        def get_inputs():
            return [_make(rows), torch.randn(shape)]
        def get_init_inputs():
            return [K]
        """)
    sizes = analyse(src)
    # N feeds `shape` (a module-level statement) and is frozen; L is read through the helper
    assert sizes.scalable == ("L",), sizes
    (_, new, changed), *_ = size_sets(sizes)
    assert new == {"L": 18} and changed == {"L": 18}
    src2 = src.replace("torch.randn(shape)", "torch.randn(N, 3)").replace("shape = (N, 3)", "")
    sizes2 = analyse(src2)
    assert sizes2.scalable == ("N", "L")
    _, new, changed = size_sets(sizes2)[0]
    assert new == {"N": 6, "L": 18} and changed == {"N": 6, "rows": 96, "L": 18}


@pytest.mark.parametrize("src,why", [
    ("def get_inputs():\n    return [torch.randn(16, 16)]\n", "reads no module-level integer"),
    ("n = 16\nclass Model:\n    size = n\ndef get_inputs():\n    return [torch.randn(n)]\n", "also builds the model"),
    ("n = 16\ndef get_inputs():\n    return [torch.randn(n)]\ndef get_init_inputs():\n    return [n]\n",
     "also builds the model"),
    ("n = 1\ndef get_inputs():\n    return [torch.randn(n)]\n", "0 or 1"),
    ("n = 16\nn = 32\ndef get_inputs():\n    return [torch.randn(n)]\n", "reads no module-level"),
])
def test_a_task_without_a_scalable_size_says_why(src, why):
    sizes = analyse(HEADER + src)
    assert sizes.scalable == () and why in sizes.why


def test_scaling_keeps_alignment_where_it_lands_near_and_memory_grows_only_for_small_inputs():
    assert [scaled(16, 1.5), scaled(32, 1.5), scaled(16384, 1.5), scaled(16, 0.5), scaled(100, 1.5),
            scaled(3, 0.25), scaled(24, 0.5)] == [24, 48, 24576, 8, 150, 1, 12]
    assert max_in_bytes(1 << 20) == 4 << 20
    assert max_in_bytes(1 << 30) == 1 << 30  # large inputs: only smaller sizes fit the bound


# --- end to end --------------------------------------------------------------------------------------

def test_an_honest_candidate_generalizes(tmp_path, cache_dir, warm_evaluate):
    res = _run(warm_evaluate, tmp_path, cache_dir, HONEST)
    assert res.correct and res.reward == 1, res.reasons
    gen = res.generalization
    assert gen["generalizes"] is True, gen
    assert [t["sizes"] for t in gen["tried"]] == [{"batch_size": 24, "dim": 48}, {"batch_size": 8, "dim": 16}]
    assert all(t["ok"] and t["reason"] is None for t in gen["tried"]) and gen["skipped"] == []
    assert "shapes" in res.phases_s
    assert res.to_json()["generalization"] == gen


def test_a_candidate_with_the_tasks_shape_written_in_does_not_generalize_and_keeps_its_reward(tmp_path, cache_dir, warm_evaluate):
    res = _run(warm_evaluate, tmp_path, cache_dir, RESHAPED)
    assert res.correct and res.reward == 1 and not res.failures, res.reasons
    gen = res.generalization
    assert gen["generalizes"] is False
    assert [(t["sizes"], t["ok"], t["reason"]) for t in gen["tried"]] == [
        ({"batch_size": 24, "dim": 48}, False, "runtime_error"), ({"batch_size": 8, "dim": 16}, False, "runtime_error")]
    assert "invalid for input of size" in gen["tried"][0]["message"]
    assert "failed at 2 of 2" in gen["why"]


# scratch memory that grows with the inputs, on a device with too little left for 1.5x the task's
OUT_OF_MEMORY_WHEN_LARGER = """\
            if x.numel() > 16 * 32 * 64:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.54 GiB")
            return (x + self.bias).clamp_min(0)"""
# the same error raised at every size but the task's, to dodge the trials
OUT_OF_MEMORY_WHEN_OTHER = """\
            if x.numel() != 16 * 32 * 64:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.54 GiB")
            return (x + self.bias).clamp_min(0)"""


def test_out_of_memory_at_larger_sizes_is_left_to_a_second_try_alone_and_smaller_ones_are_tried(tmp_path, cache_dir):
    """In a try that a second try alone will follow (the Evaluator's first), out of memory at a
    larger size is skipped and smaller sizes are tried in its place; where none follows (a lone
    evaluate()), it counts."""
    from cuda_agent.evaluate.evaluation import Evaluation

    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False, timeout_s=60, shapes=2,
                     require_generalization=True)
    task = load_task(_file(tmp_path, "task.py", TASK))
    cand = load_candidate(_candidate(tmp_path, OUT_OF_MEMORY_WHEN_LARGER))
    lone = evaluate(task, cand, cfg)
    assert not lone.correct and [r.code for r in lone.failures] == [Code.SHAPE_SPECIFIC]
    assert [(t["scale"], t["ok"], t["reason"]) for t in lone.generalization["tried"]] == [
        (1.5, False, "out_of_memory"), (0.5, True, None)]
    res = Evaluation(task, cand, cfg, retry_alone=True).run()
    assert res.correct and res.reward == 1 and not res.failures, res.reasons
    gen = res.generalization
    assert gen["generalizes"] is True, gen
    assert [s["scale"] for s in gen["skipped"]] == [1.5, 2.0]
    assert all("out of memory at" in s["why"] and "Tried to allocate" in s["why"] and s["reason"] == "out_of_memory"
               for s in gen["skipped"])
    assert [(t["scale"], t["ok"]) for t in gen["tried"]] == [(0.5, True), (0.25, True)]


def test_out_of_memory_at_larger_sizes_counts_in_the_evaluators_second_try_alone(tmp_path, cache_dir):
    """Through an Evaluator, the skip is the cue for a second try with the device to itself, where
    out of memory is no neighbour's doing: a kernel that feigns it at larger sizes (here it raises
    the error; on a GPU it could ask for more than the device has) does not generalise."""
    from cuda_agent.evaluate import Evaluator

    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False, timeout_s=60, shapes=2,
                     require_generalization=True)
    with Evaluator(cfg, jobs=1, warm=0) as ev:
        res = ev.evaluate(load_task(_file(tmp_path, "task.py", TASK)),
                          load_candidate(_candidate(tmp_path, OUT_OF_MEMORY_WHEN_LARGER)))
    assert not res.correct and [r.code for r in res.failures] == [Code.SHAPE_SPECIFIC], res.reasons
    retried = [r for r in res.reasons if r.code is Code.RETRIED_ALONE]
    assert len(retried) == 1 and "a shape trial at 1.5x" in retried[0].message
    gen = res.generalization
    assert gen["generalizes"] is False and gen["skipped"] == []
    assert [(t["scale"], t["ok"], t["reason"]) for t in gen["tried"]] == [(1.5, False, "out_of_memory"), (0.5, True, None)]


def test_out_of_memory_at_a_smaller_size_is_the_candidates_failure(tmp_path, cache_dir):
    """Even in a try that leaves larger sizes to a second try alone."""
    from cuda_agent.evaluate.evaluation import Evaluation

    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False, timeout_s=60, shapes=2,
                     require_generalization=True)
    res = Evaluation(load_task(_file(tmp_path, "task.py", TASK)),
                     load_candidate(_candidate(tmp_path, OUT_OF_MEMORY_WHEN_OTHER)), cfg, retry_alone=True).run()
    assert not res.correct and [r.code for r in res.failures] == [Code.SHAPE_SPECIFIC]
    gen = res.generalization
    assert gen["generalizes"] is False
    assert [(t["scale"], t["ok"], t["reason"]) for t in gen["tried"]] == [
        (0.5, False, "out_of_memory"), (0.25, False, "out_of_memory")]


def test_require_generalization_makes_a_shape_specific_candidate_incorrect(tmp_path, cache_dir, warm_evaluate):
    res = _run(warm_evaluate, tmp_path, cache_dir, FIXED_COUNT, require_generalization=True)
    assert not res.correct and res.reward == -1
    assert [r.code for r in res.failures] == [Code.SHAPE_SPECIFIC]
    gen = res.generalization
    # the larger size leaves the tail unwritten; the smaller one is computed in full
    assert [(t["scale"], t["ok"], t["reason"]) for t in gen["tried"]] == [(1.5, False, "output_mismatch"), (0.5, True, None)]
    assert "{'batch_size': 24, 'dim': 48}" in res.failures[0].message


def test_a_task_whose_sizes_all_build_the_model_gives_null_with_why(tmp_path, cache_dir, warm_evaluate):
    task = TASK.replace("return [torch.randn(batch_size, dim, features)]", "return [torch.randn(16, 32, features)]")
    res = _run(warm_evaluate, tmp_path, cache_dir, HONEST, task=task)
    assert res.correct and res.reward == 1
    gen = res.generalization
    assert gen["generalizes"] is None and gen["tried"] == [] and "also builds the model" in gen["why"]


def test_sizes_the_reference_cannot_take_or_too_large_are_skipped_not_failed(tmp_path, cache_dir):
    # four scaled sizes: at 1.5x (and 2x, 3x) the inputs take over 4 times the task's bytes, the
    # bound for small inputs; at 0.5x and 0.125x the width is odd, which the reference refuses; at
    # 0.25x (1, 1, 1, 2) the candidate is tried
    task = HEADER + textwrap.dedent("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
            def forward(self, x):
                assert x.shape[-1] % 2 == 0, "the reference takes even widths only"
                return torch.relu(x)
        a, b, c, w = 4, 4, 4, 6
        def get_inputs():
            return [torch.randn(a, b, c, w)]
        def get_init_inputs():
            return []
        """)
    honest = HEADER + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False, timeout_s=60, shapes=3)
    res = evaluate(load_task(_file(tmp_path, "t.py", task)), load_candidate(_file(tmp_path, "c.py", honest)), cfg)
    assert res.correct and not res.failures, res.reasons
    gen = res.generalization
    skipped = {s["scale"]: s["why"] for s in gen["skipped"]}
    assert set(skipped) == {1.5, 0.5, 2.0, 3.0, 0.125}, gen
    assert "over the bound" in skipped[1.5] and "over the bound" in skipped[3.0]  # 6*6*6*9 floats: 5.1x
    assert "even widths only" in skipped[0.5]  # w = 3: the reference itself refuses
    assert [(t["scale"], t["sizes"], t["ok"]) for t in gen["tried"]] == [(0.25, {"a": 1, "b": 1, "c": 1, "w": 2}, True)]
    assert gen["generalizes"] is True


def test_shape_trials_are_configured_with_care():
    with pytest.raises(ValueError, match="shapes=-1"):
        EvalConfig(shapes=-1)
    with pytest.raises(ValueError, match="require_generalization needs shape trials"):
        EvalConfig(require_generalization=True)
    assert EvalConfig().shapes == 0  # off by default: KernelBench's contract fixes the shapes


def test_a_size_set_whose_tensors_pass_2_pow_31_elements_is_skipped_not_held_against_the_kernel(tmp_path, monkeypatch):
    """Scaling up may push a tensor past 2^31 elements where the task's stay below (a 32768^2
    product's output at 1.5x): there 32-bit index arithmetic, exact at the task's sizes and what fast
    kernels use, overflows. Such a set is skipped with why, not counted as the kernel's failure.
    (The bound is lowered here: the judge compares against it, and 2^31 floats do not fit a test.)"""
    from cuda_agent.evaluate.worker import judge as judge_mod

    task = Path(__file__).parent / "adversarial" / "tasks" / "relu_sized.py"
    judge = judge_mod.Judge()
    judge.cmd_setup(task_source=task.read_text(), origin="relu_sized.py", device="cpu", init_seed=1,
                    weights_seed=2, shm_dir=str(tmp_path), touch="bf16")
    judge.cmd_prepare([{"trial": "c0", "seed": 3, "stress": None, "fill": None}])
    assert judge.base_numel == 16 * 256
    monkeypatch.setattr(judge_mod, "INT32_ELEMENTS", 20 * 256)  # between the task's 16 rows and 24
    sized = {"max_in_bytes": 1 << 30, "grows": True}
    up = judge.cmd_prepare([{"trial": "g0", "seed": 4, "stress": None, "fill": None}],
                           sizes={**sized, "set": {"batch_size": 24}})["items"][0]
    assert up["skip"] and "past 2^31" in up["why"] and "g0" not in judge.trials
    down = judge.cmd_prepare([{"trial": "g1", "seed": 5, "stress": None, "fill": None}],
                             sizes={**sized, "set": {"batch_size": 8}})["items"][0]
    assert not down["skip"] and "g1" in judge.trials
