"""The static policy checks (evaluate/policy.py): what each profile rejects, with which code and line,
and what honest candidates do that must never be flagged."""

import textwrap

import pytest

from cuda_agent.evaluate.candidate import Candidate, load_candidate
from cuda_agent.evaluate.policy import check, check_cpp, check_python
from cuda_agent.examples import get_example, list_examples


def py(body: str, profile: str = "strict") -> list[str]:
    """Codes of the violations of a model_new.py made of imports, `body` and a forward."""
    return [v.code.value for v in check_python(textwrap.dedent(body), "model_new.py", profile)]


def forward(expr_lines: str, prelude: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(expr_lines), " " * 8)
    return ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" + textwrap.dedent(prelude)
            + "class ModelNew(nn.Module):\n    def forward(self, x):\n" + body + "\n")


@pytest.mark.parametrize("body,strict,kernelbench", [
    # category 1: PyTorch inside forward (strict only)
    (forward("return F.relu(x)"), "torch_fallback", None),
    (forward("return torch.relu(x)"), "torch_fallback", None),
    (forward("return x @ x.t()"), "torch_fallback", None),
    (forward("return torch.ops.aten.relu(x)"), "torch_fallback", None),
    (forward("return x.softmax(-1)"), "torch_fallback", None),
    (forward("return x", prelude="import numpy as np\n"), "torch_fallback", None),
    # allowed in strict: allocation, views, metadata, the extension, streams
    (forward("y = torch.empty_like(x)\nreturn ext.relu(x.view(-1), y).view(x.shape)",
             prelude="from torch.utils.cpp_extension import load_inline\next = load_inline('e', '')\n"),
     None, None),
    (forward("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    y = cuda_extension.f(x)\n"
             "torch.cuda.current_stream().wait_stream(s)\nreturn y", prelude="import cuda_extension\n"),
     None, None),
    (forward("return torch.ops.my_ext.relu(x)"), None, None),
    # every profile: processes that leave their group, signals, other processes' memory
    (forward("return x", prelude="import os\nos.setsid()\n"), "forbidden_io", "forbidden_io"),
    (forward("return x", prelude="import subprocess\nsubprocess.Popen(['sleep', '99'], start_new_session=True)\n"),
     "forbidden_io", "forbidden_io"),
    (forward("return x", prelude="import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n"),
     "forbidden_io", "forbidden_io"),
    (forward("return x", prelude="import os\nf = open(f'/proc/{os.getppid()}/mem', 'rb')\n"),
     "reference_access", "reference_access"),
    (forward("return x", prelude="import ctypes\nlibc = ctypes.CDLL(None)\nlibc.ptrace(16, 1, 0, 0)\n"),
     "reference_access", "reference_access"),
    (forward("return x", prelude="import ctypes\nlibc = ctypes.CDLL(None)\nlibc.mprotect(0, 4096, 7)\n"),
     "reference_access", "reference_access"),
    # honest code that earlier rules rejected (real model-written kernels do each of these):
    # clocks to pick the faster of two implementations once
    (forward("return x", prelude="import time\nt0 = time.perf_counter()\nDT = time.perf_counter() - t0\n"),
     None, None),
    (forward("return x", prelude="s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
                                 "MS = s.elapsed_time(e) if False else 0.0\n"), None, None),
    # a build folder of its own for load_inline
    (forward("return x", prelude="import os, tempfile\nBUILD = tempfile.mkdtemp()\n"
                                 "os.makedirs(os.path.join(BUILD, 'ext'), exist_ok=True)\n"), None, None),
    # backend flags in its own process, an attribute of its own class, /proc/self
    (forward("return x", prelude="torch.backends.cudnn.benchmark = True\ntorch.backends.cudnn.allow_tf32 = True\n"),
     None, None),
    (forward("return ModelNew._module.f(x)", prelude="import cuda_extension\n") + "ModelNew._module = cuda_extension\n",
     None, None),
    (forward("return x", prelude="import os\nMEM = open('/proc/self/status').read() if os.path.exists('/proc/self') else ''\n"),
     None, None),
    # harmless look-alikes
    (forward("return x", prelude="import os\nSRC = os.path.join(os.path.dirname(__file__), 'k.cu')\n"),
     None, None),
    (forward("n = len(list(self.modules()))\nname = 'a.b'.replace('.', '_')\nreturn x"), None, None),
    (forward("return x", prelude="from torch.utils import cpp_extension\n"
                                 "ext = cpp_extension.load('e', ['k.cpp'])\n"), None, None),
    (forward("return x", prelude="import subprocess\nsubprocess.run(['true'], start_new_session=False)\n"),
     None, None),
])
def test_each_python_pattern_gets_its_code_under_each_profile(body, strict, kernelbench):
    assert (py(body, "strict")[:1] or [None])[0] == strict
    assert (py(body, "kernelbench")[:1] or [None])[0] == kernelbench
    assert py(body, "none") == []


