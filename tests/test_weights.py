"""The reference's weights (evaluate/weights.py) and the stress inputs (worker/stress.py, `stress_input`): re-drawn
learned state that a kernel cannot ignore, matched into ModelNew by name or by value, and stress
trials that keep the structure of get_inputs(). Unit tests of the functions, then evaluations on the
CPU backend through real worker processes."""

import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from cuda_agent.evaluate import EvalConfig, load_candidate
from cuda_agent.evaluate import weights
from cuda_agent.evaluate.worker.stress import stress_input
from cuda_agent.tasks import load_task

DATA = Path(__file__).parent / "data"
ADV = Path(__file__).parent / "adversarial"


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.ln = nn.LayerNorm(4)
        self.bn = nn.BatchNorm1d(4)
        self.prelu = nn.PReLU()
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))
        self.out = nn.Linear(4, 4, bias=False)
        self.tied = self.out  # the same module twice: its weight under two names


# --- unit: what is learned, and how it is re-drawn -------------------------------------------------

def test_learned_state_is_floating_parameters_and_running_statistics_not_constant_buffers():
    names = set(weights.learned(_Net()))
    assert {"fc.weight", "fc.bias", "ln.weight", "ln.bias", "bn.weight", "bn.bias", "bn.running_mean",
            "bn.running_var", "prelu.weight", "out.weight"} <= names
    assert "mask" not in names and "bn.num_batches_tracked" not in names


def test_redraw_replaces_every_default_constant_keeping_domain_shape_and_dtype():
    torch.manual_seed(0)
    net = _Net().eval()
    before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    learned = weights.learned(net)
    drawn = weights.redraw(learned, seed=123)
    assert set(drawn) == set(learned)
    after = net.state_dict()
    for k, v in before.items():
        assert after[k].shape == v.shape and after[k].dtype == v.dtype
    for k in learned:
        assert not torch.equal(after[k], before[k]), k
    # ones become c * U(0.5, 1.5): positive stays positive (the variance), zeros become U(-0.5, 0.5)
    for k in ("ln.weight", "bn.weight", "bn.running_var"):
        assert bool(((after[k] >= 0.5) & (after[k] <= 1.5)).all()), k
        assert not weights.is_constant(after[k]), k
    for k in ("ln.bias", "bn.bias", "bn.running_mean"):
        assert bool((after[k].abs() <= 0.5).all()) and not weights.is_constant(after[k]), k
    assert 0.125 <= float(after["prelu.weight"]) <= 0.375  # 0.25 scaled
    # a random init is drawn again within its own range
    w0 = before["fc.weight"]
    assert float(after["fc.weight"].min()) >= float(w0.min()) and float(after["fc.weight"].max()) <= float(w0.max())
    # constants of the model stay as built
    assert torch.equal(after["mask"], before["mask"])
    assert torch.equal(after["bn.num_batches_tracked"], before["bn.num_batches_tracked"])
    # tied parameters stay tied
    assert net.out.weight is net.tied.weight


def test_redraw_keeps_exact_zeros_and_is_reproducible_from_its_seed():
    def tri():
        torch.manual_seed(1)
        return {"w": nn.Parameter(torch.tril(torch.randn(16, 16)))}

    a, b = tri(), tri()
    weights.redraw(a, seed=7)
    weights.redraw(b, seed=7)
    assert torch.equal(a["w"], b["w"])
    assert bool((torch.triu(a["w"], diagonal=1) == 0).all())


def test_degenerate_outputs_are_non_finite_or_constant():
    assert weights.degenerate(torch.randn(8)) is None
    assert "not finite" in weights.degenerate(torch.tensor([1.0, float("nan")]))
    assert "constant" in weights.degenerate((torch.randn(3), torch.zeros(5)))
    assert weights.degenerate(torch.zeros(1)) is None  # a single number is not "constant"
    assert weights.degenerate(torch.arange(4)) is None  # integers are not judged here


# --- unit: where each tensor goes --------------------------------------------------------------------

