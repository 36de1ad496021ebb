"""Tests for cuda_agent.tasks: loading and static validation of KernelBench-format tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.errors import TaskError, UsageError
from cuda_agent.tasks import (Task, load_hf_kernelbench, load_kernelbench, load_task, load_taskset,
                              validate_task_source)

KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"
SRC = Path(__file__).resolve().parents[1] / "src"

GOOD = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, a, b):
            return a + b

    def get_inputs():
        return [torch.rand(4), torch.rand(4)]

    def get_init_inputs():
        return [1]
    """
)


def _needs_kernelbench() -> Path:
    if not (KERNELBENCH / "level1").is_dir():
        pytest.skip(f"KernelBench copy not present at {KERNELBENCH}")
    return KERNELBENCH


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _task_error(tmp_path: Path, text: str) -> TaskError:
    file = _write(tmp_path / "level1" / "7_Bad.py", textwrap.dedent(text))
    with pytest.raises(TaskError) as info:
        load_task(file)
    assert info.value.path == str(file)
    return info.value


# ------------------------------------------------------------------ real KernelBench files


def test_a_real_kernelbench_file_loads_with_its_level_id_and_name():
    root = _needs_kernelbench()
    task = load_task(root / "level1" / "23_Softmax.py")
    assert isinstance(task, Task)
    assert task.name == "23_Softmax"
    assert task.level == 1 and task.problem_id == 23
    assert task.id == "level1/23_Softmax"
    assert task.origin == str(root / "level1" / "23_Softmax.py")
    assert "class Model" in task.source
    assert len(task.sha256) == 64


def test_kernelbench_loads_levels_1_to_3_in_order_and_leaves_level_4_out():
    root = _needs_kernelbench()
    tasks = load_kernelbench(root)
    by_level = {lv: [t for t in tasks if t.level == lv] for lv in (1, 2, 3, 4)}
    assert [len(by_level[lv]) for lv in (1, 2, 3)] == [100, 100, 50]
    assert by_level[4] == []  # level 4 is excluded by default (needs network)
    assert len(tasks) == 250
    assert tasks == sorted(tasks, key=lambda t: (t.level, t.problem_id))
    ids = {t.id for t in tasks}
    assert "level1/23_Softmax" in ids
    assert tasks[0].id.startswith("level1/1_")
    assert len(ids) == 250

    only2 = load_kernelbench(root, levels=[2])
    assert len(only2) == 100 and {t.level for t in only2} == {2}
    assert [t.problem_id for t in only2] == list(range(1, 101))


# ------------------------------------------------------------------ layouts


def test_kernelbench_loads_from_a_checkouts_root_or_its_kernelbench_folder(tmp_path):
    bench = tmp_path / "KernelBench"
    _write(bench / "level1" / "10_Foo.py", GOOD)
    _write(bench / "level1" / "2_Bar.py", GOOD)
    _write(bench / "level1" / "README.md", "not a task")
    _write(bench / "level1" / "helper.py", "x = 1\n")  # skipped: not <id>_<Name>.py
    _write(bench / "level2" / "1_Baz.py", GOOD)
    _write(bench / "level4" / "1_Net.py", GOOD)

    tasks = load_kernelbench(tmp_path)
    assert [t.id for t in tasks] == ["level1/2_Bar", "level1/10_Foo", "level2/1_Baz"]
    assert [(t.level, t.problem_id) for t in tasks] == [(1, 2), (1, 10), (2, 1)]

    # its KernelBench/ folder works too, and level 4 can be asked for explicitly
    assert [t.id for t in load_kernelbench(bench)] == [t.id for t in tasks]
    assert [t.id for t in load_kernelbench(tmp_path, levels=[4])] == ["level4/1_Net"]

    with pytest.raises(UsageError, match="level"):
        load_kernelbench(tmp_path, levels=[3])


def test_a_folder_without_level_folders_is_a_usage_error_naming_where_it_looked(tmp_path):
    with pytest.raises(UsageError) as info:
        load_kernelbench(tmp_path)
    msg = str(info.value)
    assert "no KernelBench level folder" in msg
    assert str(tmp_path / "KernelBench") in msg


def test_an_invalid_task_file_stops_kernelbench_loading_naming_the_file(tmp_path):
    _write(tmp_path / "level1" / "1_Ok.py", GOOD)
    bad = _write(tmp_path / "level1" / "2_Bad.py", "class Model:\n    pass\n")
    with pytest.raises(TaskError) as info:
        load_kernelbench(tmp_path)
    assert info.value.path == str(bad)
    assert info.value.line == 1


