"""Static policy checks: the fast first filter, run on the candidate's sources before anything is built.

Two profiles (DESIGN section 3, "Trust boundary"):

- `strict` (the default): the CUDA-Agent rules. Inside `ModelNew.forward` only the candidate's own
  extension calls, `empty`-family allocation, views and metadata; inside the extension only raw
  kernels, cuBLAS/cuDNN called directly and `torch::empty*` allocation. Plus every rule below.
- `kernelbench`: PyTorch ops are allowed anywhere (KernelBench's rules), every cheating category
  from 3 on is still enforced.
- `none`: no static checks. For testing the runtime layers on their own; never for scoring.

Python is checked on its AST; C++/CUDA (files in `kernels/`, and C++ held in string constants of a
single-file candidate, for `load_inline`) token by token, after comments are removed. Each rule names
the DESIGN category it serves and the reason code it raises. Static checks can be evaded by code that
builds names at run time (`getattr(torch, "re" + "lu")`); the runtime guards (guard.py) and the
process boundary are the layers that hold. Static checks exist to reject the obvious early, with a
message that says where and what to do.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cuda_agent import pyparse
from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.result import Code

PROFILES = ("strict", "kernelbench", "none")


@dataclass(frozen=True, slots=True)
class Violation:
    code: Code
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


# --- Python -----------------------------------------------------------------------------------------

# Modules whose import alone is out of bounds, with the category they serve.
FORBIDDEN_MODULES: dict[str, tuple[Code, str]] = {
    **{m: (Code.HIDDEN_WORK, "background threads or processes hide work from the timer")
       for m in ("threading", "_thread", "multiprocessing", "concurrent", "asyncio", "sched")},
    **{m: (Code.FORBIDDEN_IO, "processes, sockets, signals and files are not a kernel's business")
       for m in ("subprocess", "socket", "signal", "shutil", "tempfile", "pty", "fcntl", "mmap",
                 "resource", "pickle", "shelve", "urllib", "http", "requests", "glob", "pathlib")},
    **{m: (Code.HARNESS_PATCH, "it rewrites code or interpreter state at run time")
       for m in ("ctypes", "cffi", "importlib", "builtins", "__builtin__", "unittest", "atexit",
                 "faulthandler", "sitecustomize", "marshal", "types", "code", "codeop", "dis",
                 "pdb", "bdb", "trace", "tracemalloc")},
    **{m: (Code.REFERENCE_ACCESS, "the reference, the evaluator and other objects are off limits")
       for m in ("gc", "inspect", "traceback", "weakref", "model", "reference", "cuda_agent",
                 "__main__", "kernelbench", "utils")},
    **{m: (Code.TIMING_PROBE, "clocks in the candidate can only serve to detect the timer")
       for m in ("time", "timeit", "datetime", "cProfile", "profile")},
}
# In strict, compute libraries other than the candidate's own extension are a PyTorch fallback too.
STRICT_MODULES = {m: (Code.TORCH_FALLBACK, "compute outside your own kernels")
                  for m in ("numpy", "scipy", "cupy", "numba", "jax", "triton", "tensorflow",
                            "torch._inductor", "torch._dynamo", "torch.func",
                            "torch.fx", "torch.export", "torch.compiler")}

# Attribute names that are unambiguous wherever they appear (categories 5, 7-12).
FORBIDDEN_ATTRS: dict[str, Code] = {
    **{a: Code.REFERENCE_ACCESS for a in (
        "_getframe", "f_back", "f_locals", "f_globals", "f_code", "tb_frame", "gi_frame", "cr_frame",
        "__globals__", "__closure__", "__code__", "__subclasses__", "__builtins__", "__mro__",
        "get_objects", "get_referrers", "get_referents", "_current_frames", "__self__")},
    **{a: Code.HARNESS_PATCH for a in (
        "settrace", "setprofile", "set_trace", "addaudithook", "meta_path", "path_hooks",
        "__setattr__", "__delattr__", "__class__", "__dict__", "__import__", "__loader__", "__spec__",
        "_C", "_python_dispatch", "_get_current_dispatch_mode", "_disable_dynamo", "library",
        "Library", "__torch_function__", "__torch_dispatch__", "_make_subclass",
        "_make_wrapper_subclass")},
    **{a: Code.FORBIDDEN_IO for a in ("read_text", "read_bytes", "write_text", "write_bytes", "save",
                                     "from_file", "load")},
    **{a: Code.TIMING_PROBE for a in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
                                      "process_time", "thread_time", "elapsed_time")},
    **{a: Code.HIDDEN_WORK for a in ("Thread", "start_new_thread", "ThreadPoolExecutor",
                                     "ProcessPoolExecutor", "run_in_executor")},
}
# Attributes forbidden on the `os`, `sys`, `io` and `posix` modules only (`list.remove` is fine).
FORBIDDEN_OS_ATTRS: dict[str, Code] = {
    **{a: Code.FORBIDDEN_IO for a in (
        "system", "popen", "spawnl", "spawnv", "spawnve", "spawnlp", "posix_spawn", "fork",
        "forkpty", "execv", "execve", "execl", "execlp", "execvp", "kill", "killpg", "getppid",
        "setsid", "setpgid", "dup", "dup2", "open", "fdopen", "write", "remove", "unlink", "rename",
        "replace", "rmdir", "removedirs", "makedirs", "mkdir", "chmod", "chdir", "putenv",
        "listdir", "scandir", "walk", "stdin", "pipe", "mkfifo", "symlink", "link", "truncate")},
    **{a: Code.EARLY_EXIT for a in ("exit", "_exit", "abort")},
}
FORBIDDEN_SYS_ATTRS: dict[str, Code] = {
    **{a: Code.HARNESS_PATCH for a in ("modules", "path", "meta_path", "setrecursionlimit",
                                      "setswitchinterval")},
    **{a: Code.EARLY_EXIT for a in ("exit",)},
}

FORBIDDEN_BUILTINS: dict[str, Code] = {
    "exec": Code.HARNESS_PATCH, "eval": Code.HARNESS_PATCH, "compile": Code.HARNESS_PATCH,
    "__import__": Code.HARNESS_PATCH, "setattr": Code.HARNESS_PATCH, "delattr": Code.HARNESS_PATCH,
    "globals": Code.REFERENCE_ACCESS, "locals": Code.REFERENCE_ACCESS, "vars": Code.REFERENCE_ACCESS,
    "breakpoint": Code.HARNESS_PATCH, "open": Code.FORBIDDEN_IO, "input": Code.FORBIDDEN_IO,
    "exit": Code.EARLY_EXIT, "quit": Code.EARLY_EXIT,
}
# Assignments to attributes of these roots are harness patches, except the precision switches that
# the paper allows (recorded in the result): the older ones, and torch's newer `fp32_precision`
# (global, or for cuBLAS matmuls, cuDNN, its convolutions or RNNs).
PRECISION_SWITCHES = re.compile(
    r"^torch\.backends\.(cuda\.matmul|cudnn)\.(allow_tf32|allow_fp16_reduced_precision_reduction"
    r"|allow_bf16_reduced_precision_reduction|benchmark|deterministic|enabled)$"
    r"|^torch\.backends(\.cuda\.matmul|\.cudnn(\.conv|\.rnn)?)?\.fp32_precision$")

# torch.* names that are allocation, metadata or types (allowed inside forward in strict).
TORCH_ALLOWED = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "tensor", "as_tensor", "Size", "device", "dtype", "Tensor", "no_grad",
    "inference_mode", "is_tensor", "is_floating_point", "numel", "finfo", "iinfo", "cuda",
    "float", "float32", "float16", "half", "bfloat16", "float64", "double", "int", "int32", "int64",
    "long", "int8", "uint8", "int16", "bool", "complex64", "contiguous_format", "channels_last",
    "strided", "preserve_format", "get_default_dtype", "is_grad_enabled", "ops", "utils",
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
        self.modules: dict[str, str] = {}  # bound name -> module (or module.attr) it stands for
        self.ext_builders: set[str] = set()  # names bound from torch.utils.cpp_extension
        self.extensions: set[str] = {"cuda_extension"}  # names bound to the candidate's own extensions
        self.cpp_strings: list[tuple[int, str]] = []

    def flag(self, node: ast.AST, code: Code, message: str) -> None:
        self.out.append(Violation(code, self.file, getattr(node, "lineno", 0), message))

    # imports
    def _module(self, node: ast.AST, name: str, alias: str | None) -> None:
        for table in (FORBIDDEN_MODULES, STRICT_MODULES if self.profile == "strict" else {}):
            for mod, (code, why) in table.items():
                if name == mod or name.startswith(mod + "."):
                    self.flag(node, code, f"import of `{name}` is not allowed: {why}")
                    return
        bound = alias or name.split(".")[0]
        self.modules[bound] = name if alias else name.split(".")[0]
        if name == "torch" or (not alias and name.startswith("torch.")):
            self.torch_names.add(bound)
        if name == "torch.nn.functional":
            self.functional_names.add(bound)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._module(node, a.name, a.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = "." * node.level + (node.module or "")
        if node.level:
            self.flag(node, Code.REFERENCE_ACCESS, f"relative import `from {mod} import ...`: a candidate "
                      "is one file (or model_new.py and kernels/); it imports nothing beside it")
            return
        self._module(node, mod, None)
        for a in node.names:
            full = f"{mod}.{a.name}"
            bound = a.asname or a.name
            self._module(node, full, bound)  # `from torch.nn import functional as F` binds a module
            if mod == "torch.utils.cpp_extension":
                self.ext_builders.add(bound)
                continue
            table = {**FORBIDDEN_ATTRS, **(FORBIDDEN_OS_ATTRS if mod in ("os", "posix", "io") else {}),
                     **(FORBIDDEN_SYS_ATTRS if mod == "sys" else {})}
            if a.name in table:
                self.flag(node, table[a.name], f"`from {mod} import {a.name}` is not allowed in a candidate")

    # names and attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        base = _dotted(node.value)
        module = self.modules.get(base or "", base)
        code = None
        if module in ("os", "posix", "io", "nt"):
            code = FORBIDDEN_OS_ATTRS.get(node.attr)
        elif module == "sys":
            code = FORBIDDEN_SYS_ATTRS.get(node.attr)
        if code is None and node.attr in FORBIDDEN_ATTRS:
            code = FORBIDDEN_ATTRS[node.attr]
            if node.attr == "load" and (module == "torch.utils.cpp_extension" or base in self.ext_builders):
                code = None  # cpp_extension.load: how a single file builds its kernels
        if code is not None:
            self.flag(node, code, f"`{dotted or '.' + node.attr}` is not allowed in a candidate")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_BUILTINS and isinstance(node.ctx, ast.Load):
            self.flag(node, FORBIDDEN_BUILTINS[node.id], f"the builtin `{node.id}` is not allowed in a candidate")
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.flag(node, Code.HARNESS_PATCH, f"`{node.id}` is not allowed in a candidate")

    def _patch_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._patch_target(t)
            return
        if isinstance(target, ast.Attribute):
            dotted = _dotted(target)
            root = _root_name(target)
            if dotted and PRECISION_SWITCHES.match(dotted.replace(root, "torch", 1) if root in self.torch_names else dotted):
                return
            if root is not None and root != "self":
                self.flag(target, Code.HARNESS_PATCH, f"assignment to `{dotted or target.attr}`: candidates may "
                          "not change attributes of modules, classes or objects they did not create "
                          "(only `self.*` and the TF32/reduced-precision switches of torch.backends)")
        elif isinstance(target, ast.Subscript):
            root = _root_name(target.value)
            module = self.modules.get(root or "", root)
            if (module in ("sys", "builtins") or root in self.torch_names
                    or (module == "os" and _dotted(target.value) != f"{root}.environ")):
                self.flag(target, Code.HARNESS_PATCH, "item assignment into a module's table is not allowed")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._patch_target(t)
        if isinstance(node.value, ast.Call):
            fn = _dotted(node.value.func) or ""
            if fn.split(".")[-1] in ("load", "load_inline") and (
                    fn in self.ext_builders or fn.rsplit(".", 1)[0] in self.modules or "cpp_extension" in fn):
                self.extensions |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._patch_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._patch_target(t)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        if self.in_forward:
            self.flag(node, Code.TIMING_PROBE, "`global` state written inside forward: calls must not depend on "
                      "earlier calls (caching, call counting)")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases:
            d = _dotted(b) or ""
            if d.split(".")[-1] == "Tensor" or d.endswith("Tensor"):
                self.flag(node, Code.NOT_PLAIN_TENSOR, f"class {node.name} subclasses {d}: outputs must be plain "
                          "torch.Tensor objects")
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name in ("__torch_function__", "__torch_dispatch__"):
                self.flag(item, Code.NOT_PLAIN_TENSOR, f"{node.name}.{item.name}: tensor proxies are not allowed")
        is_model = node.name == "ModelNew"
        for item in node.body:
            if is_model and isinstance(item, ast.FunctionDef) and item.name == "forward":
                self.in_forward += 1
                self.visit(item)
                self.in_forward -= 1
            else:
                self.visit(item)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and CPP_HINT.search(node.value):
            self.cpp_strings.append((node.lineno, node.value))

    # strict: PyTorch compute inside forward
    def visit_Call(self, node: ast.Call) -> None:
        if self.in_forward and self.profile == "strict":
            self._strict_call(node)
        self.generic_visit(node)

    def _strict_call(self, node: ast.Call) -> None:
        fn = node.func
        dotted = _dotted(fn) or ""
        parts = dotted.split(".")
        if parts and parts[0] in self.functional_names:
            self.flag(node, Code.TORCH_FALLBACK, f"`{dotted}(...)` inside forward: PyTorch compute; do it in "
                      "your own kernel")
            return
        if parts and parts[0] in self.torch_names and len(parts) >= 2:
            rest = parts[1:]
            if rest[0] == "cuda" and (len(rest) == 1 or rest[1] in TORCH_CUDA_ALLOWED):
                return
            if rest[0] == "ops" and len(rest) >= 2 and rest[1] not in TORCH_OP_NAMESPACES:
                return  # the candidate's own op, registered with TORCH_LIBRARY
            if rest[0] in ("nn", "ops", "special", "linalg", "fft", "sparse") or rest[0] not in TORCH_ALLOWED:
                self.flag(node, Code.TORCH_FALLBACK, f"`{dotted}(...)` inside forward: PyTorch compute; only "
                          "your extension's ops, torch.empty*, views and metadata are allowed there")
            return
        if isinstance(fn, ast.Attribute) and fn.attr in COMPUTE_METHODS:
            root = _root_name(fn)
            if root in self.torch_names or root in self.extensions or (
                    root == "self" and isinstance(fn.value, ast.Name)):
                return
            self.flag(node, Code.TORCH_FALLBACK, f"`.{fn.attr}(...)` inside forward: a PyTorch compute method; "
                      "do it in your own kernel")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.in_forward and self.profile == "strict" and isinstance(node.op, ARITH_OPS):
            self.flag(node, Code.TORCH_FALLBACK, "the `@` operator inside forward: a PyTorch matmul; do it in "
                      "your own kernel (or call cuBLAS from your extension)")
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

_CPP_RULES: list[tuple[re.Pattern[str], Code, str]] = [
    (re.compile(r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_create\b|\bcudaLaunchHostFunc\b"
                r"|\bcudaStreamAddCallback\b|\bfork\s*\(|\bvfork\b"),
     Code.HIDDEN_WORK, "threads, forks and host callbacks hide work from the timer"),
    (re.compile(r"\bdl(open|sym|vsym)\b|\bmprotect\b|\bptrace\b|\bprocess_vm_(read|write)v\b"
                r"|\bLD_PRELOAD\b|\bPyImport_\w+|\bPyRun_\w+|\bPyEval_\w+|\bPySys_\w+"
                r"|\bmodule_?\s*::\s*import\b|\bpy(bind11)?\s*::\s*(eval|exec|import)\b|\bsetenv\b|\bputenv\b"
                r"|\b(cudaSetDevice|cudaDeviceReset|cudaDeviceSetLimit|cuCtxCreate|cuCtxDestroy)\b"),
     Code.HARNESS_PATCH, "loading symbols, patching memory or calling back into Python is not allowed"),
    (re.compile(r"\bfopen\b|\bfreopen\b|\bstd\s*::\s*[io]?fstream\b|\bofstream\b|\bifstream\b"
                r"|::\s*open\s*\(|\bsystem\s*\(|\bpopen\b|\bexec[lv]p?e?\s*\(|\bsocket\s*\(|\bkill\s*\("
                r"|\bsigaction\b|\bsignal\s*\(|\"/proc/|\"/dev/shm|\bunlink\s*\(|\bremove\s*\("),
     Code.FORBIDDEN_IO, "files, processes, sockets and signals are not a kernel's business"),
    (re.compile(r"\b(std\s*::\s*)?(_?exit|quick_exit|_Exit|abort|terminate)\s*\("),
     Code.EARLY_EXIT, "a kernel may not end the process"),
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

    for pattern, code, why in _CPP_RULES:
        for m in pattern.finditer(text):
            out.append(Violation(code, file, at(m.start()), f"`{m.group(0).strip()}`: {why}"))
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
                                 "guards are allowed"))
        for m in _CPP_COMPUTE_METHOD.finditer(text):
            out.append(Violation(Code.TORCH_FALLBACK, file, at(m.start()),
                                 f"`{m.group(0)}...)`: a tensor compute method from the extension; write the "
                                 "kernel yourself"))
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