def test_match_by_value_pairs_renamed_tensors_and_tells_equal_constants_apart_by_name():
    torch.manual_seed(0)
    ref = _Net().state_dict()
    default = {k: v.clone() for k, v in ref.items()}
    # ModelNew's tensors under other names and in another order; bn.weight and running_var are both
    # ones: the last name part decides
    mine = {"norm_var": default["bn.running_var"].clone(), "weight": default["bn.weight"].clone(),
            "w": default["fc.weight"].clone(), "b": default["fc.bias"].clone(), "fused": torch.randn(4, 12)}
    mine["running_var"] = mine.pop("norm_var")
    m = weights.match_by_value(default, mine)
    assert m.pairs["w"] == "fc.weight" and m.pairs["b"] == "fc.bias"
    assert m.pairs["weight"] in ("bn.weight", "ln.weight")  # both ones; a `weight` either way
    assert m.pairs["running_var"] == "bn.running_var"
    assert m.extra == ["fused"] and "bn.running_mean" in m.missing


def test_a_strict_name_mismatch_says_which_tensor_to_rename():
    torch.manual_seed(0)
    ref = {"fc.weight": torch.randn(4, 8), "fc.bias": torch.randn(4)}
    specs = {"w": {"shape": [4, 8], "dtype": "float32"}, "fc.bias": {"shape": [4], "dtype": "float32"}}
    m = weights.match_by_value(ref, {"w": ref["fc.weight"].clone(), "fc.bias": ref["fc.bias"].clone()})
    hint = weights.mismatch_hint(ref, specs, m)
    assert "missing: fc.weight" in hint and "unexpected: w" in hint
    assert "`w` holds Model's `fc.weight`" in hint and "--policy kernelbench" in hint


# --- unit: stress inputs keep the structure of get_inputs() --------------------------------------------

@pytest.mark.parametrize("variant", [0, 1])
def test_stress_inputs_keep_zeros_signs_ranges_and_integers(variant):
    torch.manual_seed(0)
    tril = torch.tril(torch.randn(64, 64))
    s = stress_input(tril, variant)
    assert bool((torch.triu(s, diagonal=1) == 0).all()) and not torch.equal(s, tril)
    relu = torch.randn(256).clamp_min(0)
    assert bool((stress_input(relu, variant) >= 0).all())
    probs = torch.rand(256)
    s = stress_input(probs, variant)
    assert bool(((s >= 0) & (s <= 1)).all()) and not torch.allclose(s, probs)
    signed = torch.rand(256) * 2 - 1
    s = stress_input(signed, variant)
    assert bool((s.abs() <= 1).all()) and torch.equal(torch.sign(s), torch.sign(signed))
    labels = torch.randint(0, 10, (32,)).float()
    assert stress_input(labels, variant) is labels
    for t in (torch.randint(0, 5, (8,)), torch.rand(8) > 0.5, torch.tensor([1.0, float("-inf")])):
        assert stress_input(t, variant) is t


@pytest.mark.parametrize("variant", [0, 1])
def test_stress_inputs_keep_probability_distributions_summing_to_1(variant):
    # rows of a softmax (KernelBench's KL-divergence task) stay rows that sum to 1, flatter or
    # sharper; a kernel may rely on that (a real one drops terms whose target is below 1e-8, which
    # the unnormalised x^4 of its ~6e-5 entries all were)
    torch.manual_seed(0)
    probs = torch.rand(64, 4096).softmax(dim=-1)
    s = stress_input(probs, variant)
    assert torch.allclose(s.sum(-1), torch.ones(64), atol=1e-5) and bool((s > 1e-8).all())
    spread = (s.max(-1).values / s.min(-1).values).median()
    assert (spread > 10) if variant else (spread < 1.5)  # e^4 sharper, or e^(1/4) flatter
    cols = torch.rand(16, 8, 32).softmax(dim=1)  # distributions along a middle dimension
    assert torch.allclose(stress_input(cols, variant).sum(1), torch.ones(16, 32), atol=1e-5)
    plain = torch.rand(64, 64)  # in range, but not distributions: as before
    assert torch.equal(stress_input(plain, variant), plain.pow((0.25, 4.0)[variant]))


