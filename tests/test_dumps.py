"""Published kernel dumps read as they are (bench/dumps.py): CUDA-L1's per-GPU files, the
KernelBench leaderboard's rows, any table through --columns, and the errors a malformed or
unknown dump gets. The dumps here are small ones written for the tests, in each format's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.bench.dump_match import dump_tasks, reference_difference, split_by_model, to_solutions
from cuda_agent.bench.dumps import Columns, is_dump, read_dump, run_folder_claims
from cuda_agent.bench.solutions import find_solutions
from cuda_agent.errors import UsageError
from cuda_agent.tasks import Task

TASK = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
TASKS = [Task(name="19_ReLU", source=TASK, origin="t", level=1, problem_id=19),
         Task(name="20_LeakyReLU", source=TASK, origin="t", level=1, problem_id=20),
         Task(name="1_Conv2D_ReLU_BiasAdd", source=TASK, origin="t", level=2, problem_id=1)]


def kernel(tag: str) -> str:
    return f"# {tag}\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_cuda_l1s_file_is_read_as_published(tmp_path):
    """One JSON object per line in a `.json` file, problem ids from 1, rows without a kernel."""
    rows = [{"level_id": 1, "task_id": 19, "ref_code": TASK, "custom_code": kernel("l1-19"), "cuda_graph_code": "x",
             "score_default": 2.75, "score_torch_compile_default": 1.5, "score_cudnn": None},
            {"level_id": 1, "task_id": 20, "ref_code": TASK, "custom_code": None, "score_default": None},
            {"level_id": 2, "task_id": 1, "ref_code": TASK, "custom_code": kernel("l2-1"), "score_default": 0.9},
            # as 17 rows of h100.json: no kernel, written as text, beside a score of another variant's
            {"level_id": 1, "task_id": 8, "ref_code": TASK, "custom_code": "None", "cudnn_code": kernel("v"),
             "score_default": 7.207}]
    dump = tmp_path / "h100.json"
    dump.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert is_dump(dump)
    entries, shapes = read_dump(dump)
    assert shapes == {str(dump): "CUDA-L1"}
    assert [(e.level, e.problem) for e in entries] == [(1, 19), (2, 1)]  # tasks 20 and 8 have none
    first = entries[0]
    assert first.claimed["speedup"] == 2.75 and first.claimed["score_torch_compile_default"] == 1.5
    assert first.ref_code == TASK and first.model == "CUDA-L1"
    found, behind, mismatched = to_solutions(entries, TASKS, tmp_path / "solutions")
    assert mismatched == []
    assert [(s.task.id, s.sample) for s in found.solutions] == [("level1/19_ReLU", 0), ("level2/1_Conv2D_ReLU_BiasAdd", 0)]
    assert found.solutions[0].path.read_text().startswith("# l1-19")
    assert found.solutions[0].path.name == "level_1_problem_19_sample_0_kernel.py"
    assert behind[("level1/19_ReLU", 0)] is first


def test_cuda_l1s_codes_file_holds_its_rows_under_their_level(tmp_path):
    """`optimized_cuda_code/codes/<gpu>.json`: {"1": [rows], "2": [rows]}, rows without a level of
    their own and with one `score`."""
    dump = tmp_path / "codes-h100.json"
    dump.write_text(json.dumps({"1": [{"task_id": 19, "ref_code": TASK, "custom_code": kernel("a"), "score": 2.5}],
                                "2": [{"task_id": 1, "ref_code": TASK, "custom_code": kernel("b"), "score": 0.8},
                                      {"task_id": 2, "ref_code": TASK, "custom_code": None, "score": None}]}))
    entries, shapes = read_dump(dump)
    assert shapes[str(dump)] == "CUDA-L1"
    assert [(e.level, e.problem, e.claimed["speedup"]) for e in entries] == [(1, 19, 2.5), (2, 1, 0.8)]
    assert entries[1].origin.endswith("codes-h100.json#2/0")


def test_the_leaderboards_rows_count_problems_from_zero_and_split_by_model(tmp_path):
    rows = [{"level": 1, "problem_id": 18, "model": "gpt-o1", "code": kernel("o1"), "speedup_over_eager": 1.3,
             "correct": True},
            {"level": 1, "problem_id": 18, "model": "claude-3.5-sonnet", "code": kernel("sonnet"),
             "speedup_over_eager": 0.7, "correct": True},
            {"level": 1, "problem_id": 19, "model": "gpt-o1", "code": kernel("o1-b"), "correct": False},
            {"level": 3, "problem_id": 0, "model": "gpt-o1", "code": kernel("no task")}]
    dump = tmp_path / "raw_data.json"
    dump.write_text(json.dumps(rows))
    entries, shapes = read_dump(dump)
    assert shapes[str(dump)] == "KernelBench leaderboard"
    assert [(e.level, e.problem, e.model) for e in entries][:3] == [
        (1, 19, "gpt-o1"), (1, 19, "claude-3.5-sonnet"), (1, 20, "gpt-o1")]
    assert entries[0].claimed == {"correct": True, "speedup": 1.3, "speedup_over_eager": 1.3}
    assert entries[2].claimed["correct"] is False and entries[2].claimed["speedup"] is None
    found, _, _ = to_solutions(entries, TASKS, tmp_path / "all")  # as samples of one run
    assert [(s.task.name, s.sample) for s in found.solutions] == [("19_ReLU", 0), ("19_ReLU", 1), ("20_LeakyReLU", 0)]
    assert found.unmatched == [Path(entries[3].origin)]  # level 3 problem 1 is not in the task set
    runs = split_by_model(entries)
    assert sorted(runs) == ["claude-3.5-sonnet", "gpt-o1"] and len(runs["gpt-o1"]) == 3


def test_the_leaderboards_published_columns_say_eager_speedup_and_correct(tmp_path):
    """The published raw_data.json has no correctness column (it lists only kernels its evaluation
    found correct) and two speedups: over eager (`torch_speedup`) and over torch.compile. The
    claimed speedup is eager's, whichever column comes first."""
    row = {"problem_id": 18, "code": kernel("ds"), "torch_compile_speedup": 0.4, "torch_speedup": 1.6,
           "baseline_torch_time": 0.02, "baseline_torch_compile_time": 0.05, "kernel_eval_time": 0.0125,
           "level": 1, "model": "deepseek", "display_name": "deepseek-coder", "file": "0e9b"}
    dump = tmp_path / "raw_data.json"
    dump.write_text(json.dumps([row]))
    [entry], shapes = read_dump(dump)
    assert shapes[str(dump)] == "KernelBench leaderboard" and (entry.level, entry.problem) == (1, 19)
    assert entry.claimed == {"correct": True, "speedup": 1.6, "torch_speedup": 1.6, "torch_compile_speedup": 0.4}


