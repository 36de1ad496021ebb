"""The operator catalogue, its sweep, and the renderer: every op renders to a task that runs on CPU."""

from __future__ import annotations

import inspect
import math
import random

import pytest

torch = pytest.importorskip("torch")

from cuda_agent.synth.catalogue import CATALOGUE, REASONS, Instance, ops, sweep  # noqa: E402
from cuda_agent.synth.render import render, set_batch  # noqa: E402
from cuda_agent.tasks import validate_task_source  # noqa: E402

SOURCES = {"torch.nn", "torch.nn.functional", "torch", "torch.Tensor", "transformers"}
TEST_BATCH = 2
# Shapes that stress the generators' edge handling: size-1 dims, odd and tiny sizes, every rank.
AWKWARD = [(3,), (2, 1), (2, 3), (2, 6), (2, 1, 1), (2, 5, 1), (2, 3, 7), (2, 1, 9, 1), (2, 2, 3, 3),
           (2, 4, 1, 5), (2, 3, 2, 2, 2), (2, 1, 1, 1, 1), (2, 8, 4, 4, 4), (2, 6, 5, 5)]


def _instance(op, seeds=range(12)):
    for seed in seeds:
        rng = random.Random(seed)
        shape = op.start_shape(rng)
        inst = op.make(rng, shape)
        if inst is not None:
            return shape, inst
    raise AssertionError(f"{op.name}: no instance for its own start shapes in {len(seeds)} seeds")