def test_stress_inputs_beyond_the_distribution_for_plain_gaussian_inputs():
    torch.manual_seed(0)
    x = torch.randn(1024)
    big = stress_input(x, 1)
    assert float(big.abs().max()) > 6 * float(x.abs().max()) and float(big.mean()) < -0.5  # x 8 - 1
    assert stress_input(3, 0) == 3 and stress_input("s", 1) == "s"


# --- end to end on the CPU backend ----------------------------------------------------------------------

def _eval(evaluate, tmp_path, cache_dir, task: Path, body: str, header: str = "", **kw):
    cand = tmp_path / "cand.py"
    cand.write_text(header + textwrap.dedent(body))
    kw.setdefault("policy", "kernelbench")
    cfg = EvalConfig(device="cpu", cache_dir=cache_dir, timing=False, timeout_s=120, **kw)
    return evaluate(load_task(task), load_candidate(cand), cfg)


def _codes(res):
    return [r.code.value for r in res.failures]


def _task(tmp_path, name: str, source: str) -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(source))
    return p


HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def test_an_honest_layernorm_passes_with_its_affine_redrawn_by_name(tmp_path, cache_dir, warm_evaluate):
    task = ADV / "tasks" / "layernorm.py"
    honest = _eval(warm_evaluate, tmp_path, cache_dir, task, """
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.ln = nn.LayerNorm(features)
            def forward(self, x):
                return F.layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias, self.ln.eps)
        """, HEADER)
    assert honest.correct and honest.reward == 1, honest.reasons
    assert honest.weights["rule"] == "redrawn" and honest.weights["matched_by"] == "name"
    assert honest.weights["redrawn"] == honest.weights["learned"] == 2
    assert honest.seeds["weights"] not in honest.seeds["all"]
    # one without its affine fails: cat10_default_init_layernorm in the adversarial suite


def test_a_module_moved_inside_inference_mode_at_init_takes_the_weights(tmp_path, cache_dir, warm_evaluate):
    """A warm-up in __init__ under torch.inference_mode() that moves or converts the module (as
    CUDA-L1's EfficientNet does with `.cuda()`) leaves its buffers inference tensors, which take an
    in-place copy only inside inference mode: loading the reference's running statistics into them
    is not the candidate's runtime error."""
    res = _eval(warm_evaluate, tmp_path, cache_dir, ADV / "tasks" / "bn_relu.py", """
        class ModelNew(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.bn = nn.BatchNorm2d(channels)
                with torch.inference_mode():
                    self.to(torch.float64).to(torch.float32)
                assert self.bn.running_var.is_inference()
            def forward(self, x):
                with torch.inference_mode():
                    return torch.relu(self.bn(x))
        """, HEADER)
    assert res.correct and res.reward == 1, res.reasons
    assert res.weights["rule"] == "redrawn" and res.weights["redrawn"] == 4


def test_renamed_parameters_get_the_redrawn_weights_by_value_under_kernelbench(tmp_path, cache_dir, warm_evaluate):
    # a pattern of a real kernel: a temporary nn.Linear whose tensors are kept under other names
    body = """
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                tmp = nn.Linear(in_features, out_features)
                self.weight = tmp.weight
                self.linear_bias = tmp.bias
            def forward(self, x):
                return torch.relu(F.linear(x, self.weight, self.linear_bias))
        """
    task = ADV / "tasks" / "linear_relu.py"
    res = _eval(warm_evaluate, tmp_path, cache_dir, task, body, HEADER)
    assert res.correct and res.reward == 1, res.reasons
    assert res.weights["rule"] == "redrawn" and res.weights["matched_by"] == "value"
    assert res.weights["copied"] == 2 and res.weights["kept_own"] == []
    runtime_only = _eval(warm_evaluate, tmp_path, cache_dir, task, body, HEADER, policy="none")
    assert runtime_only.correct, runtime_only.reasons