def test_any_table_through_columns_parquet_included(tmp_path):
    from cuda_agent.parquet import write_rows

    rows = [{"lvl": "level_1", "pid": 18, "model_name": "m", "completion": kernel("a"), "n": 3},
            {"lvl": "level_1", "pid": 18, "model_name": "m", "completion": kernel("b"), "n": 3}]
    dump = write_rows(tmp_path / "gens.parquet", rows)
    with pytest.raises(UsageError) as err:
        read_dump(dump)
    message = str(err.value)
    assert "unknown shape" in message and "completion, lvl, model_name, n, pid" in message
    assert "--columns level=lvl,problem=pid,code=completion,model=model_name" in message
    entries, shapes = read_dump(dump, Columns.parse("level=lvl,problem=pid,code=completion,model=model_name,sample=n,base=0"))
    assert shapes[str(dump)] == "columns"
    assert [(e.level, e.problem, e.sample) for e in entries] == [(1, 19, 3), (1, 19, 3)]
    found, _, _ = to_solutions(entries, TASKS, tmp_path / "s")
    by_sample = {s.sample: s.path.read_text() for s in found.solutions}
    assert by_sample[3].startswith("# a") and by_sample[0].startswith("# b")  # its own id, then the first free one


def test_the_columns_suggested_for_an_unknown_table_are_picked_by_what_they_hold():
    """The suggested line is what a user copies: the code column is the one holding code even when
    another column's name says `kernel`, and a file name beside a level stands for the problem."""
    from cuda_agent.bench.dumps import suggest_columns

    reply = "Sure:\n```python\n" + kernel("r") + "```"
    assert suggest_columns({"kernelbench_level": 1, "kernelbench_problem": 19, "completion": reply,
                            "reward": 0.3}).startswith(
        "--columns level=kernelbench_level,problem=kernelbench_problem,code=completion,base=1")
    assert suggest_columns({"name": "19_ReLU", "level": 1, "solution": kernel("s")}) == \
        "--columns task=name,level=level,code=solution"
    assert suggest_columns({"task_name": "level_1_problem_19_sample_0", "kernel_code": kernel("k"),
                            "model": "m", "sample_id": "2"}) == \
        "--columns task=task_name,code=kernel_code,model=model,sample=sample_id"


