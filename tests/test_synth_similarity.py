"""AST similarity for decontamination and deduplication (`cuda_agent.synth.similarity`).

Properties are checked on the real KernelBench tasks in ../shared/kernelbench: renamed and resized
copies are identical, trivially edited copies score >= 0.9, compositions of other operators score
< 0.9 against levels 1-3, the index answers exactly what comparing with every entry would.
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from cuda_agent.errors import TaskError
from cuda_agent.synth.similarity import SimilarityIndex, fingerprint, kernelbench_index, similarity
from cuda_agent.tasks import load_kernelbench

KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"

pytestmark = pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(),
                                reason=f"needs the KernelBench tasks in {KERNELBENCH}")


@pytest.fixture(scope="module")
def tasks():
    return load_kernelbench(KERNELBENCH, (1, 2, 3))


@pytest.fixture(scope="module")
def fps(tasks):
    return {t.id: fingerprint(t.source) for t in tasks}


@pytest.fixture(scope="module")
def index():
    return kernelbench_index(KERNELBENCH)


def _source(task_id: str) -> str:
    level, name = task_id.split("/")
    return (KERNELBENCH / level / f"{name}.py").read_text()


def rename_and_resize(source: str) -> str:
    """A semantics-preserving edit: every user-chosen name renamed (consistently, in another order),
    every int/float constant changed, function docstrings and annotations dropped, comments and
    formatting replaced by `ast.unparse`'s plus one comment."""
    tree = ast.parse(source)
    imported = {(a.asname or a.name).split(".")[0]
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    class_level = {id(s) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for s in c.body}
    names: set[str] = set()
    attrs: set[str] = set()  # assigned attributes, methods and class attributes
    for n in ast.walk(tree):  # breadth-first: a class-level statement comes before its targets
        if id(n) in class_level and isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            attrs.add(n.name)
        elif id(n) in class_level and isinstance(n, ast.Assign):
            attrs |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in attrs:
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            attrs.add(n.attr)
    fixed = {"Model", "forward", "get_inputs", "get_init_inputs", "self"} | imported

    def renamed(found: set[str], prefix: str) -> dict[str, str]:
        keep = sorted((x for x in found if x not in fixed and not x.startswith("__")), reverse=True)
        return {x: f"{prefix}{i}" for i, x in enumerate(keep)}

    nmap, amap = renamed(names, "renamed_n"), renamed(attrs, "renamed_a")

    class Edit(ast.NodeTransformer):
        def visit_Name(self, n):
            n.id = nmap.get(n.id, amap.get(n.id, n.id))
            return n

        def visit_arg(self, n):
            n.arg, n.annotation = nmap.get(n.arg, n.arg), None
            return n

        def visit_Attribute(self, n):
            self.generic_visit(n)
            n.attr = amap.get(n.attr, n.attr)
            return n

        def visit_FunctionDef(self, n):
            n.name, n.returns = nmap.get(n.name, amap.get(n.name, n.name)), None
            first = n.body[0]
            if len(n.body) > 1 and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                n.body = n.body[1:]
            self.generic_visit(n)
            return n

        def visit_ClassDef(self, n):
            n.name = nmap.get(n.name, amap.get(n.name, n.name))
            self.generic_visit(n)
            return n

        def visit_Call(self, n):
            self.generic_visit(n)
            f = n.func
            if (isinstance(f, ast.Name) and f.id in nmap.values()) or (
                    isinstance(f, ast.Attribute) and f.attr in amap.values()):
                for k in n.keywords:  # keywords of user callables name renamed parameters
                    k.arg = nmap.get(k.arg, k.arg)
            return n

        def visit_Constant(self, n):
            if type(n.value) is int:
                n.value = n.value * 3 + 7
            elif type(n.value) is float:
                n.value = n.value * 1.5 + 0.25
            return n

    return "# an edited copy\n" + ast.unparse(Edit().visit(tree))


# Compositions that KernelBench does not have, in its format.
LINEAR_LAYERNORM_TANH = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x):
        y = self.norm(self.fc(x))
        return torch.tanh(y) * 0.5

def get_inputs():
    return [torch.randn(64, 512)]

def get_init_inputs():
    return [512, 256]
'''

CUMSUM_EXP_GATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        s = torch.cumsum(x, dim=self.dim)
        g = torch.exp(-x.abs())
        return torch.where(mask, s * g, torch.zeros_like(s))

def get_inputs():
    x = torch.randn(32, 1024)
    return [x, x > 0]

def get_init_inputs():
    return [1]
'''