def _run(source: str, expected: tuple[int, ...]) -> bool:
    """Exec a rendered task at TEST_BATCH and check the output's shape, finiteness, determinism, and that
    samples stay apart (a new sample 0 leaves the output of sample 1 as it was). Returns whether the
    output of sample 0 changes with its main input (the extra inputs held fixed)."""
    source = set_batch(source, TEST_BATCH)
    validate_task_source(source, "<synth>")
    ns: dict = {}
    exec(compile(source, "<synth>", "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    torch.manual_seed(1)
    inputs = ns["get_inputs"]()
    with torch.no_grad():
        out = model(*inputs)
        again = model(*inputs)
        x = inputs[0].clone()
        x[0] = torch.randn_like(x[0])
        changed = model(x, *inputs[1:])
    want = (TEST_BATCH, *expected[1:])
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32, type(out)
    assert tuple(out.shape) == want, f"output {tuple(out.shape)}, out_shape says {want}\n{source}"
    assert torch.isfinite(out).all(), f"non-finite output\n{source}"
    assert torch.equal(out, again), f"not deterministic\n{source}"
    assert torch.allclose(out[1:], changed[1:], rtol=1e-5, atol=1e-6), f"mixes the batch\n{source}"
    return not torch.equal(out[0], changed[0])


def test_the_catalogue_holds_150_ops_named_after_their_source():
    assert len(CATALOGUE) >= 150
    for name, op in CATALOGUE.items():
        assert op.name == name
        assert op.source in SOURCES, op
        assert name.startswith(op.source + "."), op
        assert op.ranks and op.ranks <= {1, 2, 3, 4, 5}, op
    for source in SOURCES:
        assert any(op.source == source for op in CATALOGUE.values()), source
    assert {op.name for op in ops(["conv"])} >= {"torch.nn.Conv2d", "torch.nn.functional.conv_transpose3d"}
    assert ops() == sorted(CATALOGUE.values(), key=lambda o: o.name)


def test_every_catalogued_torch_name_resolves_in_the_installed_torch():
    """Every catalogued torch / torch.nn / F / Tensor name exists in the installed torch."""
    import importlib

    for name, op in CATALOGUE.items():
        if op.source == "transformers":
            continue
        parts = name.split(".")
        obj = importlib.import_module(parts[0])
        for part in parts[1:]:
            obj = getattr(obj, part, None) or importlib.import_module(f"{obj.__name__}.{part}")
        assert callable(obj), name


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_every_op_runs_alone(name):
    op = CATALOGUE[name]
    shape, inst = _instance(op)
    assert len(shape) in op.ranks and shape[0] >= 1
    assert math.prod(shape[1:]) <= 1 << 18, f"start shape {shape} too large"
    assert inst.op == name and inst.in_shape == shape and inst.out_shape[0] == shape[0]
    assert all(e[0] == shape[0] for e in inst.extra_inputs)
    # make is a function of the rng state
    rng_a, rng_b = random.Random(5), random.Random(5)
    assert op.make(rng_a, shape) == op.make(rng_b, shape)
    source = render([inst], shape)
    assert _run(source, inst.out_shape), f"output does not depend on the input\n{source}"


def test_awkward_shapes_give_none_or_a_correct_instance():
    """make never raises on odd shapes, returns None for ranks the op does not accept, and the first two
    instances it returns per op run with the promised out_shape."""
    ran = 0
    for op in CATALOGUE.values():
        checked = 0
        for shape in AWKWARD:
            for seed in range(2):
                inst = op.make(random.Random(seed), shape)
                if inst is None:
                    continue
                assert len(shape) in op.ranks, (op.name, shape)
                assert inst.out_shape[0] == shape[0] and inst.in_shape == shape, (op.name, shape)
                if checked < 2 and shape[0] == TEST_BATCH and math.prod(inst.out_shape[1:]) <= 1 << 16:
                    _run(render([inst], shape), inst.out_shape)
                    checked += 1
                    ran += 1
    assert ran > 400


def _chain(seed: int, max_elems: int = 1 << 16):
    rng = random.Random(seed)
    names = sorted(CATALOGUE)
    first = CATALOGUE[rng.choice(names)]
    shape = first.start_shape(rng)
    shape = (TEST_BATCH, *shape[1:])
    chain: list[Instance] = []
    current = shape
    length = rng.randint(2, 5)
    attempts = 0
    while len(chain) < length and attempts < 200:
        attempts += 1
        op = first if not chain and attempts == 1 else CATALOGUE[rng.choice(names)]
        if len(current) not in op.ranks:
            continue
        inst = op.make(rng, current)
        if inst is None or math.prod(inst.out_shape[1:]) > max_elems and chain:
            continue
        if math.prod(inst.out_shape[1:]) > 1 << 20:
            continue
        chain.append(inst)
        current = inst.out_shape
    return shape, chain


def test_random_chains_run_with_their_promised_shapes():
    """40 seeded chains of 2-5 ops, each next op sampled among those accepting the running shape, render
    and run with the promised shape, finite and deterministic. Saturation can make a chain's output
    constant (a filter's job to drop), so input dependence is required of most chains, not all."""
    dependent = 0
    for seed in range(40):
        shape, chain = _chain(seed)
        assert 2 <= len(chain) <= 5, (seed, [i.op for i in chain])
        dependent += _run(render(chain, shape), chain[-1].out_shape)
    assert dependent >= 36


def test_a_rendered_chain_numbers_its_layers_and_extra_inputs():
    conv = CATALOGUE["torch.nn.Conv2d"]
    add = CATALOGUE["torch.addcmul"]
    rng = random.Random(0)
    a = conv.make(rng, (4, 3, 16, 16))
    b = add.make(rng, a.out_shape)
    c = conv.make(rng, b.out_shape)
    d = add.make(rng, c.out_shape)
    src = render([a, b, c, d], (4, 3, 16, 16), doc="A test chain.")
    assert src.startswith('"""A test chain."""')
    assert "self.conv2d_1 = nn.Conv2d(3," in src and "self.conv2d_3 = nn.Conv2d(" in src
    assert "def forward(self, x, y0, y1, y2, y3):" in src
    assert "torch.addcmul(x, y0, y1" in src and "torch.addcmul(x, y2, y3" in src
    assert "batch_size = 4" in src and "return []" in src
    assert src.count("torch.randn(batch_size,") == 5
    validate_task_source(src, "<synth>")


def test_rendered_helper_classes_appear_once_with_math_imported():
    mlp = CATALOGUE["transformers.models.gpt2.modeling_gpt2.GPT2MLP"]
    gelu = CATALOGUE["transformers.activations.NewGELUActivation"]
    a = mlp.make(random.Random(0), (2, 16, 64))
    b = gelu.make(random.Random(0), a.out_shape)
    src = render([a, b], (2, 16, 64))
    assert src.count("class NewGELUActivation(nn.Module):") == 1
    assert "import math" in src
    assert "transformers" not in src.split('"""', 2)[2].split("class Model")[0].replace(
        "transformers.", "")  # defs mention the mirrored class only in docstrings
    assert _run(src, b.out_shape)


def test_set_batch_rewrites_the_one_batch_size_line():
    inst = CATALOGUE["torch.nn.ReLU"].make(random.Random(0), (16, 32))
    src = render([inst], (16, 32))
    assert "batch_size = 16" in src
    out = set_batch(src, 123)
    assert "batch_size = 123" in out and "batch_size = 16" not in out
    assert out.replace("123", "16") == src
    with pytest.raises(ValueError, match="positive"):
        set_batch(src, 0)
    with pytest.raises(ValueError, match="exactly one"):
        set_batch("x = 1\n", 4)


def test_render_rejects_broken_chains():
    conv = CATALOGUE["torch.nn.Conv2d"]
    lin = CATALOGUE["torch.nn.Linear"]
    a = conv.make(random.Random(0), (4, 3, 16, 16))
    b = lin.make(random.Random(0), (4, 99))
    with pytest.raises(ValueError, match="made for input shape"):
        render([a, b], (4, 3, 16, 16))
    with pytest.raises(ValueError, match="made for input shape"):
        render([a], (4, 3, 8, 8))
    with pytest.raises(ValueError, match="empty"):
        render([], (4, 3))
    bad_batch = Instance(op="x", init=(), forward=("{x} = {x}.sum(0)",), out_shape=(3,))
    with pytest.raises(ValueError, match="not the batch"):
        render([bad_batch], (4, 3))
    missing_extra = Instance(op="x", init=(), forward=("{x} = {x} + {y0}",), out_shape=(4, 3))
    with pytest.raises(ValueError, match="extra input"):
        render([missing_extra], (4, 3))


def _public_nn_modules() -> set[str]:
    nn = torch.nn
    found = set()
    for ns in (nn, nn.modules):
        for n in dir(ns):
            obj = getattr(ns, n)
            if not n.startswith("_") and inspect.isclass(obj) and issubclass(obj, nn.Module):
                found.add(f"torch.nn.{n}")
    return found


def _public_functional() -> set[str]:
    F = torch.nn.functional
    return {f"torch.nn.functional.{n}" for n in dir(F) if not n.startswith("_") and callable(getattr(F, n))}


def test_sweep_covers_torch_nn_and_functional():
    entries = sweep()
    by_name = {e.name: e for e in entries}
    assert len(by_name) == len(entries)
    assert _public_nn_modules() <= set(by_name)
    assert _public_functional() <= set(by_name)
    assert set(CATALOGUE) <= {e.name for e in entries if e.included}
    for e in entries:
        if e.included:
            assert e.name in CATALOGUE and e.reason is None, e
        else:
            assert e.name not in CATALOGUE, e
            assert e.reason in REASONS, e
            assert e.note, e
    # the documented exclusions are there, with the codes the design names
    assert by_name["torch.nn.Dropout"].reason == "stochastic"
    assert by_name["torch.nn.LazyLinear"].reason == "lazy"
    assert by_name["torch.nn.Sequential"].reason == "container"
    assert by_name["torch.nn.Embedding"].reason == "integer_input"
    assert by_name["torch.nn.functional.relu_"].reason == "inplace_only"
    assert by_name["torch.nn.BatchNorm2d"].reason == "batch_mixing"
    assert by_name["torch.nonzero"].reason == "dynamic_shape"
    not_catalogued = [e.name for e in entries if e.reason == "not_catalogued"]
    assert len(not_catalogued) <= 5, not_catalogued