def test_a_file_name_beside_a_level_column_names_the_task(tmp_path):
    dump = tmp_path / "gens.json"
    dump.write_text(json.dumps([{"name": "19_ReLU.py", "level": "level_1", "solution": kernel("s")}]))
    [entry], _ = read_dump(dump, Columns.parse("task=name,level=level,code=solution"))
    assert (entry.level, entry.problem) == (1, 19)


def test_a_hugging_face_datasets_folder_is_read_less_its_metadata(tmp_path):
    """A dataset as the Hub gives it (data/*.parquet beside dataset_infos.json and README.md) or as
    `datasets` saves it (Arrow streams beside state.json and dataset_info.json): the metadata files
    hold no rows and are not dumps of unknown shape."""
    import pyarrow as pa

    from cuda_agent.parquet import write_rows

    hub = tmp_path / "hub"
    write_rows(hub / "data" / "train-00000-of-00001.parquet",
               [{"level": 1, "problem_id": 19, "code": kernel("p"), "model": "m"}])
    (hub / "dataset_infos.json").write_text(json.dumps({"default": {"features": {}}}))
    (hub / "README.md").write_text("---\nlicense: mit\n---\n")
    (hub / ".cache" / "huggingface").mkdir(parents=True)
    (hub / ".cache" / "huggingface" / "x.json").write_text("{}")
    cols = Columns.parse("level=level,problem=problem_id,code=code,model=model")
    entries, shapes = read_dump(hub, cols)
    assert list(shapes) == [str(hub / "data" / "train-00000-of-00001.parquet")]
    assert [(e.level, e.problem, e.model, e.code[:3]) for e in entries] == [(1, 19, "m", "# p")]

    saved = tmp_path / "saved"
    saved.mkdir()
    table = pa.Table.from_pylist([{"level": 1, "problem_id": 20, "code": kernel("a"), "model": "m"}])
    with pa.ipc.new_stream(str(saved / "data-00000-of-00001.arrow"), table.schema) as writer:
        writer.write_table(table)
    (saved / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    (saved / "dataset_info.json").write_text(json.dumps({"features": {}}))
    [entry], _ = read_dump(saved, cols)
    assert (entry.problem, entry.code[:3]) == (20, "# a")
    (saved / "broken.arrow").write_bytes(b"not arrow")
    with pytest.raises(UsageError, match="broken.arrow: cannot read it as Arrow"):
        read_dump(saved, cols)


def test_a_dataset_of_model_replies_with_task_names_is_read_through_columns(tmp_path):
    """Generations as Hugging Face datasets keep them: a column of task names in place of level and
    problem ids, and each model's whole reply, prose around its fenced module."""
    reply = ("Here is a faster kernel.\n\n```python\n" + kernel("fenced") + "```\n\nIt fuses the two ops.")
    rows = [{"task": "level1/19_ReLU", "model": "m", "response": reply},
            {"task": "level_1_problem_20_sample_0_kernel.py", "model": "m", "response": kernel("plain")},
            {"task": "level2/1_Conv2D_ReLU_BiasAdd", "model": "m", "response": "I cannot do this one."}]
    dump = tmp_path / "gens.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError) as err:
        read_dump(dump)
    assert str(err.value).endswith("--columns task=task,code=response,model=model")
    entries, _ = read_dump(dump, Columns.parse("task=task,code=response,model=model"))
    assert [(e.level, e.problem) for e in entries] == [(1, 19), (1, 20), (2, 1)]
    assert entries[0].code == kernel("fenced")  # the fenced module, without the prose
    assert entries[1].code == kernel("plain") and entries[2].code == "I cannot do this one."  # (left to the evaluator)
    # names without a level take it from a level column; a name without either says what to do
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"lv": 1, "name": "19_ReLU.py", "code": kernel("x")}) + "\n")
    assert [(e.level, e.problem) for e in read_dump(bare, Columns.parse("task=name,level=lv,code=code"))[0]] == [(1, 19)]
    with pytest.raises(UsageError, match="add level=COLUMN for names without a level"):
        read_dump(bare, Columns.parse("task=name,code=code"))