CONV_SOFTPLUS_POOL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, c_in, c_out, k):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, padding=k // 2)

    def forward(self, x):
        x = F.softplus(self.conv(x))
        x = F.adaptive_max_pool2d(x, 1).flatten(1)
        return F.normalize(x, dim=1)

def get_inputs():
    return [torch.randn(8, 3, 64, 64)]

def get_init_inputs():
    return [3, 16, 3]
'''

# level2/1_Conv2D_ReLU_BiasAdd with ReLU replaced by GELU and Tanh: one operator changed, one added.
CONV_GELU_TANH_BIAS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.nn.functional.gelu(x)
        x = torch.tanh(x)
        x = x + self.bias
        return x

batch_size = 128
in_channels = 64
out_channels = 128
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
'''

SYNTHETIC = {"linear_layernorm_tanh": LINEAR_LAYERNORM_TANH, "cumsum_exp_gate": CUMSUM_EXP_GATE,
             "conv_softplus_pool": CONV_SOFTPLUS_POOL, "conv_gelu_tanh_bias": CONV_GELU_TANH_BIAS}


# --------------------------------------------------------------------------------------------------
# Invariance: renamed, resized and trivially edited copies
# --------------------------------------------------------------------------------------------------


def test_renamed_and_resized_copy_of_every_kernelbench_task_has_the_same_fingerprint(tasks, fps, index):
    for task in tasks:
        copy = rename_and_resize(task.source)
        assert copy != task.source
        assert fingerprint(copy) == fps[task.id], task.id
    score, found = index.max_similarity(rename_and_resize(_source("level2/1_Conv2D_ReLU_BiasAdd")))
    assert (score, found) == (1.0, "level2/1_Conv2D_ReLU_BiasAdd")


def test_trivially_edited_copy_scores_at_least_0_9_and_names_its_original(index):
    original = _source("level2/1_Conv2D_ReLU_BiasAdd")
    edited = (original
              .replace("import torch.nn as nn", "import torch.nn as nn\nimport torch.nn.functional as F")
              .replace("super(Model, self).__init__()", "super().__init__()  # plain super")
              .replace("self.conv", "self.convolution")
              .replace("torch.relu(x)", "F.relu(x)")
              .replace("kernel_size = 3", "kernel_size = 5")
              .replace("batch_size = 128", "batch_size = 16  # smaller"))
    assert edited.count("self.convolution") == 2 and "F.relu(x)" in edited and "# plain super" in edited
    score, found = index.max_similarity(edited)
    assert found == "level2/1_Conv2D_ReLU_BiasAdd"
    assert 0.9 <= score < 1.0
    assert similarity(fingerprint(edited), fingerprint(original)) == score


def test_docstrings_annotations_and_import_spellings_do_not_count():
    a = "import torch\n\ndef f(x: torch.Tensor) -> torch.Tensor:\n    'doc'\n    return torch.nn.functional.relu(x)\n"
    b = ("import torch.nn.functional as F\n\ndef g(y):\n    # a comment\n    '''another docstring'''\n"
         "    return F.relu(y)\n")
    c = "from torch.nn.functional import relu\n\ndef h(z):\n    return relu(z)\n"
    assert fingerprint(a) == fingerprint(b) == fingerprint(c)
    assert "torch.nn.functional.relu" in fingerprint(a)
    assert fingerprint(a) != fingerprint(a.replace("relu", "gelu"))


# --------------------------------------------------------------------------------------------------
# KernelBench against itself
# --------------------------------------------------------------------------------------------------


def test_every_kernelbench_task_finds_itself_with_score_1(tasks, fps, index):
    assert len(index) == len(tasks) == 250
    first_with = {}
    for task in tasks:
        first_with.setdefault(fps[task.id], task.id)
    for task in tasks:
        # KernelBench holds a few tasks that differ only in sizes: the first one added is named
        assert index.max_similarity(task.source) == (1.0, first_with[fps[task.id]]), task.id
    assert index.max_similarity(_source("level1/23_Softmax")) == (1.0, "level1/23_Softmax")
    assert index.max_similarity(_source("level3/16_DenseNet201")) == (1.0, "level3/15_DenseNet121")
    assert index.max_similarity(fps["level2/99_Matmul_GELU_Softmax"]) == (1.0, "level2/99_Matmul_GELU_Softmax")


def test_different_compositions_score_clearly_lower(fps):
    conv_relu = fps["level2/1_Conv2D_ReLU_BiasAdd"]
    matmul_softmax = fps["level2/99_Matmul_GELU_Softmax"]
    assert similarity(conv_relu, matmul_softmax) < 0.5
    # two level-2 tasks with one shared operator out of three: different tasks, below the threshold
    assert similarity(fps["level2/56_Matmul_Sigmoid_Sum"], matmul_softmax) < 0.9
    # single-operator tasks differ by their operator
    assert similarity(fps["level1/19_ReLU"], fps["level1/21_Sigmoid"]) < 0.9