def test_a_violation_names_its_file_line_and_rule():
    src = forward("return F.gelu(x)")
    (v,) = check_python(src, "model_new.py", "strict")
    assert (v.file, v.line, v.rule) == ("model_new.py", 6, "strict_forward")
    assert str(v).startswith("model_new.py:6: [strict_forward] `F.gelu(...)` inside forward")


AUTOGRAD_FUNCTION = """
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline("e", cpp_sources="", functions=["fwd"])


class _Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        ctx.scale = 2.0
        return ext.fwd(input, weight)


class ModelNew(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(w)

    def forward(self, input):
        return _Fn.apply(input, self.w)
"""


@pytest.mark.parametrize("profile", ["strict", "kernelbench"])
def test_an_autograd_function_with_ctx_attributes_and_an_input_argument_is_honest(profile):
    assert py(AUTOGRAD_FUNCTION, profile) == []


def test_torch_outside_forward_is_allowed_in_strict():
    # a weight transform precomputed in __init__
    src = """
    import torch
    import torch.nn as nn
    class ModelNew(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.register_buffer("wt", torch.relu(w).t().contiguous(), persistent=False)
        def forward(self, x):
            return cuda_extension.mm(x, self.wt)
    """
    assert py(src) == []


@pytest.mark.parametrize("src,strict,kernelbench", [
    ("torch::Tensor f(torch::Tensor x) { return at::relu(x); }", "torch_fallback", None),
    ("torch::Tensor f(torch::Tensor x) { return torch::matmul(x, x); }", "torch_fallback", None),
    ("torch::Tensor f(torch::Tensor x) { return x.softmax(0); }", "torch_fallback", None),
    ("torch::Tensor f(torch::Tensor a) { return at::cuda::blas::gemm(a); }", "torch_fallback", None),
    ("void f() { std::thread t([]{}); t.detach(); }", "hidden_work", "hidden_work"),
    ("void f() { pthread_create(&t, nullptr, work, nullptr); }", "hidden_work", "hidden_work"),
    ("long f(int pid) { return ptrace(PTRACE_ATTACH, pid, 0, 0); }", "reference_access", "reference_access"),
    ("void f() { if (fork() == 0) { setsid(); } }", "forbidden_io", "forbidden_io"),
    ("void f() { kill(getppid(), SIGSTOP); }", "forbidden_io", "forbidden_io"),
    # honest: files, host callbacks, device selection, exits on errors, symbols
    ("void f() { FILE* fp = fopen(\"tune.txt\", \"w\"); fclose(fp); }", None, None),
    ("void f(cudaStream_t s) { cudaLaunchHostFunc(s, cb, nullptr); }", None, None),
    ("void f(int d) { cudaSetDevice(d); if (d < 0) exit(1); }", None, None),
    # allowed: allocation, types, streams, guards, cuBLAS, comments mentioning anything
    ("""
     #include <cublas_v2.h>
     // at::relu would be a fallback; std::thread too (comments are not code)
     torch::Tensor f(const torch::Tensor& a) {
       const at::cuda::CUDAGuard g(a.device());
       auto c = torch::empty({a.size(0), a.size(0)}, a.options().dtype(torch::kFloat32));
       cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
       cublasSetStream(h, at::cuda::getCurrentCUDAStream());
       auto z = at::zeros_like(c);
       return c;
     }""", None, None),
])
def test_each_cpp_pattern_gets_its_code_under_each_profile(src, strict, kernelbench):
    def first(profile):
        out = check_cpp(textwrap.dedent(src), "kernels/k.cu", profile)
        return out[0].code.value if out else None

    assert first("strict") == strict
    assert first("kernelbench") == kernelbench


def test_cpp_inside_python_strings_is_checked():
    src = forward("return ext.f(x)", prelude=(
        "from torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline('e', cpp_sources='''\n#include <torch/extension.h>\n"
        "torch::Tensor f(torch::Tensor x) { return at::relu(x); }\n''', functions=['f'])\n"))
    (v,) = check_python(src, "model_new.py", "strict")
    assert v.code.value == "torch_fallback" and v.line == 7 and "at::relu" in v.message


def test_workspace_kernels_are_checked(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model_new.py").write_text(forward("return cuda_extension.f(x)", "import cuda_extension\n"))
    (tmp_path / "kernels" / "f_binding.cpp").write_text("// binding\n\nauto y = at::mm(a, b);\n")
    (v,) = check(load_candidate(tmp_path), "strict")
    assert (v.file, v.line, v.code.value) == ("kernels/f_binding.cpp", 3, "torch_fallback")
    assert check(load_candidate(tmp_path), "kernelbench") == []


@pytest.mark.parametrize("name", [ex.name for ex in list_examples()])
def test_bundled_examples_pass_strict(name):
    ex = get_example(name)
    for device in ("cpu", "cuda"):
        for form, path in ex.candidates(device).items():
            assert check(load_candidate(path), "strict") == [], (name, device, form)


def test_an_unknown_profile_is_a_value_error():
    with pytest.raises(ValueError, match="policy='lenient'"):
        check(Candidate(origin="x", kind="file", model_new=""), "lenient")