FUNCTIONAL = """import torch
import torch.nn as nn


def module_fn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ weight.t() + bias)


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        linear = nn.Linear(n, n)
        self.weight = nn.Parameter(linear.weight.clone())
        self.bias = nn.Parameter(linear.bias.clone())

    def forward(self, x, fn=module_fn):
        return fn(x, self.weight, self.bias)


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return [4]
"""
# quotes of both kinds, backslashes and a triple quote: the source must reach the compiler unchanged
CUDA = ('#include <torch/extension.h>\n// a \'\'\' and a """ in a comment, "\\n" in a string\n'
        "torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return x; }\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward, "fused linear relu"); }\n')


def test_the_ai_cuda_engineers_archive_is_read_and_its_kernels_run_as_it_ran_them(tmp_path, monkeypatch):
    """Sakana AI's archive (level_<n>.parquet): each kernel is a CUDA extension exporting forward(),
    run by the task's functional form with the extension passed as `fn`; its claims are `Correct`
    and `CUDA_Speedup_Native` (over eager)."""
    import torch
    import torch.utils.cpp_extension as cpp_extension

    from cuda_agent.parquet import write_rows

    base = {"Op_Name": "19_ReLU", "Level_ID": 1, "Task_ID": 19, "PyTorch_Code_Module": TASK,
            "PyTorch_Code_Functional": FUNCTIONAL, "CUDA_Runtime": 0.01, "PyTorch_Native_Runtime": 0.018,
            "Max_Diff": 0.0, "Error": None, "Clang_Tidy": ""}
    rows = [{**base, "Kernel_Name": "19_relu_fused_base", "CUDA_Code": CUDA, "Correct": True,
             "CUDA_Speedup_Native": 1.8, "CUDA_Speedup_Compile": 0.9},
            {**base, "Kernel_Name": "19_relu_broken", "CUDA_Code": CUDA, "Correct": False,
             "CUDA_Speedup_Native": None, "CUDA_Speedup_Compile": None, "Error": "CUDA error: misaligned"},
            {**base, "Kernel_Name": "19_relu_empty", "CUDA_Code": "", "Correct": False}]
    dump = write_rows(tmp_path / "level_1.parquet", rows)
    entries, shapes = read_dump(dump)
    assert shapes[str(dump)] == "AI CUDA Engineer"
    assert [(e.level, e.problem, e.model) for e in entries] == [(1, 19, "AI CUDA Engineer")] * 2
    assert entries[0].ref_code == TASK
    assert entries[0].claimed == {"correct": True, "speedup": 1.8, "CUDA_Speedup_Native": 1.8,
                                  "CUDA_Speedup_Compile": 0.9, "kernel_name": "19_relu_fused_base"}
    assert entries[1].claimed == {"correct": False, "speedup": None, "kernel_name": "19_relu_broken"}
    found, _, _ = to_solutions(entries, TASKS, tmp_path / "s")
    assert [s.sample for s in found.solutions] == [0, 1]  # several kernels of one task: its samples

    built = []

    def load_inline(name, cpp_sources, cuda_sources=None, **kwargs):
        built.append((cpp_sources, cuda_sources, kwargs.get("functions")))
        return type("Extension", (), {"forward": staticmethod(lambda x, w, b: torch.sigmoid(x @ w.t() + b))})

    monkeypatch.setattr(cpp_extension, "load_inline", load_inline)
    module: dict = {}
    exec(compile(entries[0].code, "model_new.py", "exec"), module)
    assert built == [("", CUDA, None)]  # the source as published; its own PYBIND11_MODULE binds forward
    torch.manual_seed(0)
    reference = module["Model"](4)
    torch.manual_seed(0)
    new = module["ModelNew"](4)
    assert list(new.state_dict()) == list(reference.state_dict())
    x = torch.randn(2, 4)
    assert torch.equal(new(x), torch.sigmoid(x @ reference.weight.t() + reference.bias))  # the extension's forward
    assert torch.equal(reference(x), torch.relu(x @ reference.weight.t() + reference.bias))


def test_claimed_figures_of_any_table_are_read_by_their_names_or_the_columns_named(tmp_path):
    rows = [{"level": 1, "problem": 19, "code": kernel("a"), "Correct": True, "Speedup_vs_Compile": 0.7,
             "speedup_vs_eager": 2.5, "ok": "false", "ratio": 3.0},
            {"level": 1, "problem": 19, "code": kernel("b"), "Correct": 1, "speedup_vs_eager": "nan",
             "ok": "true", "ratio": None}]
    dump = tmp_path / "gens.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    named = read_dump(dump, Columns.parse("level=level,problem=problem,code=code"))[0]
    assert named[0].claimed == {"correct": True, "speedup": 2.5, "Speedup_vs_Compile": 0.7, "speedup_vs_eager": 2.5}
    assert named[1].claimed == {"correct": True, "speedup": None}
    chosen = read_dump(dump, Columns.parse("level=level,problem=problem,code=code,correct=ok,speedup=ratio"))[0]
    assert [(e.claimed["correct"], e.claimed["speedup"]) for e in chosen] == [(False, 3.0), (True, None)]
    with pytest.raises(UsageError, match="no column 'passed'"):
        read_dump(dump, Columns.parse("level=level,problem=problem,code=code,correct=passed"))


def test_a_table_of_kernel_files_with_its_verdicts_one_object_down(tmp_path):
    """A table that names each kernel's file (relative to the table) and keeps its evaluation's
    verdict inside an object, as a run folder's index does."""
    (tmp_path / "runs" / "m").mkdir(parents=True)
    (tmp_path / "runs" / "m" / "k19.py").write_text(kernel("from a file"))
    rows = [{"level": 1, "problem": 19, "file": "runs/m/k19.py", "eval": {"correct": False, "speedup": 0.5}},
            {"level": 1, "problem": 20, "file": kernel("inline"), "eval": None}]
    dump = tmp_path / "index.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows))
    entries, _ = read_dump(dump, Columns.parse("level=level,problem=problem,code=file"))
    assert [e.code for e in entries] == [kernel("from a file"), kernel("inline")]
    assert entries[0].claimed == {"correct": False, "speedup": 0.5, "eval.speedup": 0.5}
    assert entries[1].claimed == {"correct": None, "speedup": None}
    assert read_dump(dump, Columns.parse("level=level,problem=problem,code=file,correct=eval.correct"))[0][0] \
        .claimed["correct"] is False
    for bad in ("runs/m/missing.py", "../outside.py", "/etc/hostname.py"):
        dump.write_text(json.dumps({**rows[0], "file": bad}) + "\n")
        with pytest.raises(UsageError, match="not a file inside the dump's folder"):
            read_dump(dump, Columns.parse("level=level,problem=problem,code=file"))


def test_the_corpus_index_reads_as_a_dump_with_kernelbenchs_verdicts_as_its_claims():
    """The real-kernel corpus's verdicts.jsonl (../shared/corpora): 709 kernel files, KernelBench's
    own verdict of each one object down, 177 of them correct (its README's table)."""
    from conftest import SHARED

    index = SHARED / "corpora" / "kernelbench-a100-runs" / "verdicts.jsonl"
    if not index.is_file():
        pytest.skip("no corpus beside the repository (../shared/corpora)")
    entries, _ = read_dump(index, Columns.parse("level=level,problem=problem,code=file,model=run"))
    assert len(entries) == 709 and len({e.model for e in entries}) == 9
    said = [e.claimed["correct"] for e in entries]
    assert (said.count(True), said.count(False), said.count(None)) == (177, 464, 68)
    assert all("class ModelNew" in e.code for e in entries)


def test_an_object_of_task_names_and_chats_of_generations_are_dumps(tmp_path):
    dump = tmp_path / "solutions.json"
    dump.write_text(json.dumps({"level1/19_ReLU.py": kernel("a"), "level_1_problem_20": kernel("b")}))
    entries, shapes = read_dump(dump)
    assert shapes[str(dump)] == "task names" and [(e.level, e.problem, e.code) for e in entries] == \
        [(1, 19, kernel("a")), (1, 20, kernel("b"))]
    chat = [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": "Make it fast."},
            {"role": "assistant", "content": "Here:\n```python\n" + kernel("chat") + "```\n"}]
    rows = tmp_path / "chats.jsonl"
    rows.write_text(json.dumps({"task": "level1/19_ReLU", "model": "m", "messages": chat}) + "\n")
    [entry], _ = read_dump(rows, Columns.parse("task=task,code=messages,model=model"))
    assert entry.code == kernel("chat") and entry.model == "m"
    rows.write_text(json.dumps({"task": "level1/19_ReLU", "out": {"text": kernel("x")}}) + "\n")
    with pytest.raises(UsageError, match="code cell holds dict, not text"):
        read_dump(rows, Columns.parse("task=task,code=out"))
    assert read_dump(rows, Columns.parse("task=task,code=out.text"))[0][0].code == kernel("x")


def test_kernelbenchs_samples_one_file_per_kernel_say_level_model_problem_and_sample_by_their_folders(tmp_path):
    """ScalingIntelligence/kernelbench-samples: baseline_eval/level1/MODEL/problem_19/sample_0/kernel.json,
    each an object with the kernel and KernelBench's verdict two objects down."""
    root = tmp_path / "baseline_eval"
    for level, model, problem, sample, correct in [(1, "openai-o1", 19, 0, True), (1, "deepseek-r1", 20, 1, False),
                                                   (2, "openai-o1", 1, 0, None)]:
        folder = root / f"level{level}" / model / f"problem_{problem}" / f"sample_{sample}"
        folder.mkdir(parents=True)
        result = {"eval_0": {"compiled": True, "correct": correct, "avg_runtime": 0.02}} if correct is not None else {}
        (folder / "kernel.json").write_text(json.dumps({"kernel": kernel(f"{model}-{problem}"), "eval_result": result}))
    assert is_dump(root)
    entries, shapes = read_dump(root)
    assert set(shapes.values()) == {"KernelBench samples"}
    got = sorted((e.level, e.problem, e.sample, e.model, e.claimed["correct"], e.code) for e in entries)
    assert got == [(1, 19, 0, "openai-o1", True, kernel("openai-o1-19")), (1, 20, 1, "deepseek-r1", False, kernel("deepseek-r1-20")),
                   (2, 1, 0, "openai-o1", None, kernel("openai-o1-1"))]
    assert sorted(split_by_model(entries)) == ["deepseek-r1", "openai-o1"]
    [one] = read_dump(root / "level1" / "deepseek-r1")[0]  # one model's folder: the level is the folder's above
    assert (one.level, one.problem, one.sample, one.model) == (1, 20, 1, "deepseek-r1")
    found, _, _ = to_solutions(entries, TASKS, tmp_path / "s")
    assert sorted((s.task.name, s.sample) for s in found.solutions) == \
        [("19_ReLU", 0), ("1_Conv2D_ReLU_BiasAdd", 0), ("20_LeakyReLU", 1)]


@pytest.mark.parametrize("text, message", [
    ('{"level": 1, "problem_id": 0, "model": "m", "code": "x"}\n{"level": 1,\n', ":2: not a JSON row"),
    ("[1, 2]", "must be a JSON object"),
    ('"just a string"', "not rows"),
    ('[{"level": "one", "problem_id": 0, "model": "m", "code": "x"}]', "level is 'one', not a whole number"),
    ("[]", "holds no rows"),
])
def test_a_malformed_dump_says_where_and_what(tmp_path, text, message):
    dump = tmp_path / "bad.json"
    dump.write_text(text)
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        read_dump(dump)


def test_columns_are_checked(tmp_path):
    with pytest.raises(UsageError, match="name the column of code"):
        Columns.parse("level=a,problem=b")
    with pytest.raises(UsageError, match="base must be 0 or 1"):
        Columns.parse("level=a,problem=b,code=c,base=2")
    with pytest.raises(UsageError, match="KEY=COLUMN"):
        Columns.parse("level=a,problem=b,code=c,colour=red")
    dump = tmp_path / "d.jsonl"
    dump.write_text(json.dumps({"a": 1, "b": 2, "c": "x"}) + "\n")
    with pytest.raises(UsageError, match="no column 'model'"):
        read_dump(dump, Columns.parse("level=a,problem=b,code=c,model=model"))


def test_a_folder_of_dumps_is_a_dump_and_a_folder_of_kernels_is_not(tmp_path):
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "a.jsonl").write_text(json.dumps({"level_id": 1, "task_id": 19, "custom_code": "x"}) + "\n")
    (tmp_path / "dumps" / "b.jsonl").write_text(json.dumps({"level_id": 1, "task_id": 20, "custom_code": "y"}) + "\n")
    assert is_dump(tmp_path / "dumps")
    entries, shapes = read_dump(tmp_path / "dumps")
    assert [e.problem for e in entries] == [19, 20] and len(shapes) == 2
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "level_1_problem_19_sample_0_kernel.py").write_text("x")
    assert not is_dump(tmp_path / "run")


