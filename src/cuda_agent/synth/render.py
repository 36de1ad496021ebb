"""A chain of operator instances -> the source of a KernelBench-format task.

The rendered module imports torch (and `math` when the code uses it), holds the instances' module-level
`defs` once each, a `Model` whose `__init__` takes no arguments, a `forward(self, x, y0, y1, ...)` whose
extra inputs are numbered across the whole chain, a `batch_size = N` line that `set_batch` rewrites (the
composer rescales the batch to reach a runtime window), `get_inputs()` returning `torch.randn` tensors
whose dim 0 is `batch_size`, and `get_init_inputs()` returning `[]`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cuda_agent.synth.catalogue import Instance, Shape

_PLACEHOLDER = re.compile(r"\{(x|name|y\d+)\}")
_BATCH_LINE = re.compile(r"^batch_size = \d+$", re.MULTILINE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_INDENT = "    "
# Acronyms written as one word in attribute names (`LeakyReLU` -> `leaky_relu`, `LlamaRMSNorm` -> `llama_rms_norm`).
_ACRONYMS = ("PReLU", "ReLU", "SiLU", "GELU", "CELU", "SELU", "ELU", "GLU", "LSTM", "GRU", "RNN", "RMS", "MLP", "LRN",
             "BCE", "MSE", "NLL", "GPT", "ViT", "KL", "LP", "1D")


def _attr_base(op: str) -> str:
    """`torch.nn.ConvTranspose2d` -> `conv_transpose2d`, `torch.nn.SiLU` -> `silu`, `torch.cumsum` -> `cumsum`."""
    short = op.rsplit(".", 1)[-1].strip("_")
    for acronym in _ACRONYMS:
        short = short.replace(acronym, acronym.capitalize())
    snake = _CAMEL.sub("_", short).lower()
    snake = re.sub(r"[^0-9a-z_]+", "_", snake).strip("_")
    return snake or "op"


def _fill(statement: str, x: str, name: str, ys: Sequence[str], where: str) -> str:
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key == "x":
            return x
        if key == "name":
            return name
        i = int(key[1:])
        if i >= len(ys):
            raise ValueError(f"{where}: statement uses {{{key}}} but the instance declares only {len(ys)} "
                             f"extra input(s); add its shape to `extra_inputs`")
        return ys[i]
    return _PLACEHOLDER.sub(sub, statement)


def _indented(statement: str, level: int) -> list[str]:
    return [(_INDENT * level + line) if line.strip() else "" for line in statement.splitlines()]


def _check_chain(chain: Sequence[Instance], input_shape: Shape) -> None:
    if not chain:
        raise ValueError("render: the chain is empty; pass at least one Instance")
    batch = input_shape[0] if input_shape else None
    if not input_shape or any(d < 1 for d in input_shape):
        raise ValueError(f"render: input shape {input_shape} is not a non-empty shape of positive sizes")
    current = tuple(input_shape)
    for i, inst in enumerate(chain):
        where = f"render: op {i} ({inst.op})"
        if inst.in_shape is not None and tuple(inst.in_shape) != current:
            before = "the input" if i == 0 else f"op {i - 1} ({chain[i - 1].op}) outputs"
            raise ValueError(f"{where} was made for input shape {tuple(inst.in_shape)} but {before} {current}; "
                             f"make each instance for the previous one's out_shape")
        if not inst.out_shape or inst.out_shape[0] != batch:
            raise ValueError(f"{where} outputs {inst.out_shape}, whose dim 0 is not the batch {batch}")
        for j, extra in enumerate(inst.extra_inputs):
            if not extra or extra[0] != batch:
                raise ValueError(f"{where}: extra input {j} has shape {extra}, whose dim 0 is not the batch {batch}")
        current = tuple(inst.out_shape)


def _randn(shape: Shape) -> str:
    return "torch.randn(" + ", ".join(["batch_size", *(str(d) for d in shape[1:])]) + ")"


def render(chain: Sequence[Instance], input_shape: Shape, *, name: str = "Model", doc: str | None = None) -> str:
    """The KernelBench-format source of `chain` applied to an input of `input_shape` (dim 0 = batch).

    Raises ValueError when the chain is empty or its shapes do not connect (an instance made for another
    input shape than the previous output, or a dim 0 that is not the batch).
    """
    _check_chain(chain, tuple(input_shape))
    if not name.isidentifier():
        raise ValueError(f"render: class name {name!r} is not a Python identifier")

    defs: list[str] = []
    init: list[str] = []
    forward: list[str] = []
    inputs: list[Shape] = [tuple(input_shape)]
    params: list[str] = ["x"]
    for i, inst in enumerate(chain, 1):
        attr = f"{_attr_base(inst.op)}_{i}"
        ys = [f"y{len(params) - 1 + j}" for j in range(len(inst.extra_inputs))]
        params += ys
        inputs += [tuple(s) for s in inst.extra_inputs]
        where = f"render: op {i - 1} ({inst.op})"
        for d in inst.defs:
            if d not in defs:
                defs.append(d)
        init += [_fill(s, "x", attr, ys, where) for s in inst.init]
        forward += [_fill(s, "x", attr, ys, where) for s in inst.forward]

    ops = " -> ".join(inst.op for inst in chain)
    docline = doc if doc is not None else f"Synthesised task: {ops}."
    lines = ['"""' + docline.replace('"""', "'''") + '"""', "", "import torch", "import torch.nn as nn",
             "import torch.nn.functional as F"]
    body = "\n".join(defs + init + forward)
    if re.search(r"\bmath\.", body):
        lines.insert(3, "import math")
    lines.append("")
    for d in defs:
        lines += ["", d, ""]
    lines += ["", f"class {name}(nn.Module):",
              f'{_INDENT}"""{ops}"""', "",
              f"{_INDENT}def __init__(self):",
              f"{_INDENT * 2}super().__init__()"]
    for s in init:
        lines += _indented(s, 2)
    lines += ["", f"{_INDENT}def forward(self, {', '.join(params)}):"]
    for s in forward:
        lines += _indented(s, 2)
    lines += [f"{_INDENT * 2}return x", "", "",
              f"batch_size = {input_shape[0]}", "", "",
              "def get_inputs():",
              f"{_INDENT}return [{', '.join(_randn(s) for s in inputs)}]", "", "",
              "def get_init_inputs():",
              f"{_INDENT}return []", ""]
    return "\n".join(lines)


def set_batch(source: str, batch: int) -> str:
    """`source` with its `batch_size = N` line set to `batch` (a rendered task has exactly one)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"set_batch: batch must be a positive int, got {batch!r}")
    found = _BATCH_LINE.findall(source)
    if len(found) != 1:
        raise ValueError(f"set_batch: expected exactly one `batch_size = N` line, found {len(found)}; "
                         f"pass a task produced by render()")
    return _BATCH_LINE.sub(f"batch_size = {batch}", source)