def test_operator_order_counts():
    relu_then_tanh = "import torch\n\ndef f(x):\n    x = torch.relu(x)\n    x = torch.tanh(x)\n    return x\n"
    tanh_then_relu = "import torch\n\ndef f(x):\n    x = torch.tanh(x)\n    x = torch.relu(x)\n    return x\n"
    assert similarity(fingerprint(relu_then_tanh), fingerprint(tanh_then_relu)) < 1.0


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_compositions_score_below_0_9_against_levels_1_to_3(index, name):
    score, found = index.max_similarity(SYNTHETIC[name])
    assert 0.0 < score < 0.9, (score, found)
    assert found is not None


def test_similarity_is_symmetric_and_in_range(fps):
    a, b = fps["level1/1_Square_matrix_multiplication_"], fps["level1/25_Swish"]
    # difflib's own ratio depends on the argument order for this pair; the measure must not
    assert (SequenceMatcher(None, a, b, autojunk=False).ratio()
            != SequenceMatcher(None, b, a, autojunk=False).ratio())
    assert similarity(a, b) == similarity(b, a)
    ids = sorted(fps)
    rng = random.Random(0)
    for _ in range(200):
        x, y = rng.sample(ids, 2)
        s = similarity(fps[x], fps[y])
        assert 0.0 <= s <= 1.0 and s == similarity(fps[y], fps[x]), (x, y)
        assert (s == 1.0) == (fps[x] == fps[y])
    assert similarity(a, a) == 1.0 and similarity((), ()) == 1.0


def test_max_similarity_equals_comparing_with_every_entry(fps):
    ids = sorted(fps)
    rng = random.Random(1)
    queries = [(i, fps[i]) for i in rng.sample(ids, 8)] + [(n, fingerprint(s)) for n, s in SYNTHETIC.items()]
    for query_id, query in queries:
        others = [i for i in ids if i != query_id]
        index = SimilarityIndex(())
        for i in others:
            index.add(i, fps[i])  # add takes a fingerprint too
        scores = [(similarity(query, fps[i]), -n) for n, i in enumerate(others)]
        best, neg_n = max(scores)
        assert index.max_similarity(query) == (best, others[-neg_n]), query_id


# --------------------------------------------------------------------------------------------------
# Growing the index; errors
# --------------------------------------------------------------------------------------------------


def test_add_makes_a_later_duplicate_detectable(index):
    dataset = SimilarityIndex([])
    assert len(dataset) == 0 and dataset.max_similarity(CUMSUM_EXP_GATE) == (0.0, None)
    for name in ("linear_layernorm_tanh", "cumsum_exp_gate"):
        assert index.max_similarity(SYNTHETIC[name])[0] < 0.9  # passes decontamination
        assert dataset.max_similarity(SYNTHETIC[name])[0] < 0.9  # and is new to the dataset
        dataset.add(f"synth/{name}", SYNTHETIC[name])
    assert len(dataset) == 2
    assert dataset.max_similarity(rename_and_resize(CUMSUM_EXP_GATE)) == (1.0, "synth/cumsum_exp_gate")
    with pytest.raises(ValueError, match="synth/cumsum_exp_gate: already in the similarity index"):
        dataset.add("synth/cumsum_exp_gate", CONV_SOFTPLUS_POOL)
    assert len(dataset) == 2


def test_syntax_error_raises_value_error_naming_the_line():
    broken = "import torch\n\nclass Model:\n    def forward(self, x:\n        return x\n"
    with pytest.raises(ValueError) as info:
        fingerprint(broken)
    assert isinstance(info.value, TaskError) and info.value.line == 4
    assert "<source>:4: syntax error" in str(info.value)
    with pytest.raises(TaskError, match=r"^synth/7:4: syntax error"):
        SimilarityIndex([("synth/7", broken)])
    with pytest.raises(TaskError, match=r"^<source>:4:"):
        SimilarityIndex([]).max_similarity(broken)


def test_import_is_cheap_and_nothing_is_printed(capsys, index):
    code = ("import sys, cuda_agent.synth.similarity\n"
            "print(sorted(m for m in ('torch', 'numpy', 'cuda_agent.tasks') if m in sys.modules))")
    src = Path(__file__).resolve().parents[1] / "src"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(src)}).stdout
    assert out.strip() == "[]"
    index.max_similarity(CONV_SOFTPLUS_POOL)
    kernelbench_index(KERNELBENCH, levels=(1,))
    assert capsys.readouterr() == ("", "")