REF = """import torch
import torch.nn as nn

class Model(nn.Module):
    \"\"\"ReLU.\"\"\"
    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 16384

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""


def test_a_dumps_reference_is_checked_against_the_task_it_would_be_judged_by(tmp_path):
    """Formatting, comments and docstrings aside, the dump's reference must be the task's: other
    sizes (KernelBench changed some between versions) or another function are reported, and such
    an entry is not judged against the task set's task; --tasks-from-dump judges it against its own."""
    restyled = REF.replace('    \"\"\"ReLU.\"\"\"\n', "").replace("return torch.relu(x)", "return torch.relu(x)  # the op")
    assert reference_difference(REF, restyled) is None
    assert reference_difference(REF, REF.replace("dim = 16384", "dim = 4096")) == (
        "its sizes changed: dim = 4096 there, 16384 here", True)
    other = REF.replace("torch.relu(x)", "torch.sigmoid(x) * torch.tanh(x) + torch.nn.functional.gelu(x).sum()")
    assert reference_difference(REF, other)[0].startswith("its reference differs (similarity")
    # as CUDA-L1's references differ from today's KernelBench: sizes as arithmetic, another input distribution
    assert reference_difference(REF, REF.replace("dim = 16384", "dim = 4096 * 4")) is not None  # (text differs)
    assert reference_difference(REF, REF.replace("dim = 16384", "dim = 4096 * 4"))[1] is False  # same size
    assert reference_difference(REF, REF.replace("dim = 16384", "dim = 16384 * 2"))[0] == \
        "its sizes changed: dim = 32768 there, 16384 here"
    assert reference_difference(REF, REF.replace("torch.randn", "torch.rand")) == (
        "its inputs are made otherwise (get_inputs or get_init_inputs differ)", True)
    little = reference_difference(REF, REF.replace("torch.relu", "torch.tanh"))
    assert little[0].startswith("its reference differs a little") and little[1] is False
    task = Task(name="19_ReLU", source=REF, origin="t", level=1, problem_id=19)
    entries = [e for e in read_dump(_cuda_l1(tmp_path, [(19, REF), (20, REF.replace("dim = 16384", "dim = 4096"))]))[0]]
    found, _, mismatched = to_solutions(entries, [task, Task(name="20_LeakyReLU", source=REF, origin="t", level=1,
                                                             problem_id=20)], tmp_path / "s")
    assert [s.task.name for s in found.solutions] == ["19_ReLU"]
    assert [(m.task.name, m.why, m.other) for m in mismatched] == [
        ("20_LeakyReLU", "its sizes changed: dim = 4096 there, 16384 here", True)]
    own = dump_tasks(entries, [task])
    assert [(t.name, t.level, t.problem_id) for t in own] == [("19_ReLU", 1, 19), ("20_from_dump", 1, 20)]
    assert "dim = 4096" in own[1].source
    with pytest.raises(UsageError, match="not a task"):
        dump_tasks(read_dump(_cuda_l1(tmp_path, [(21, "import torch\nx = 1\n")]))[0], [])


