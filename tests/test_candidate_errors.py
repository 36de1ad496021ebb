"""A candidate's own errors come back as its author should read them: its file and line, its own
frames, the exception; none of the harness's frames or paths. The agent reads these messages as
tool output, so they must be short and about its code."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.evaluate import Code, EvalConfig, evaluate, load_candidate
from cuda_agent.evaluate.worker.common import candidate_trace
from cuda_agent.tasks import load_task

TASK = Path(__file__).parent / "data" / "relu_bias_task.py"


def _raised(tmp_path: Path, source: str, call: str = "") -> BaseException:
    """The exception that importing `source` as model_new.py (then running `call` on it) raises."""
    path = tmp_path / "model_new.py"
    path.write_text(textwrap.dedent(source))
    try:
        spec = importlib.util.spec_from_file_location("model_new_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if call:
            eval(call, {"m": module})
    except BaseException as exc:  # noqa: BLE001
        return exc
    finally:
        sys.modules.pop("model_new_under_test", None)
    raise AssertionError("nothing was raised")


def test_a_syntax_error_reads_as_file_line_the_line_and_a_caret(tmp_path):
    exc = _raised(tmp_path, "import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n")
    text = candidate_trace(exc, tmp_path)
    first, line, caret = text.splitlines()
    assert first.startswith("model_new.py, line 3: SyntaxError: ")
    assert line.strip() == "class ModelNew(torch.nn.Module:"
    assert caret.strip() == "^"
    assert str(tmp_path) not in text


def test_an_exception_shows_the_candidates_frames_where_a_library_raised_it_and_nothing_of_ours(tmp_path):
    exc = _raised(tmp_path, """
        import torch

        def helper(x):
            return torch.matmul(x, x)

        def forward(x):
            return helper(x)
        """, "m.forward(__import__('torch').zeros(2, 3))")
    text = candidate_trace(exc, tmp_path)
    assert "model_new.py, line 8, in forward" in text and "model_new.py, line 5, in helper" in text
    assert "return torch.matmul(x, x)" in text
    assert text.splitlines()[-1].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert "test_candidate_errors.py" not in text  # the caller's frames (here: the test's) are not the candidate's
    assert str(tmp_path) not in text


def test_a_chained_exception_names_its_cause(tmp_path):
    exc = _raised(tmp_path, """
        def forward():
            try:
                {}["weight"]
            except KeyError as e:
                raise ValueError("no weight") from e
        """, "m.forward()")
    text = candidate_trace(exc, tmp_path)
    assert "ValueError: no weight" in text and "caused by: KeyError: 'weight'" in text


def test_an_exception_without_a_frame_of_the_candidate_keeps_the_whole_traceback(tmp_path):
    try:
        int("not a number")
    except ValueError as exc:
        text = candidate_trace(exc, tmp_path / "elsewhere")
    assert text.startswith("Traceback (most recent call last):") and "test_candidate_errors.py" in text


@pytest.mark.parametrize("body,code,where", [
    ("class ModelNew(nn.Module:\n    pass\n", Code.LOAD_ERROR, "model_new.py, line 3: SyntaxError"),
    ("import no_such_module_here\n", Code.LOAD_ERROR, "model_new.py, line 3, in <module>"),
    ("class ModelNew(nn.Module):\n    def __init__(self, f):\n        super().__init__()\n"
     "        self.w = nn.Linear(f, f)[0]\n", Code.INIT_ERROR, "model_new.py, line 6, in __init__"),
    ("class ModelNew(nn.Module):\n    def __init__(self, f):\n        super().__init__()\n"
     "    def forward(self, x):\n        return x @ x\n", Code.RUNTIME_ERROR, "model_new.py, line 7, in forward"),
])
def test_the_verdict_of_a_candidates_own_error_names_its_line_and_no_harness_frame(tmp_path, cache_dir, body,
                                                                                    code, where):
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\nimport torch.nn as nn\n" + body)
    res = evaluate(load_task(TASK), load_candidate(cand),
                   EvalConfig(device="cpu", cache_dir=cache_dir, policy="kernelbench", timing=False, timeout_s=60))
    [failure] = res.failures
    assert failure.code is code and where in failure.message, failure.message
    for harness in ("cuda_agent/evaluate", "importlib", "cuda-agent-eval-"):
        assert harness not in failure.message, failure.message
