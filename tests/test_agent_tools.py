"""The agent's file tools: Claude Code's names and arguments, paths confined to the workspace, and
mistakes returned to the model as tool results."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from cuda_agent.agent.tools import SCHEMAS, FileTools, openai_tools


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (root / "model_new.py").write_text("import torch\n\nclass ModelNew:\n    pass\n")
    (root / "kernels" / "relu.cu").write_text("__global__ void relu(float* x) {\n  x[0] = 0;\n}\n// relu\n")
    (tmp_path / "secret.txt").write_text("outside")
    return FileTools(root)


def test_schemas_match_the_claude_code_tool_set():
    assert set(SCHEMAS) == {"Read", "Write", "Edit", "MultiEdit", "Glob", "Grep"}
    props = {k: set(v["parameters"]["properties"]) for k, v in SCHEMAS.items()}
    assert props["Read"] == {"file_path", "offset", "limit"}
    assert props["Edit"] == {"file_path", "old_string", "new_string", "replace_all"}
    assert props["MultiEdit"] == {"file_path", "edits"}
    assert {"pattern", "path", "glob", "output_mode", "-i", "-n", "-A", "-B", "-C"} <= props["Grep"]
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == list(SCHEMAS)
    json.dumps(tools)  # plain JSON for the chat-completions request


def test_read_numbers_lines_and_pages(ws):
    out = ws.call("Read", {"file_path": "model_new.py"})
    assert out.splitlines()[0] == "     1\timport torch" and out.splitlines()[2] == "     3\tclass ModelNew:"
    page = ws.call("Read", {"file_path": "model_new.py", "offset": 3, "limit": 1})
    assert page.splitlines() == ["     3\tclass ModelNew:", "... [1 more lines; read on with offset=4]"]
    assert ws.call("Read", {"file_path": str(ws.root / "kernels" / "relu.cu")}).startswith("     1\t__global__")
    assert ws.call("Read", {"file_path": "model_new.py", "offset": 99}).startswith("Error: model_new.py: offset 99")


def test_paths_stay_inside_the_workspace(ws, tmp_path):
    for bad in ("../secret.txt", str(tmp_path / "secret.txt"), "/etc/passwd"):
        out = ws.call("Read", {"file_path": bad})
        assert out.startswith("Error:") and "outside the workspace" in out
    assert ws.call("Write", {"file_path": "../evil.py", "content": "x"}).startswith("Error:")
    assert not (tmp_path / "evil.py").exists()
    os.symlink(tmp_path / "secret.txt", ws.root / "link.txt")  # a link pointing out is outside too
    assert "outside the workspace" in ws.call("Read", {"file_path": "link.txt"})
    assert "link.txt" not in ws.call("Glob", {"pattern": "*"})
    assert "outside" not in ws.call("Grep", {"pattern": "outside", "output_mode": "content"})


def test_a_folder_swapped_for_a_link_after_the_check_leads_nowhere(ws, tmp_path, monkeypatch):
    """The tools run outside the sandbox while the shell's background commands run in it: one
    that swaps a folder for a link out of the workspace between a tool's check of a path and its
    use must not get the file out there read or written."""
    outside = tmp_path / "out"
    outside.mkdir()
    (outside / "f.txt").write_text("the caller's\n")
    (ws.root / "d").mkdir()
    (ws.root / "d" / "f.txt").write_text("mine\n")
    checked = FileTools.path

    def swapped_after_the_check(self, given, must_exist=True):
        p = checked(self, given, must_exist)
        d = self.root / "d"
        if d.is_symlink():
            d.unlink()
        else:
            shutil.rmtree(d)
        d.symlink_to(outside)
        return p

    monkeypatch.setattr(FileTools, "path", swapped_after_the_check)
    assert "the caller's" not in ws.call("Read", {"file_path": "d/f.txt"})
    for call in (("Write", {"file_path": "d/f.txt", "content": "written\n"}),
                 ("Write", {"file_path": "d/new.txt", "content": "written\n"}),
                 ("Edit", {"file_path": "d/f.txt", "old_string": "the caller's", "new_string": "edited"})):
        assert ws.call(*call).startswith("Error:"), call
    assert sorted(os.listdir(outside)) == ["f.txt"] and (outside / "f.txt").read_text() == "the caller's\n"


def test_write_and_edits_change_files_and_a_failed_edit_changes_nothing(ws):
    assert ws.call("Write", {"file_path": "kernels/new/add.cu", "content": "a\nb\n"}).startswith("Created")
    assert (ws.root / "kernels" / "new" / "add.cu").read_text() == "a\nb\n"
    assert ws.call("Edit", {"file_path": "kernels/relu.cu", "old_string": "x[0] = 0;",
                            "new_string": "x[0] = x[0] > 0 ? x[0] : 0;"}) == "Edited kernels/relu.cu: 1 replacement"
    # not unique, not found, identical: errors the model can act on, file untouched
    before = (ws.root / "kernels" / "relu.cu").read_text()
    out = ws.call("Edit", {"file_path": "kernels/relu.cu", "old_string": "relu", "new_string": "relu2"})
    assert out.startswith("Error:") and "occurs 2 times" in out
    assert "not found" in ws.call("Edit", {"file_path": "kernels/relu.cu", "old_string": "nope", "new_string": "x"})
    assert "the same" in ws.call("Edit", {"file_path": "kernels/relu.cu", "old_string": "a", "new_string": "a"})
    assert (ws.root / "kernels" / "relu.cu").read_text() == before
    assert ws.call("Edit", {"file_path": "kernels/relu.cu", "old_string": "relu", "new_string": "relu2",
                            "replace_all": True}).endswith("2 replacements")
    # MultiEdit: all or nothing
    out = ws.call("MultiEdit", {"file_path": "model_new.py", "edits": [
        {"old_string": "import torch", "new_string": "import torch.nn as nn"},
        {"old_string": "missing", "new_string": "x"}]})
    assert out.startswith("Error: edit 2 of 2") and "no edit was applied" in out
    assert (ws.root / "model_new.py").read_text().startswith("import torch\n")
    out = ws.call("MultiEdit", {"file_path": "model_new.py", "edits": [
        {"old_string": "import torch", "new_string": "import torch.nn as nn"},
        {"old_string": "pass", "new_string": "x = 1"}]})
    assert out == "Edited model_new.py: 2 edits, 2 replacements"
    assert "x = 1" in (ws.root / "model_new.py").read_text()


def test_bad_arguments_come_back_as_results(ws):
    assert ws.call("Read", {}).startswith("Error: Read: missing required argument(s) file_path")
    assert "unknown argument(s) path" in ws.call("Read", {"file_path": "model_new.py", "path": "x"})
    assert "must be a integer" in ws.call("Read", {"file_path": "model_new.py", "offset": "3"})
    assert "is a folder" in ws.call("Read", {"file_path": "kernels"})
    assert "no such file" in ws.call("Edit", {"file_path": "nope.py", "old_string": "a", "new_string": "b"})
    with pytest.raises(KeyError):
        ws.call("Teleport", {})


def test_glob_and_grep_find_workspace_files_and_lines(ws):
    assert ws.call("Glob", {"pattern": "**/*.cu"}) == "kernels/relu.cu"
    assert ws.call("Glob", {"pattern": "*.cu", "path": "kernels"}) == "kernels/relu.cu"
    assert ws.call("Glob", {"pattern": "*.h"}) == "No files found"
    assert ws.call("Grep", {"pattern": "relu"}) == "kernels/relu.cu"
    assert ws.call("Grep", {"pattern": "RELU", "-i": True, "output_mode": "count"}) == "kernels/relu.cu:2"
    out = ws.call("Grep", {"pattern": "x\\[0\\]", "output_mode": "content", "-n": True, "-B": 1})
    assert out.splitlines() == ["kernels/relu.cu-1-__global__ void relu(float* x) {", "kernels/relu.cu:2:  x[0] = 0;"]
    assert ws.call("Grep", {"pattern": "class", "glob": "*.cu"}) == "No matches found"
    assert ws.call("Grep", {"pattern": "(unclosed"}).startswith("Error: bad regular expression")