def _cuda_l1(tmp_path: Path, refs: list[tuple[int, str]]) -> Path:
    dump = tmp_path / f"dump{len(refs)}_{refs[0][0]}.json"
    dump.write_text("\n".join(json.dumps({"level_id": 1, "task_id": pid, "ref_code": ref, "custom_code": kernel(str(pid)),
                                          "score_default": 1.0}) for pid, ref in refs) + "\n")
    return dump


def test_a_kernelbench_run_folders_own_verdicts_are_its_claims(tmp_path):
    """KernelBench's run layout with its eval_results.json (keyed by problem id; one result, or a
    list by sample_id): each kernel's compiled/correct/runtime become the claims beside our verdict."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_1_kernel.py",
                 "level_1_problem_20_sample_0_kernel.py"):
        (run / name).write_text(kernel(name))
    (run / "eval_results.json").write_text(json.dumps({
        "19": [{"sample_id": 0, "compiled": True, "correctness": True, "runtime": 0.5},
               {"sample_id": 1, "compiled": True, "correctness": False, "runtime": -1.0}],
        "20": {"sample_id": 0, "compiled": False, "correctness": False, "runtime": -1.0}}))
    found = find_solutions(run, TASKS)
    claims = {(t, s): c for t, s, _, c in run_folder_claims(run, found.solutions)}
    assert claims == {("level1/19_ReLU", 0): {"correct": True, "speedup": None, "compiled": True, "runtime_ms": 0.5},
                      ("level1/19_ReLU", 1): {"correct": False, "speedup": None, "compiled": True},
                      ("level1/20_LeakyReLU", 0): {"correct": False, "speedup": None, "compiled": False}}
    (run / "eval_results.json").write_text("[1, 2]")
    with pytest.raises(UsageError, match="keyed by problem id"):
        run_folder_claims(run, found.solutions)
    assert Columns.parse("level=l,problem=p:0,code=c").base == 0 and Columns.parse("level=l,problem=p:0,code=c").problem == "p"


def test_the_claims_sentence_says_which_disagreements_are_the_strict_policys_rules():
    """A dump measured under KernelBench's rules, judged under the strict policy: the report says how
    many of the disagreements are only the strict rules' (PyTorch compute in forward...), and that
    no speedup can be set against a claimed one when none was judged correct."""
    from cuda_agent.bench.html_report import claimed_summary, claims_sentence

    def row(correct, strict_only, eager=None):
        return {"claimed_correct": True, "claimed_speedup": 2.0, "correct": correct, "eager": eager,
                "disagreement": None if correct else "claimed correct, judged not", "strict_only": strict_only}

    summary = claimed_summary([row(False, True), row(False, True), row(False, False)])
    assert summary["disagreements"] == 3 and summary["disagree_by_strict_rules"] == 2
    said = claims_sentence(summary, "disagree")
    assert "3 disagree (2 of them only for a rule of the strict policy" in said and "--policy kernelbench" in said
    assert "no speedup to set against a claimed one" in said and "None" not in said
    plain = claims_sentence(claimed_summary([row(True, False, eager=1.0), row(False, False)]), "disagree")
    assert "strict policy" not in plain and "median 0.5x" in plain
