"""Static policy checks: the fast first filter, run on the candidate's sources before anything is built.

A static rule must never reject honest code (DESIGN section 3, "Trust boundary"). Real model-written
kernels autotune with clocks, build in folders of their own, keep state on autograd contexts and on
their own classes, set backend flags in their own process and name arguments `input`: all of that
is left to the runtime layers (fresh inputs, checked timed outputs, the judge in another process,
the harness's own clock, `guard.Integrity`). A rule stays here only where it names an unambiguous
cheat that the runtime layer cannot stop; each is listed, with that cheat and its reason, in
docs/threat-model.md ("Static rules"). Profiles:

- `strict` (the default): CUDA-Agent's rule on top. Inside `ModelNew.forward` only the candidate's
  own extension calls, `empty`-family allocation, views and metadata; inside the extension only raw
  kernels, cuBLAS/cuDNN called directly and `torch::empty*` allocation; no other compute library.
- `kernelbench`: PyTorch ops allowed anywhere (KernelBench's rules); the rules for every profile
  below still apply.
- `none`: no static checks. For testing the runtime layers on their own; never for scoring.

Python is checked on its AST; C++/CUDA (files in `kernels/`, and C++ held in string constants of a
single-file candidate, for `load_inline`) token by token, after comments are removed. Each violation
names its rule, the file and the line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cuda_agent import pyparse
from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.config import POLICIES
from cuda_agent.evaluate.result import Code

PROFILES = POLICIES  # the profiles described above, by name


@dataclass(frozen=True, slots=True)
class Violation:
    code: Code
    file: str
    line: int
    message: str
    rule: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: [{self.rule}] {self.message}" if self.rule else \
            f"{self.file}:{self.line}: {self.message}"


# The rules of every profile, each with its code and why, for Python and C++ alike (docs/threat-model.md,
# "Static rules").
RULES: dict[str, tuple[Code, str]] = {
    "process_escape": (Code.FORBIDDEN_IO, "a process that leaves its process group outlives the evaluation"),
    "signals": (Code.FORBIDDEN_IO, "signals reach the judge and the harness, which run as the same user"),
    "process_memory": (Code.REFERENCE_ACCESS, "it reads or rewrites the memory of another process (the judge, "
                       "through ptrace or /proc/<pid>/: only /proc/self/ and /proc/cpuinfo may be read) or of "
                       "loaded code"),
    "native_threads": (Code.HIDDEN_WORK, "a native thread started outside forward can compute from the input "
                       "buffers before the timed call, and at run time it looks like the OpenMP pool torch "
                       "starts itself; use OpenMP (CPU) or CUDA streams"),
}

# --- Python -----------------------------------------------------------------------------------------

# Every profile. A process of the candidate's that leaves its process group outlives the evaluation
# (the group is what the harness kills), and signals reach the judge and the harness, which run as
# the same user: no runtime layer of this process stops either.
ESCAPE_CALLS: dict[str, str] = {
    "setsid": "process_escape", "setpgid": "process_escape", "setpgrp": "process_escape",
    "kill": "signals", "killpg": "signals", "pthread_kill": "signals",
}
ESCAPE_KWARGS = {"start_new_session", "process_group"}  # subprocess.Popen's ways out of the group
# Another process's memory (the judge holds the reference's outputs) through ptrace-like calls or
# /proc/<pid>/mem: the same user may do it where the kernel's ptrace restriction is off; and
# rewriting loaded code (mprotect, e.g. through ctypes), which no check of this process would see.
MEMORY_NAMES = {"ptrace", "process_vm_readv", "process_vm_writev", "mprotect"}
PROC_PATH = re.compile(r"^/proc/(?!self\b|thread-self\b|cpuinfo$|meminfo$|stat$|version$)")

# In strict, compute libraries other than the candidate's own extension are a PyTorch fallback too.
STRICT_MODULES = {m: (Code.TORCH_FALLBACK, "compute outside your own kernels")
                  for m in ("numpy", "scipy", "cupy", "numba", "jax", "triton", "tensorflow",
                            "torch._inductor", "torch._dynamo", "torch.func",
                            "torch.fx", "torch.export", "torch.compiler")}

# torch.* names that are allocation, metadata or types (allowed inside forward in strict).
TORCH_ALLOWED = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "tensor", "as_tensor", "Size", "device", "dtype", "Tensor", "no_grad",
    "inference_mode", "is_tensor", "is_floating_point", "numel", "finfo", "iinfo", "cuda",
    "float", "float32", "float16", "half", "bfloat16", "float64", "double", "int", "int32", "int64",
    "long", "int8", "uint8", "int16", "bool", "complex64", "contiguous_format", "channels_last",
    "strided", "preserve_format", "get_default_dtype", "is_grad_enabled", "ops", "utils",
    "backends", "enable_grad", "set_grad_enabled",
}
TORCH_OP_NAMESPACES = {"aten", "prims", "quantized", "_quantized", "_c10d_functional", "c10d",
                       "mkldnn", "_caffe2", "profiler", "inductor", "higher_order", "rngprims"}
TORCH_CUDA_ALLOWED = {"current_stream", "default_stream", "Stream", "stream", "set_stream", "Event",
                      "current_device", "device", "is_available", "get_device_properties",
                      "device_count", "synchronize"}
# Tensor methods and operators that compute (strict, inside forward). Views, metadata and dtype or
# layout conversions are allowed; the runtime guard has the exact list at the dispatcher.
COMPUTE_METHODS = {
    "matmul", "mm", "bmm", "addmm", "addmv", "addbmm", "baddbmm", "mv", "dot", "einsum", "linear",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "relu", "relu_", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "exp", "exp_",
    "log", "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "norm", "var",
    "std", "cumsum", "cumprod", "sort", "topk", "abs", "sqrt", "rsqrt", "pow", "clamp", "clamp_",
    "clamp_min", "clamp_max", "clip", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_",
    "where", "masked_fill", "masked_fill_", "layer_norm", "batch_norm", "group_norm",
    "instance_norm", "dropout", "max_pool2d", "avg_pool2d", "logsumexp", "erf", "sin", "cos",
    "neg", "reciprocal", "square", "addcmul", "addcdiv", "lerp", "hardtanh", "leaky_relu", "elu",
    "softplus", "mish", "hardswish", "triu", "tril", "diag", "cross", "outer", "kron", "gather",
    "scatter", "scatter_add", "index_select", "index_add", "bincount", "histc", "any", "all",
    "eq", "ne", "lt", "le", "gt", "ge", "floor", "ceil", "round", "sign", "fmod", "remainder",
}
ARITH_OPS = (ast.MatMult,)
CPP_HINT = re.compile(r"#include|__global__|torch::|at::|PYBIND11|pybind11|<<<")


class _PyChecker(ast.NodeVisitor):
    def __init__(self, file: str, profile: str):
        self.file, self.profile = file, profile
        self.out: list[Violation] = []
        self.in_forward = 0
        self.torch_names: set[str] = {"torch"}
        self.functional_names: set[str] = set()
        self.ext_builders: set[str] = set()  # names bound from torch.utils.cpp_extension
        self.extensions: set[str] = {"cuda_extension"}  # names bound to the candidate's own extensions
        self.cpp_strings: list[tuple[int, str]] = []

    def flag(self, node: ast.AST, code: Code, rule: str, message: str) -> None:
        self.out.append(Violation(code, self.file, getattr(node, "lineno", 0), message, rule))

    def flag_rule(self, node: ast.AST, rule: str, what: str) -> None:
        code, why = RULES[rule]
        self.flag(node, code, rule, f"{what} is not allowed in a candidate: {why}")

    # imports (strict: compute libraries)
    def _module(self, node: ast.AST, name: str, alias: str | None) -> None:
        if self.profile == "strict":
            for mod, (code, why) in STRICT_MODULES.items():
                if name == mod or name.startswith(mod + "."):
                    self.flag(node, code, "strict_compute_library", f"import of `{name}` is not allowed in the "
                              f"strict policy: {why} (or re-score with --policy kernelbench)")
                    return
        bound = alias or name.split(".")[0]
        if name == "torch" or (not alias and name.startswith("torch.")):
            self.torch_names.add(bound)
        if name == "torch.nn.functional":
            self.functional_names.add(bound)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._module(node, a.name, a.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            return  # nothing sits beside a candidate to import: it fails at load time
        self._module(node, mod, None)
        for a in node.names:
            self._module(node, f"{mod}.{a.name}", a.asname or a.name)
            if mod == "torch.utils.cpp_extension":
                self.ext_builders.add(a.asname or a.name)
            self._escape_name(node, a.name)

    # every profile: leaving the process group, signals, other processes' memory
    def _escape_name(self, node: ast.AST, name: str) -> None:
        rule = ESCAPE_CALLS.get(name) or ("process_memory" if name in MEMORY_NAMES else None)
        if rule is not None:
            self.flag_rule(node, rule, f"`{name}`")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in MEMORY_NAMES or (node.attr in ESCAPE_CALLS and _dotted(node.value) in ("os", "signal")):
            self._escape_name(node, node.attr)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            if CPP_HINT.search(node.value):
                self.cpp_strings.append((node.lineno, node.value))
            if PROC_PATH.match(node.value):
                self.flag_rule(node, "process_memory", f"the path {node.value[:40]!r}")

    def visit_Call(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg in ESCAPE_KWARGS and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
                self.flag_rule(kw.value, "process_escape", f"`{kw.arg}=`")
        if self.in_forward and self.profile == "strict":
            self._strict_call(node)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Call):
            fn = _dotted(node.value.func) or ""
            if fn.split(".")[-1] in ("load", "load_inline") and (
                    fn in self.ext_builders or "cpp_extension" in fn or fn.split(".")[0] in self.torch_names):
                self.extensions |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        is_model = node.name == "ModelNew"
        for item in node.decorator_list + node.bases + node.keywords:
            self.visit(item)
        for item in node.body:
            if is_model and isinstance(item, ast.FunctionDef) and item.name == "forward":
                self.in_forward += 1
                self.visit(item)
                self.in_forward -= 1
            else:
                self.visit(item)

    # strict: PyTorch compute inside forward
    def _strict_call(self, node: ast.Call) -> None:
        fn = node.func
        dotted = _dotted(fn) or ""
        parts = dotted.split(".")
        rule = "strict_forward"
        if parts and parts[0] in self.functional_names:
            self.flag(node, Code.TORCH_FALLBACK, rule, f"`{dotted}(...)` inside forward: PyTorch compute; do it "
                      "in your own kernel")
            return
        if parts and parts[0] in self.torch_names and len(parts) >= 2:
            rest = parts[1:]
            if rest[0] == "cuda" and (len(rest) == 1 or rest[1] in TORCH_CUDA_ALLOWED):
                return
            if rest[0] == "ops" and len(rest) >= 2 and rest[1] not in TORCH_OP_NAMESPACES:
                return  # the candidate's own op, registered with TORCH_LIBRARY
            if rest[0] in ("nn", "ops", "special", "linalg", "fft", "sparse") or rest[0] not in TORCH_ALLOWED:
                self.flag(node, Code.TORCH_FALLBACK, rule, f"`{dotted}(...)` inside forward: PyTorch compute; "
                          "only your extension's ops, torch.empty*, views and metadata are allowed there")
            return
        if isinstance(fn, ast.Attribute) and fn.attr in COMPUTE_METHODS:
            root = _root_name(fn)
            if root in self.torch_names or root in self.extensions or (
                    root == "self" and isinstance(fn.value, ast.Name)):
                return
            self.flag(node, Code.TORCH_FALLBACK, rule, f"`.{fn.attr}(...)` inside forward: a PyTorch compute "
                      "method; do it in your own kernel")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.in_forward and self.profile == "strict" and isinstance(node.op, ARITH_OPS):
            self.flag(node, Code.TORCH_FALLBACK, "strict_forward", "the `@` operator inside forward: a PyTorch "
                      "matmul; do it in your own kernel (or call cuBLAS from your extension)")
        self.generic_visit(node)


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


# --- C++ / CUDA -------------------------------------------------------------------------------------

# Every profile: (pattern, rule of RULES).
_CPP_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_create\b"), "native_threads"),
    (re.compile(r"\bptrace\b|\bprocess_vm_(read|write)v\b|\bmprotect\b"), "process_memory"),
    (re.compile(r"\bsetsid\s*\(|\bsetpgid\s*\(|\bsetpgrp\s*\(|\bdaemon\s*\("), "process_escape"),
    (re.compile(r"\bkill\s*\(|\bkillpg\s*\(|\bpthread_kill\b|\btgkill\b"), "signals"),
    (re.compile(r"\"/proc/(?!self\b|thread-self\b|cpuinfo\"|meminfo\")"), "process_memory"),
]
# torch:: / at:: names allowed in the extension in strict: types, allocation, streams, guards.
CPP_ALLOWED = {
    "Tensor", "TensorOptions", "ScalarType", "Scalar", "Device", "DeviceType", "IntArrayRef",
    "ArrayRef", "Half", "BFloat16", "Layout", "MemoryFormat", "dtype", "device", "empty",
    "empty_like", "empty_strided", "zeros", "zeros_like", "from_blob", "TensorAccessor",
    "PackedTensorAccessor32", "PackedTensorAccessor64", "RestrictPtrTraits", "DefaultPtrTraits",
    "acc_type", "opmath_type", "globalContext", "optional", "nullopt", "cuda", "Generator", "elementSize",
    "toString", "typeMetaToScalarType", "OptionalTensorRef", "TensorList", "CUDA", "CPU", "Float", "Int",
    "Long", "Bool", "indexing", "TensorBase", "ones", "ones_like", "full", "full_like", "DeviceGuard",
    "TensorArg", "OptionalDeviceGuard", "ScalarTypeToCPPTypeT",
}
CPP_CUDA_ALLOWED = {
    "getCurrentCUDAStream", "getDefaultCUDAStream", "getStreamFromPool", "CUDAStream", "CUDAGuard",
    "OptionalCUDAGuard", "CUDAStreamGuard", "CUDAEvent", "getCurrentCUDABlasHandle",
    "getCurrentCUDABlasLtHandle", "getCurrentDeviceProperties", "getDeviceProperties",
    "current_device", "device_count", "warp_size", "getCurrentCUDASolverDnHandle", "CUDAMultiStreamGuard",
}
_NS_CALL = re.compile(r"\b(at|torch)\s*::\s*(\w+)(?:\s*::\s*(\w+))?")
_CPP_COMPUTE_METHOD = re.compile(r"\.\s*(" + "|".join(sorted(COMPUTE_METHODS - {"max", "min", "any", "all", "round", "add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "sign", "abs", "floor", "ceil", "pow", "exp", "log", "sin", "cos", "neg", "load", "sort", "square", "sqrt"})) + r")\s*\(")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def check_cpp(source: str, file: str, profile: str, line0: int = 1) -> list[Violation]:
    """Token-level rules for C++/CUDA source (comments removed first)."""
    if profile == "none":
        return []
    text = _COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), source)
    out: list[Violation] = []

    def at(pos: int) -> int:
        return line0 + text.count("\n", 0, pos)

    for pattern, rule in _CPP_RULES:
        code, why = RULES[rule]
        for m in pattern.finditer(text):
            out.append(Violation(code, file, at(m.start()), f"`{m.group(0).strip()}`: {why}", rule))
    if profile == "strict":
        for m in _NS_CALL.finditer(text):
            name, sub = m.group(2), m.group(3)
            if name.startswith("k") and name[1:2].isupper():  # torch::kFloat32, at::kCUDA
                continue
            if name == "cuda" and (sub is None or sub in CPP_CUDA_ALLOWED):
                continue
            if name in CPP_ALLOWED and name != "cuda":
                continue
            out.append(Violation(Code.TORCH_FALLBACK, file, at(m.start()),
                                 f"`{m.group(0)}`: ATen/torch compute from the extension; only raw kernels, "
                                 "cuBLAS/cuDNN called directly, torch::empty* allocation, types, streams and "
                                 "guards are allowed", "strict_extension"))
        for m in _CPP_COMPUTE_METHOD.finditer(text):
            out.append(Violation(Code.TORCH_FALLBACK, file, at(m.start()),
                                 f"`{m.group(0)}...)`: a tensor compute method from the extension; write the "
                                 "kernel yourself", "strict_extension"))
    return out


def check_python(source: str, file: str, profile: str) -> list[Violation]:
    if profile == "none":
        return []
    try:
        tree = pyparse.parse(source, filename=file)
    except SyntaxError:
        return []  # the loader reports syntax errors with their line; nothing to add here
    checker = _PyChecker(file, profile)
    checker.visit(tree)
    out = checker.out
    for line, text in checker.cpp_strings:
        out += check_cpp(text, file, profile, line0=line)
    return out


def check(candidate: Candidate, profile: str) -> list[Violation]:
    """All static violations of `candidate` under `profile`, in file and line order."""
    if profile not in PROFILES:
        raise ValueError(f"policy={profile!r}: use one of {', '.join(PROFILES)}")
    name = "model_new.py"
    out = check_python(candidate.model_new, name, profile)
    for fname, src in candidate.kernels.items():
        out += check_cpp(src, f"kernels/{fname}", profile)
    seen: set[tuple[str, int, Code]] = set()
    unique = []
    for v in out:
        if (v.file, v.line, v.code) not in seen:
            seen.add((v.file, v.line, v.code))
            unique.append(v)
    return sorted(unique, key=lambda v: (v.file != name, v.file, v.line))
