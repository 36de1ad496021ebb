"""`synth.stats`: stats.md and its plots from hand-built rows with known counts, and the edge cases
(no accepted task, no rejection, missing compile times, a rewritten folder)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from cuda_agent.synth.stats import PLOTS, quantile, short_names, short_op, write_stats

PNG = b"\x89PNG\r\n\x1a\n"
CONV = "torch.nn.Conv2d"
GELU = "torch.nn.functional.gelu"
CUMSUM = "torch.cumsum"
RMS = "transformers.models.llama.modeling_llama.LlamaRMSNorm"
FAMILY = {CONV: "conv", GELU: "activation", CUMSUM: "scan", RMS: "norm"}

# 12 tasks: by operator count 1:2, 2:3, 3:4, 4:2, 5:1. Conv2d is used 11 times in 10 tasks, F.gelu 10 in 8.
CHAINS = [
    [CONV], [GELU],
    [CONV, GELU], [CONV, CUMSUM], [CONV, RMS],
    [CONV, GELU, CUMSUM], [CONV, GELU, RMS], [CONV, GELU, GELU], [CONV, RMS, CUMSUM],
    [CONV, GELU, CUMSUM, RMS], [CONV, CONV, GELU, RMS],
    [GELU, CUMSUM, RMS, GELU, CUMSUM],
]
META = {"device": "cuda", "seed": 7, "n": 20, "window_ms": [0.1, 50.0], "similarity_threshold": 0.9,
        "composer": "offline", "attempts": 30, "wall_s": 1800.0, "torch": "2.5.1", "gpu": "NVIDIA H200",
        "kernelbench": None}
REJECTIONS = ([{"attempt": 100 + i, "reason": "too_fast", "message": f"eager 0.0{i} ms is below the window",
                "ops": [GELU]} for i in range(10)]
              + [{"attempt": 200 + i, "reason": "constant_output", "ops": [CUMSUM],
                  "message": "the output does not depend on the input | " + "x" * 300} for i in range(5)]
              + [{"attempt": 300 + i, "reason": "too_similar", "message": "similarity 0.95 to level2/1",
                  "ops": [CONV, GELU]} for i in range(3)])


def _rows() -> list[dict]:
    rows = []
    for i, ops in enumerate(CHAINS):
        rows.append({"id": f"s{i:06d}_task", "code": "class Model: ...", "ops": ops,
                     "families": [FAMILY[o] for o in ops], "num_ops": len(ops),
                     "eager_ms": 0.5 * (i + 1),  # 0.5, 1.0, ..., 6.0
                     "compile_ms": None if i % 3 == 0 else 0.25 * (i + 1),  # half the eager time, 8 tasks
                     "max_kernelbench_similarity": i / 20,  # 0.0 ... 0.55
                     "kernelbench_match": f"level2/{i}_Match" if i else None,
                     "seed": 7, "attempt": i, "composer": "offline", "batch_size": 16})
    return rows


def _table_rows(text: str, heading: str) -> list[str]:
    """The table rows (header and separator dropped) of the first table after `## heading`."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return rows[2:]