def test_a_task_outside_the_layout_loads_and_bad_paths_are_usage_errors(tmp_path):
    task = load_task(_write(tmp_path / "my_task.py", GOOD))
    assert task.name == "my_task" and task.level is None and task.problem_id is None
    assert task.id == "my_task"

    with pytest.raises(UsageError, match="does not exist"):
        load_task(tmp_path / "missing.py")
    with pytest.raises(UsageError, match=r"\.py"):
        load_task(_write(tmp_path / "task.txt", GOOD))


# ------------------------------------------------------------------ malformed tasks


def test_a_syntax_error_names_its_line(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        import torch

        class Model(:
            pass
        """,
    )
    assert err.line == 3
    assert "syntax error" in err.detail
    assert ":3:" in str(err)


def test_a_task_without_model_says_what_a_task_defines(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        class Net:
            def forward(self, x):
                return x

        def get_inputs():
            return [1]

        def get_init_inputs():
            return []
        """,
    )
    assert err.line is None
    assert "defines no class `Model`" in err.detail
    assert "get_inputs()" in err.detail and "get_init_inputs()" in err.detail


def test_a_model_without_forward_names_the_class_line(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        import torch.nn as nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()

        def get_inputs():
            return [1]

        def get_init_inputs():
            return []
        """,
    )
    assert err.line == 4
    assert "no `forward` method" in err.detail


def test_a_task_without_get_inputs_says_how_to_define_it(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        class Model:
            def forward(self, x):
                return x

        def get_init_inputs():
            return []
        """,
    )
    assert err.line is None
    assert "`get_inputs()`" in err.detail and "def get_inputs():" in err.detail


def test_a_task_without_get_init_inputs_says_how_to_define_it(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        class Model:
            def forward(self, x):
                return x

        def get_inputs():
            return [1]
        """,
    )
    assert err.line is None
    assert "`get_init_inputs()`" in err.detail and "def get_init_inputs():" in err.detail


def test_get_inputs_with_a_required_parameter_is_refused(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        class Model:
            def forward(self, x):
                return x


        def get_inputs(batch):
            return [batch]

        def get_init_inputs():
            return []
        """,
    )
    assert err.line == 6
    assert "`get_inputs()` requires parameters" in err.detail
    assert "no arguments" in err.detail


def test_get_inputs_with_too_few_items_for_forward_is_refused(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        import torch

        class Model:
            def forward(self, a, b):
                return a + b

        def get_inputs():
            x = torch.rand(3)
            return [x]

        def get_init_inputs():
            return []
        """,
    )
    assert err.line == 9
    assert "`get_inputs()` returns 1 item(s) (line 9)" in err.detail
    assert "`Model.forward` (line 4)" in err.detail
    assert "exactly 2" in err.detail


def test_get_init_inputs_with_too_many_items_for_init_is_refused(tmp_path):
    err = _task_error(
        tmp_path,
        """\
        class Model:
            def __init__(self, in_features, out_features, bias=True):
                self.bias = bias

            def forward(self, x):
                return x

        def get_inputs():
            return [1]

        def get_init_inputs():
            return [1, 2, 3, 4]
        """,
    )
    assert err.line == 12
    assert "`get_init_inputs()` returns 4 item(s) (line 12)" in err.detail
    assert "`Model.__init__` (line 2)" in err.detail
    assert "2 to 3" in err.detail


def test_the_arity_check_accepts_defaults_varargs_and_non_literals(tmp_path):
    source = textwrap.dedent(
        """\
        class Model:
            def __init__(self, *dims):
                self.dims = dims

            def forward(self, a, b=None):
                return a

        def get_inputs():
            return [1, 2]

        def get_init_inputs():
            return [1, 2, 3, 4, 5]
        """
    )
    validate_task_source(source, "ok.py")
    # a non-literal return is not checked
    validate_task_source(source.replace("return [1, 2]\n", "xs = [1, 2, 3]\n    return xs\n"), "ok.py")
    # a starred literal is not checked either
    validate_task_source(source.replace("return [1, 2]", "return [*range(5)]"), "ok.py")
    # no __init__: get_init_inputs is not checked
    validate_task_source(GOOD.replace("def __init__(self, dim)", "def setup(self, dim)"), "ok.py")
    # but forward beyond its maximum is an error
    with pytest.raises(TaskError, match="returns 3 item"):
        validate_task_source(source.replace("return [1, 2]", "return [1, 2, 3]"), "bad.py")


def test_the_validator_never_executes_the_task(tmp_path):
    marker = tmp_path / "executed"
    run_me = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('executed!')\n"
    assert validate_task_source(run_me + GOOD, "x.py") is None  # parsed and accepted ...
    with pytest.raises(TaskError, match="defines no class `Model`"):  # ... or parsed and refused
        validate_task_source(run_me + GOOD.replace("class Model", "class Other"), "x.py")
    assert not marker.exists()  # and never run


# ------------------------------------------------------------------ local HF dataset copies


def _rows():
    swapped = GOOD.replace("return [1]", "return []").replace("def __init__(self, dim)", "def __init__(self)")
    return [
        {"code": GOOD, "level": 1, "name": "3_Add.py", "problem_id": 3},
        {"code": swapped, "level": 2, "name": "1_Fused", "problem_id": 1},
        {"code": GOOD, "level": 1, "name": "1_First.py", "problem_id": 1},
    ]


def test_a_local_hf_parquet_loads_the_levels_asked_for(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("datasets")
    file = tmp_path / "kb.parquet"
    rows = _rows()
    pq.write_table(pa.Table.from_pylist(rows), file)

    tasks = load_hf_kernelbench(str(file), levels=[1])
    assert [t.id for t in tasks] == ["level1/1_First", "level1/3_Add"]
    assert [t.origin for t in tasks] == [f"{file}#2", f"{file}#0"]
    assert tasks[0].source == GOOD and tasks[0].problem_id == 1

    both = load_hf_kernelbench(str(file), levels=[1, 2])
    assert [t.id for t in both] == ["level1/1_First", "level1/3_Add", "level2/1_Fused"]
    assert load_hf_kernelbench(str(file), levels=[3]) == []


def test_a_local_hf_jsonl_file_or_folder_loads_as_tasks(tmp_path):
    pytest.importorskip("datasets")
    data = tmp_path / "data"
    data.mkdir()
    file = data / "kb.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in _rows()))

    tasks = load_hf_kernelbench(str(file), levels=[2])
    assert [t.id for t in tasks] == ["level2/1_Fused"]
    assert tasks[0].origin == f"{file}#1"

    # a folder of dataset files, default levels (1, 2, 3)
    assert [t.id for t in load_hf_kernelbench(str(data))] == [
        "level1/1_First",
        "level1/3_Add",
        "level2/1_Fused",
    ]


def test_load_taskset_takes_every_kind_of_task_set(tmp_path):
    """TASKSET on the command line: the bundled examples, a KernelBench folder, one task file, and a
    dataset of ours (rows with `id` and `code`, no level)."""
    assert {t.name for t in load_taskset("examples")} >= {"elementwise", "row_softmax"}
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_First.py").write_text(GOOD)
    assert [t.id for t in load_taskset(tmp_path / "kb")] == ["level1/1_First"]
    assert [t.id for t in load_taskset(str(tmp_path / "kb" / "level1" / "1_First.py"))] == ["level1/1_First"]
    with pytest.raises(UsageError, match="no such task set"):
        load_taskset(tmp_path / "nowhere")
    pytest.importorskip("datasets")
    ours = tmp_path / "tasks.jsonl"
    ours.write_text("".join(json.dumps({"id": f"synth_{i:04d}", "code": GOOD, "ops": ["add"]}) + "\n"
                            for i in range(3)))
    tasks = load_taskset(ours)
    assert [t.id for t in tasks] == ["synth_0000", "synth_0001", "synth_0002"]
    assert all(t.level is None for t in tasks) and tasks[0].origin == f"{ours}#0"


def test_an_invalid_hf_row_is_named_by_its_file_and_row(tmp_path):
    pytest.importorskip("datasets")
    file = tmp_path / "kb.jsonl"
    rows = _rows()
    rows[1]["code"] = "class Model:\n    pass\n"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TaskError) as info:
        load_hf_kernelbench(str(file), levels=[1, 2])
    assert info.value.path == f"{file}#1"
    assert "forward" in info.value.detail


def test_hf_loading_without_datasets_is_a_usage_error_saying_what_to_install(tmp_path, monkeypatch):
    file = tmp_path / "kb.jsonl"
    file.write_text(json.dumps(_rows()[0]) + "\n")
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` raise ImportError
    with pytest.raises(UsageError, match=r"pip install 'cuda-agent\[data\]'"):
        load_hf_kernelbench(str(file))


def test_a_missing_local_hf_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        load_hf_kernelbench(str(tmp_path / "absent.parquet"))
    with pytest.raises(UsageError, match="no such file"):
        load_hf_kernelbench("relative/absent.jsonl")


# ------------------------------------------------------------------ import hygiene


def test_importing_tasks_loads_neither_torch_nor_datasets():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH", "")]))
    code = (
        "import sys, cuda_agent.tasks; "
        "print('torch' in sys.modules, 'datasets' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