def test_fused_parameters_fall_back_to_the_same_seed_rule_and_say_so(tmp_path, cache_dir, warm_evaluate):
    res = _eval(warm_evaluate, tmp_path, cache_dir, ADV / "tasks" / "linear_relu.py", """
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                fc = nn.Linear(in_features, out_features)
                # weight and bias fused into one tensor: no tensor of ModelNew is Model's fc.weight
                self.wb = nn.Parameter(torch.cat([fc.weight.detach(), fc.bias.detach()[:, None]], dim=1))
            def forward(self, x):
                return torch.relu(F.linear(x, self.wb[:, :-1], self.wb[:, -1]))
        """, HEADER)
    assert res.correct and res.reward == 1, res.reasons
    assert res.weights["rule"] == "same_seed" and "fc.weight" in res.weights["note"]
    assert res.weights["kept_own"] == ["wb"]


def test_a_weight_copied_into_another_layout_at_init_falls_back_to_the_same_seed_rule(tmp_path, cache_dir, warm_evaluate):
    """A real-kernel pattern: the Linear kept, and its weight transposed into a buffer in __init__
    that forward reads. The buffer holds Model's fc.weight in another order, so it was copied at init
    and stays at the default init whatever is loaded: KernelBench's same-seed rule applies, while
    constant-init tensors are still re-drawn (a copy that also skips a bias still fails)."""
    task = ADV / "tasks" / "linear_relu.py"
    res = _eval(warm_evaluate, tmp_path, cache_dir, task, """
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.fc = nn.Linear(in_features, out_features)
                self.register_buffer("w_t", self.fc.weight.detach().t().contiguous())  # [in, out]
            def forward(self, x):
                return torch.relu(x @ self.w_t + self.fc.bias)
        """, HEADER)
    assert res.correct and res.reward == 1, res.reasons
    assert res.weights["rule"] == "same_seed" and "w_t (a copy of fc.weight" in res.weights["note"]
    skips_bias = _eval(warm_evaluate, tmp_path, cache_dir, task, """
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.fc = nn.Linear(in_features, out_features)
                self.register_buffer("w_t", self.fc.weight.detach().t().contiguous())
            def forward(self, x):
                return torch.relu(x @ self.w_t)
        """, HEADER)
    assert _codes(skips_bias) == ["output_mismatch"], skips_bias.reasons


def test_a_weight_scaled_into_a_buffer_at_init_is_a_copy_too(tmp_path, cache_dir, warm_evaluate):
    """CUDA-L1's pattern (level 2 problem 12): the Linear's tensors kept as parameters, and forward
    reading buffers derived from them in __init__, transposed and multiplied by a constant of the
    model. They are affine images of Model's weights, copies as much as a transpose is."""
    res = _eval(warm_evaluate, tmp_path, cache_dir, ADV / "tasks" / "linear_relu.py", """
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(out_features, in_features))
                self.bias = nn.Parameter(torch.empty(out_features))
                nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
                nn.init.uniform_(self.bias, -in_features ** -0.5, in_features ** -0.5)
                with torch.no_grad():
                    self.register_buffer("w_t_scaled", (self.weight * 2.0).t().contiguous())
                    self.register_buffer("b_scaled", self.bias * 2.0)
            def forward(self, x):
                return torch.relu(torch.addmm(self.b_scaled, x, self.w_t_scaled)) * 0.5
        """, HEADER)
    assert res.correct and res.reward == 1, res.reasons
    assert res.weights["rule"] == "same_seed" and "w_t_scaled (a copy of" in res.weights["note"]


def test_only_an_exact_affine_image_of_a_weight_is_a_copy():
    from cuda_agent.evaluate.weights import copies

    g = torch.Generator().manual_seed(0)
    w = torch.rand(64, 32, generator=g) - 0.5
    other = torch.rand(64, 32, generator=g) - 0.5  # the same distribution, drawn again
    values = {"neg": (-3.0 * w + 0.25).t().contiguous(), "other": other, "short": torch.tensor([1.0, 5.0]),
              "const": torch.full((64, 32), 0.5)}
    assert copies(list(values), values, {"fc.weight": w}) == {"neg": "fc.weight"}


