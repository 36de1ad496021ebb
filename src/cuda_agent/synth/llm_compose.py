"""The LLM composer: a model is given sampled operators and writes one KernelBench-format task fusing
them, as the CUDA Agent paper made its training tasks. The operators come from the same draw as the
offline composer's (`attempt_rng`, `draw_count`, `sample_ops`), so a draft's operators depend on
(seed, attempt) only; what the model writes does not, and the same filters judge it.

A failed attempt is data, an `LlmFailure` with a reason code, never an exception:
`llm_error` (the request failed after the client's retries), `no_code` (the reply holds no Python code
block), `invalid_source` (the code is not a KernelBench-format task; the validator's message says why).
A task without its one `batch_size = N` line is not a failure: its draft has `batch_scalable=False`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from cuda_agent.errors import TaskError
from cuda_agent.pyparse import extract_module
from cuda_agent.synth.catalogue import Op
from cuda_agent.synth.compose import DEFAULT_MIX, Draft, attempt_rng, draw_count, sample_ops, task_name
from cuda_agent.tasks.loaders import validate_task_source

if TYPE_CHECKING:  # the client imports openai; keep this module cheap to import
    from cuda_agent.agent.llm import ChatClient

# Eager-PyTorch time the task's forward should take, by the device the tasks are made for.
_TARGET = {"cuda": "about 1-100 ms on one H200 GPU", "cpu": "about 1-50 ms on one CPU core"}

_BATCH_LINE = re.compile(r"^batch_size = \d+$", re.MULTILINE)

_EXAMPLE = '''\
```python
import torch
import torch.nn as nn

batch_size = 16
in_features = 1024
out_features = 512


class Model(nn.Module):
    """Linear -> GELU -> sum over the features."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.linear(x))
        return x.sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
```'''

_SYSTEM = """\
You write benchmark tasks for CUDA kernel optimisation, in the KernelBench format: one self-contained \
Python module defining `class Model(nn.Module)` with `__init__` and `forward`, module-level size \
constants, `get_inputs()` returning the list of forward arguments and `get_init_inputs()` returning the \
list of `Model(...)` arguments. Rules:
- Only `import torch` (and `torch.nn`, `torch.nn.functional`); nothing else. Operators from \
`transformers` are written out in plain torch code.
- float32 throughout. `forward` is deterministic: no dropout, no random ops.
- The output depends on the input and is not constant.
- Dim 0 of every input and of the output is the batch dimension, `batch_size`; never reduce, \
normalise, reshape, sort or attend across it.
- Exactly one line `batch_size = N` at module level; `get_inputs()` returns random tensors \
(`torch.randn`, `torch.rand`, `torch.randint`) whose dim 0 is `batch_size`.
- Choose sizes so that eager PyTorch runs `forward` in {target}.
- No prints, no file or network access, no code outside the definitions and constants.
Example of the format:
{example}
Answer with the complete module in one ```python code block."""

_USER = """\
Write ONE task whose `Model.forward` applies these {n} operator(s), each at least once, in a sensible \
order (you choose the shapes, sizes and arguments; add reshapes or glue only where needed):
{listing}"""


@dataclass(frozen=True)
class LlmFailure:
    """An attempt of the LLM composer that gave no draft; `reason` is one of the codes above."""

    attempt: int
    reason: str  # "llm_error" | "no_code" | "invalid_source"
    message: str
    ops: tuple[str, ...]


def build_prompt(op_list: Sequence[Op], n_ops: int, device: str) -> list[dict[str, Any]]:
    """The chat messages (system + user) asking for one task that fuses `op_list` (`n_ops` of them; an
    operator drawn twice is listed twice) with sizes suited to `device` ("cuda" or "cpu")."""
    if device not in _TARGET:
        raise ValueError(f"device {device!r}: expected one of {sorted(_TARGET)}")
    if n_ops != len(op_list) or n_ops < 1:
        raise ValueError(f"n_ops={n_ops} but {len(op_list)} operators were given")
    listing = "\n".join(f"{i}. `{op.name}` ({op.family})" for i, op in enumerate(op_list, 1))
    return [
        {"role": "system", "content": _SYSTEM.format(target=_TARGET[device], example=_EXAMPLE)},
        {"role": "user", "content": _USER.format(n=n_ops, listing=listing)},
    ]


def extract_task(text: str) -> str:
    """The task module in a reply (`pyparse.extract_module`: the longest fenced python block that
    defines `class Model`, else the last). ValueError when there is none."""
    return extract_module(text, "Model")


def compose_llm(client: ChatClient, seed: int, attempt: int, mix: dict[int, float] | None = None,
                pool: Sequence[Op] | None = None, device: str = "cuda") -> Draft | LlmFailure:
    """Draw the operators of attempt `attempt` of seed `seed`, ask `client` for a task fusing them, and
    return the draft, or the failure with its reason."""
    rng = attempt_rng(seed, attempt)
    n = draw_count(rng, mix or DEFAULT_MIX)
    chosen = sample_ops(rng, n, pool)
    names = tuple(op.name for op in chosen)
    messages = build_prompt(chosen, n, device)
    try:
        reply = client.chat(messages)
    # Any error of the request (openai's API/connection/timeout errors, a malformed response) ends only
    # this attempt: one bad reply must not end a run of thousands.
    except Exception as exc:  # noqa: BLE001
        return LlmFailure(attempt, "llm_error", f"{type(exc).__name__}: {exc}", names)
    try:
        source = extract_task(reply.message.get("content") or "")
    except ValueError as exc:
        cut = " (the reply was cut at max_tokens)" if reply.finish_reason == "length" else ""
        return LlmFailure(attempt, "no_code", f"{exc}{cut}", names)
    try:
        validate_task_source(source, f"{task_name(names, attempt)}.py")
    except TaskError as exc:
        return LlmFailure(attempt, "invalid_source", str(exc), names)
    return Draft(attempt=attempt, seed=seed, composer="llm", source=source, ops=names,
                 families=tuple(op.family for op in chosen),
                 batch_scalable=len(_BATCH_LINE.findall(source)) == 1)