def _links(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("stats") / "run"  # does not exist yet: write_stats creates it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warnings would reach the user's terminal
        path = write_stats(out, _rows(), REJECTIONS, META)
    return path, path.read_text()


def test_stats_md_links_every_plot_as_a_valid_png(full):
    path, text = full
    assert path == path.parent / "stats.md" and path.exists()
    for name in PLOTS:
        data = (path.parent / name).read_bytes()
        assert data[:8] == PNG, name
        assert len(data) > 5000, (name, len(data))
    links = _links(text)
    assert sorted(links) == sorted(PLOTS)
    for link in links:
        assert not Path(link).is_absolute() and (path.parent / link).is_file()


def test_the_summary_counts_acceptances_rates_and_wall_time(full):
    _, text = full
    assert text.startswith("# ")
    assert "| accepted | 12 of 20 requested |" in text
    assert "| attempts | 30 |" in text
    assert "| acceptance rate | 40.0% |" in text  # 12 / 30
    assert "| accepted per hour | 24.0 |" in text  # 12 in half an hour
    assert "| wall time | 30 min |" in text
    assert "| device | cuda |" in text and "| seed | 7 |" in text
    assert "| eager time window | 0.1 to 50 ms |" in text
    assert "| KernelBench similarity threshold | 0.9 |" in text
    # extra meta keys in their own key/value table
    assert _table_rows(text, "Run") == ["| torch | 2.5.1 |", "| gpu | NVIDIA H200 |", "| kernelbench | - |"]


def test_operator_tables_count_tasks_per_family_and_uses_per_operator(full):
    _, text = full
    assert _table_rows(text, "Tasks by number of operators") == [
        "| 1 | 2 | 16.7% |", "| 2 | 3 | 25.0% |", "| 3 | 4 | 33.3% |", "| 4 | 2 | 16.7% |", "| 5 | 1 | 8.3% |"]
    # families count tasks, not uses: conv in 10 tasks, activation in 8, norm in 6, scan in 5
    assert _table_rows(text, "Operator families") == [
        "| conv | 10 | 83.3% |", "| activation | 8 | 66.7% |", "| norm | 6 | 50.0% |", "| scan | 5 | 41.7% |"]
    ops = _table_rows(text, "Operators")
    assert ops[0] == f"| Conv2d | `{CONV}` | 11 | 10 |"
    assert ops[1] == f"| F.gelu | `{GELU}` | 10 | 8 |"
    # a tie on uses is ordered by full name
    assert ops[2:] == [f"| torch.cumsum | `{CUMSUM}` | 6 | 5 |", f"| LlamaRMSNorm | `{RMS}` | 6 | 6 |"]
    assert "4 distinct operators, 33 uses" in text


def test_time_and_similarity_tables_give_quantiles_and_the_closest_tasks(full):
    _, text = full
    times = _table_rows(text, "Run times")
    # eager 0.5 .. 6.0 in steps of 0.5: p10 = 0.5 + 0.1 * 11 * 0.5 = 1.05, median 3.25, p90 5.45
    assert times[0] == "| eager | 12 | 0.500 | 1.050 | 3.250 | 5.450 | 6.000 |"
    assert times[1].startswith("| torch.compile | 8 | 0.500 |")  # compile_ms None in 4 tasks
    assert "ratio over the 8 tasks with both: 0.50x" in text
    sims = _table_rows(text, "Similarity to KernelBench")
    assert sims[0] == "| max similarity | 12 | 0.000 | 0.055 | 0.275 | 0.495 | 0.550 |"
    closest = sims[3:]  # after the quantile row, the second table's header and separator
    assert len(closest) == 5
    assert closest[0].startswith("| s000011_task | 0.550 | level2/11_Match | F.gelu, torch.cumsum, LlamaRMSNorm,")
    assert [r.split(" | ")[0] for r in closest] == [f"| s0000{i}_task" for i in (11, 10, "09", "08", "07")]


def test_the_rejection_table_counts_reasons_with_a_clipped_example(full):
    _, text = full
    rows = _table_rows(text, "Rejections by reason")
    assert [r.split(" | ")[:3] for r in rows] == [
        ["| too_fast", "10", "33.3%"], ["| constant_output", "5", "16.7%"], ["| too_similar", "3", "10.0%"]]
    assert rows[0].endswith("| eager 0.00 ms is below the window |")
    example = rows[1].split(" | ", 3)[3].removesuffix(" |")
    assert example.startswith("the output does not depend on the input \\| xxx") and example.endswith(" characters dropped ...]")
    assert len(example.rpartition(" [... ")[0]) == 101  # 100 characters, plus the escaping backslash


def test_with_no_task_accepted_only_rejections_are_plotted_and_old_plots_are_removed(tmp_path, capsys):
    meta = {**META, "attempts": 4, "wall_s": 0.0}
    rejections = [{"attempt": i, "reason": "compile_error", "message": "boom", "ops": [CONV]} for i in range(4)]
    # a previous run's plots in the folder are removed, not left beside a stats.md that no longer shows them
    for name in PLOTS:
        (tmp_path / name).write_bytes(PNG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = write_stats(tmp_path, [], rejections, meta)
    assert capsys.readouterr() == ("", "")
    text = path.read_text()
    assert "| accepted | 0 of 20 requested |" in text and "| acceptance rate | 0.0% |" in text
    assert "accepted per hour" not in text and "wall time" not in text
    assert "No task was accepted" in text
    assert _links(text) == ["rejections.png"]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["rejections.png"]
    assert (tmp_path / "rejections.png").read_bytes()[:8] == PNG
    assert _table_rows(text, "Rejections by reason") == ["| compile_error | 4 | 100.0% | boom |"]


def test_with_no_attempt_there_are_no_plots_and_no_run_table(tmp_path, capsys):
    meta = {"device": "cpu", "seed": 0, "n": 5, "window_ms": [0.1, 50], "similarity_threshold": 0.8,
            "composer": "offline", "attempts": 0, "wall_s": 0}
    text = write_stats(tmp_path, [], [], meta).read_text()
    assert capsys.readouterr() == ("", "")
    assert "| acceptance rate | - |" in text and "No attempt was rejected." in text
    assert "## Run\n" not in text  # no extra meta keys, no key/value table
    assert _links(text) == [] and not list(tmp_path.glob("*.png"))


def test_one_task_without_a_compile_time_says_none_was_recorded(tmp_path):
    row = {**_rows()[0], "compile_ms": None, "num_ops": 1}
    meta = {**META, "attempts": 1}
    text = write_stats(tmp_path, [row], [], meta).read_text()
    assert "| eager | 1 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 |" in text
    assert "torch.compile |" not in text and "No torch.compile time was recorded." in text
    assert "| 1 | 1 | 100.0% |" in text and "| acceptance rate | 100.0% |" in text
    for link in _links(text):
        assert (tmp_path / link).read_bytes()[:8] == PNG


def test_short_names_drop_module_paths_unless_two_names_would_share_a_label():
    assert [short_op(n) for n in (CONV, GELU, CUMSUM, RMS, "torch.Tensor.view", "torch.special.erf")] == [
        "Conv2d", "F.gelu", "torch.cumsum", "LlamaRMSNorm", "Tensor.view", "torch.special.erf"]
    # a short label shared by two names would be ambiguous in a plot: both keep their full names
    clash = short_names(["torch.nn.Foo", "transformers.models.x.Foo", CONV])
    assert clash == {"torch.nn.Foo": "torch.nn.Foo", "transformers.models.x.Foo": "transformers.models.x.Foo",
                     CONV: "Conv2d"}


def test_quantile_interpolates_between_the_sorted_values():
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.5
    assert quantile([5.0], 0.9) == 5.0
    assert quantile([0.0, 10.0], 0.1) == pytest.approx(1.0)