def test_a_parameter_of_another_name_and_value_is_simply_wrong_under_kernelbench(tmp_path, cache_dir, warm_evaluate):
    res = _eval(warm_evaluate, tmp_path, cache_dir, DATA / "relu_bias_task.py", """
        class ModelNew(nn.Module):
            def __init__(self, f):
                super().__init__()
                self.b = nn.Parameter(torch.zeros(f))  # Model draws its bias at random
            def forward(self, x):
                return (x + self.b).clamp_min(0)
        """, HEADER)
    assert _codes(res) == ["output_mismatch"], res.reasons


def test_strict_names_must_match_and_the_message_says_what_to_rename(tmp_path, cache_dir, warm_evaluate):
    kernel = (ADV / "kernels" / "cpu.py").read_text()
    res = _eval(warm_evaluate, tmp_path, cache_dir, DATA / "relu_bias_task.py", """
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.b = nn.Parameter(torch.randn(features))
            def forward(self, x):
                return ext.relu_bias(x, self.b)
        """, "import torch\nimport torch.nn as nn\n" + kernel, policy="strict")
    assert _codes(res) == ["state_dict_mismatch"], res.reasons
    msg = res.failures[0].message
    assert "missing: bias" in msg and "`b` holds Model's `bias`" in msg


def test_weights_that_make_the_reference_degenerate_fall_back_to_the_default_init(tmp_path, cache_dir, warm_evaluate):
    task = _task(tmp_path, "log_offset", """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.offset = nn.Parameter(torch.ones(n))  # 1 at default init; re-drawn, log goes NaN
            def forward(self, x):
                return torch.log(x.abs() + self.offset - 0.999)

        def get_inputs():
            return [torch.randn(16, 32)]

        def get_init_inputs():
            return [32]
        """)
    res = _eval(warm_evaluate, tmp_path, cache_dir, task, """
        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.offset = nn.Parameter(torch.ones(n))
            def forward(self, x):
                return torch.log(x.abs() + self.offset - 0.999)
        """, HEADER, stress_trials=0)
    assert res.correct, res.reasons
    assert res.weights["rule"] == "default_init" and "not finite" in res.weights["note"]


def test_value_matching_follows_a_parameter_kept_in_another_shape():
    """A (1, C, 1, 1) constant kept as (C,) and a one-element random (1, 1, 1) kept as (1,): paired
    through the reshape, and the reference's tensor reaches ModelNew in ModelNew's shape."""
    torch.manual_seed(0)
    default = {"scale": torch.ones(1, 8, 1, 1), "bias": torch.randn(1, 1, 1), "w": torch.randn(8, 8)}
    mine = {"scale": torch.ones(8), "bias": default["bias"].reshape(1).clone(), "w_t": default["w"].t().clone()}
    m = weights.match_by_value(default, mine)
    assert m.pairs == {"scale": "scale", "bias": "bias"}  # a transpose is not the same order: no pair
    assert m.extra == ["w_t"] and m.missing == ["w"]
    redrawn = default["scale"] * 1.3
    assert weights.fit(redrawn, mine["scale"].shape).shape == (8,)
    assert torch.equal(weights.fit(redrawn, mine["scale"].shape), redrawn.reshape(8))


def test_equal_constants_follow_the_layer_they_follow_in_both_models():
    """Two conv + norm blocks that ModelNew declares in the other order: each norm's ones go to the
    norm after the convolution that ModelNew's block holds, not to the first free ones of Model."""
    torch.manual_seed(0)
    default = {"conv_a.weight": torch.randn(8, 8), "bn_a.weight": torch.ones(8),
               "conv_b.weight": torch.randn(8, 8), "bn_b.weight": torch.ones(8)}
    mine = {"second.conv.weight": default["conv_b.weight"].clone(), "second.bn.weight": torch.ones(8),
            "first.conv.weight": default["conv_a.weight"].clone(), "first.bn.weight": torch.ones(8)}
    m = weights.match_by_value(default, mine)
    assert m.pairs == {"second.conv.weight": "conv_b.weight", "second.bn.weight": "bn_b.weight",
                       "first.conv.weight": "conv_a.weight", "first.bn.weight": "bn_a.weight"}
    assert not m.missing and not m.extra


def test_a_tensor_under_several_names_is_one_entry_under_its_first_name():
    """A submodule registered twice (as `norm` and inside a fused wrapper) and tied weights: each
    tensor once, under its first state_dict name; a view of another shape is not an alias."""

    class Fused(nn.Module):
        def __init__(self, bn):
            super().__init__()
            self.bn = bn

    m = nn.Module()
    m.norm = nn.BatchNorm1d(4)
    m.fused = Fused(m.norm)
    m.a = nn.Linear(4, 4, bias=False)
    m.b = nn.Linear(4, 4, bias=False)
    m.b.weight = m.a.weight  # tied
    m.register_buffer("flat", m.a.weight.detach().view(16))
    state, aliases = weights.distinct(m.state_dict())
    assert list(state) == ["flat", "norm.weight", "norm.bias", "norm.running_mean", "norm.running_var",
                           "norm.num_batches_tracked", "a.weight"]  # the root's own entries first
    assert aliases == {"fused.bn.weight": "norm.weight", "fused.bn.bias": "norm.bias",
                       "fused.bn.running_mean": "norm.running_mean", "fused.bn.running_var": "norm.running_var",
                       "fused.bn.num_batches_tracked": "norm.num_batches_tracked", "b.weight": "a.weight"}


def test_tensors_without_storage_are_never_aliases_of_each_other():
    """Wrapper subclasses (no storage, data pointer 0) of one shape are distinct tensors."""

    class Lazy(torch.Tensor):
        @staticmethod
        def __new__(cls, shape):
            return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.float32)

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise NotImplementedError(func)

    state, aliases = weights.distinct({"a": Lazy((3,)), "b": Lazy((3,)), "c": torch.ones(0), "d": torch.ones(0)})
    assert list(state) == ["a", "b", "c", "d"] and aliases == {}


def test_the_cuda_runtimes_out_of_memory_is_out_of_memory_not_the_candidates_runtime_error():
    """cudaErrorMemoryAllocation (an AcceleratorError, not torch.OutOfMemoryError) is raised where a
    neighbour on the GPU may hold the memory, so it must reach the evaluator as out_of_memory, which
    runs the evaluation again alone; other CUDA errors keep their codes."""
    from cuda_agent.evaluate.result import Code
    from cuda_agent.evaluate.worker.common import classify

    def accel(code):
        exc = torch.AcceleratorError("CUDA error: out of memory" if code == 2 else "CUDA error")
        exc.error_code = code
        return exc

    assert classify(accel(2))[0] is Code.OUT_OF_MEMORY
    assert classify(accel(700))[0] is Code.ILLEGAL_MEMORY_ACCESS
    assert classify(accel(1))[0] is Code.RUNTIME_ERROR
    # cuBLAS without the memory for its handle (seen beside 15 other evaluations on an H100)
    assert classify(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))[0] \
        is Code.OUT_OF_MEMORY
    assert classify(RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"))[0] is Code.OUT_OF_MEMORY
    assert classify(RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED"))[0] is Code.RUNTIME_ERROR


def test_the_judge_running_out_of_memory_for_an_output_is_not_the_candidates_fault(monkeypatch):
    """Receiving the candidate's output copies it; a judge short of device memory beside other
    evaluations raises out_of_memory (which the evaluator retries alone), where a descriptor it
    refuses is the candidate's `structure_mismatch`."""
    from cuda_agent.evaluate.worker.judge import Judge

    judge = Judge()
    judge.trials["c0"] = {"ref": torch.zeros(2), "inputs": []}

    def short(out):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 186.00 MiB.")

    monkeypatch.setattr(judge, "_received", short)
    with pytest.raises(torch.OutOfMemoryError):
        judge.cmd_check("c0", out={}, plain=True, atol=1e-2, rtol=1e-2, norm_tol=0.05)
    monkeypatch.undo()
    judge.trials["c0"] = {"ref": torch.zeros(2), "inputs": []}
    verdict = judge.cmd_check("c0", out={"t": "bogus"}, plain=True, atol=1e-2, rtol=1e-2, norm_tol=0.05)
    assert verdict["code"] == "structure_mismatch"
