"""Statistics of a `cuda-agent synth` run: `stats.md` and its PNG plots, in the run's output folder.

`write_stats(out_dir, rows, rejections, meta)` takes the accepted tasks (`rows`), the rejected
attempts (`rejections`) and the run's parameters (`meta`) and writes `stats.md` with the plots
`num_ops.png`, `op_frequency.png`, `eager_ms.png`, `similarity.png` and `rejections.png`. A plot whose
data is empty (no accepted task, no rejection) is not drawn; the Markdown says so instead. Nothing is
printed. Plots use matplotlib's Agg backend (through `bench.report`): no display needed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cuda_agent.reporting import percent, pyplot
from cuda_agent.text import clip

PLOTS = ("num_ops.png", "op_frequency.png", "eager_ms.png", "similarity.png", "rejections.png")
TOP_OPS = 30  # operators shown in the frequency plot and table
CLOSEST = 5  # tasks listed as the closest to KernelBench
QUANTILES = (("min", 0.0), ("p10", 0.1), ("median", 0.5), ("p90", 0.9), ("max", 1.0))
_MESSAGE_CHARS = 100
_DPI = 110
# meta keys shown in the summary; any other key goes to the "Run" key/value table
_SUMMARY_KEYS = frozenset({"device", "seed", "n", "window_ms", "similarity_threshold", "composer", "attempts",
                           "wall_s"})


def short_op(name: str) -> str:
    """`torch.nn.Conv2d` -> `Conv2d`, `torch.nn.functional.gelu` -> `F.gelu`, `torch.Tensor.view` ->
    `Tensor.view`, `transformers.<module>.LlamaRMSNorm` -> `LlamaRMSNorm`; `torch.cumsum` and other
    `torch.*` names stay as they are."""
    for prefix, short in (("torch.nn.functional.", "F."), ("torch.Tensor.", "Tensor."), ("torch.nn.", "")):
        if name.startswith(prefix):
            return short + name[len(prefix):]
    if name.startswith("transformers."):
        return name.rsplit(".", 1)[-1]
    return name


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Short label of each name; a short label shared by two different names falls back to the full name."""
    names = set(names)
    counts = Counter(short_op(n) for n in names)
    return {n: short_op(n) if counts[short_op(n)] == 1 else n for n in names}


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of non-empty `values`, interpolating linearly between order statistics."""
    assert values and 0.0 <= q <= 1.0
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    i = math.floor(pos)
    if i + 1 >= len(xs):
        return xs[-1]
    return xs[i] + (xs[i + 1] - xs[i]) * (pos - i)


def write_stats(out_dir: Path, rows: list[dict], rejections: list[dict], meta: dict) -> Path:
    """Write `stats.md` and its plots into `out_dir` (created if missing); returns the `stats.md` path.

    Plots not drawn this time are removed, so a rewritten folder never holds a stale one.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    attempts = int(meta.get("attempts") or 0)
    names = short_names(op for r in rows for op in r["ops"])
    drawn: list[str] = []

    lines = ["# Synthesised dataset: statistics", ""]
    lines += _summary(rows, meta, attempts)
    if rows:
        lines += _operator_sections(rows, names, out_dir, drawn)
        lines += _time_sections(rows, meta, out_dir, drawn)
        lines += _similarity_sections(rows, meta, names, out_dir, drawn)
    else:
        lines += ["No task was accepted, so there are no operator, time or similarity statistics and no "
                  "plots of them.", ""]
    lines += _rejection_sections(rejections, attempts, out_dir, drawn)
    for name in PLOTS:
        if name not in drawn:
            (out_dir / name).unlink(missing_ok=True)
    path = out_dir / "stats.md"
    path.write_text("\n".join(lines).rstrip("\n") + "\n")
    return path


# -- Markdown sections -------------------------------------------------------------------------------

def _summary(rows: list[dict], meta: dict, attempts: int) -> list[str]:
    wall = float(meta.get("wall_s") or 0.0)
    lo, hi = meta["window_ms"]
    lines = ["| | |", "| --- | --- |",
             f"| accepted | {len(rows)}" + (f" of {meta['n']} requested" if meta.get("n") is not None else "") + " |",
             f"| attempts | {attempts} |",
             f"| acceptance rate | {_rate(len(rows), attempts)} |"]
    if wall > 0:
        lines += [f"| wall time | {_duration(wall)} |", f"| accepted per hour | {3600 * len(rows) / wall:.1f} |"]
    lines += [f"| device | {_cell(meta['device'])} |",
              f"| seed | {meta['seed']} |",
              f"| composer | {_cell(meta.get('composer', '-'))} |",
              f"| eager time window | {lo:g} to {hi:g} ms |",
              f"| KernelBench similarity threshold | {meta['similarity_threshold']:g} |", ""]
    extra = {k: v for k, v in meta.items() if k not in _SUMMARY_KEYS}
    if extra:
        lines += ["## Run", "", "| key | value |", "| --- | --- |"]
        lines += [f"| {_cell(k)} | {_cell('-' if v is None else v)} |" for k, v in extra.items()]
        lines.append("")
    return lines


def _operator_sections(rows: list[dict], names: dict[str, str], out: Path, drawn: list[str]) -> list[str]:
    n = len(rows)
    by_count = Counter(int(r["num_ops"]) for r in rows)
    counts = list(range(1, max(5, *by_count) + 1))
    _plot_num_ops([(k, by_count[k]) for k in counts], n, out / "num_ops.png")
    drawn.append("num_ops.png")
    lines = ["## Tasks by number of operators", "", "![tasks by number of operators](num_ops.png)", "",
             "| operators | tasks | share |", "| --- | --- | --- |"]
    lines += [f"| {k} | {by_count[k]} | {percent(by_count[k] / n)} |" for k in counts]

    families = Counter(f for r in rows for f in set(r["families"]))
    lines += ["", "## Operator families", "", "Tasks using at least one operator of the family.", "",
              "| family | tasks | share |", "| --- | --- | --- |"]
    lines += [f"| {_cell(f)} | {c} | {percent(c / n)} |" for f, c in _ranked(families)]

    uses = Counter(op for r in rows for op in r["ops"])
    tasks = Counter(op for r in rows for op in set(r["ops"]))
    top = _ranked(uses)[:TOP_OPS]
    _plot_op_frequency([(names[op], c) for op, c in top], out / "op_frequency.png")
    drawn.append("op_frequency.png")
    lines += ["", "## Operators", "",
              f"{len(uses)} distinct operators, {sum(uses.values())} uses; the {len(top)} most used:", "",
              "![most used operators](op_frequency.png)", "",
              "| operator | name | uses | tasks |", "| --- | --- | --- | --- |"]
    lines += [f"| {_cell(names[op])} | `{_cell(op)}` | {c} | {tasks[op]} |" for op, c in top]
    return lines + [""]


def _time_sections(rows: list[dict], meta: dict, out: Path, drawn: list[str]) -> list[str]:
    eager = [float(r["eager_ms"]) for r in rows]
    compiled = [float(r["compile_ms"]) for r in rows if r.get("compile_ms") is not None]
    _plot_times(eager, compiled, meta["window_ms"], out / "eager_ms.png")
    drawn.append("eager_ms.png")
    head = " | ".join(label for label, _ in QUANTILES)
    lines = ["## Run times", "", "![eager time](eager_ms.png)", "",
             f"| time (ms) | tasks | {head} |", "| --- | --- |" + " --- |" * len(QUANTILES),
             _quantile_row("eager", eager, "{:.3f}")]
    if compiled:
        lines.append(_quantile_row("torch.compile", compiled, "{:.3f}"))
    ratios = [float(r["compile_ms"]) / float(r["eager_ms"]) for r in rows
              if r.get("compile_ms") is not None and r["eager_ms"] > 0]
    lines.append("")
    if ratios:
        lines.append(f"Median compile/eager time ratio over the {len(ratios)} tasks with both: "
                     f"{quantile(ratios, 0.5):.2f}x (below 1: torch.compile is faster).")
    else:
        lines.append("No torch.compile time was recorded.")
    return lines + [""]


def _similarity_sections(rows: list[dict], meta: dict, names: dict[str, str], out: Path,
                         drawn: list[str]) -> list[str]:
    sims = [float(r["max_kernelbench_similarity"]) for r in rows]
    threshold = float(meta["similarity_threshold"])
    _plot_similarity(sims, threshold, out / "similarity.png")
    drawn.append("similarity.png")
    head = " | ".join(label for label, _ in QUANTILES)
    lines = ["## Similarity to KernelBench", "",
             f"Highest similarity of each accepted task to any KernelBench task (threshold {threshold:g}).", "",
             "![similarity to KernelBench](similarity.png)", "",
             f"| | tasks | {head} |", "| --- | --- |" + " --- |" * len(QUANTILES),
             _quantile_row("max similarity", sims, "{:.3f}"), "",
             f"The {min(CLOSEST, len(rows))} tasks closest to KernelBench:", "",
             "| task | similarity | KernelBench match | operators |", "| --- | --- | --- | --- |"]
    closest = sorted(rows, key=lambda r: (-float(r["max_kernelbench_similarity"]), r["id"]))[:CLOSEST]
    for r in closest:
        ops = ", ".join(names[op] for op in r["ops"])
        lines.append(f"| {_cell(r['id'])} | {float(r['max_kernelbench_similarity']):.3f} | "
                     f"{_cell(r.get('kernelbench_match') or '-')} | {_cell(ops)} |")
    return lines + [""]


def _rejection_sections(rejections: list[dict], attempts: int, out: Path, drawn: list[str]) -> list[str]:
    lines = ["## Rejections by reason", ""]
    if not rejections:
        return lines + ["No attempt was rejected.", ""]
    reasons = Counter(r["reason"] for r in rejections)
    ranked = _ranked(reasons)
    example = {}
    for r in rejections:
        if r.get("message"):
            example.setdefault(r["reason"], r["message"])
    _plot_rejections(ranked, out / "rejections.png")
    drawn.append("rejections.png")
    lines += ["![rejections by reason](rejections.png)", "",
              "| reason | count | share of attempts | example |", "| --- | --- | --- | --- |"]
    lines += [f"| {_cell(k)} | {c} | {_rate(c, attempts)} | {_cell(_shorten(example.get(k, '-')))} |"
              for k, c in ranked]
    return lines + [""]


def _quantile_row(label: str, values: Sequence[float], fmt: str) -> str:
    cells = " | ".join(fmt.format(quantile(values, q)) for _, q in QUANTILES)
    return f"| {label} | {len(values)} | {cells} |"


def _ranked(counts: Counter) -> list[tuple[str, int]]:
    """Most frequent first; ties by name, so the output does not depend on input order."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _rate(k: int, n: int) -> str:
    return percent(k / n) if n > 0 else "-"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes} min"


def _shorten(text: str, limit: int = _MESSAGE_CHARS) -> str:
    return clip(" ".join(str(text).split()), limit, keep="head")


def _cell(value: Any) -> str:
    """A value as one Markdown table cell: on one line, pipes escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


# -- plots ------------------------------------------------------------------------------------------

def _save(fig, count_axis, path: Path) -> None:
    """Whole ticks on the axis that counts (tasks, uses, attempts), then write and close the figure."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    count_axis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)


def _plot_num_ops(counts: list[tuple[int, int]], total: int, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    bars = ax.bar([str(k) for k, _ in counts], [c for _, c in counts], color="tab:blue")
    ax.bar_label(bars, labels=[percent(c / total) for _, c in counts], padding=2)
    ax.set_xlabel("operators in the task")
    ax.set_ylabel("tasks")
    ax.set_title(f"tasks by number of operators ({total} tasks)")
    ax.margins(y=0.12)
    _save(fig, ax.yaxis, path)


def _plot_op_frequency(items: list[tuple[str, int]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(items) + 1.4))
    bars = ax.barh([k for k, _ in items][::-1], [v for _, v in items][::-1], color="tab:green")
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_xlabel("uses across accepted tasks")
    ax.set_title(f"{len(items)} most used operators")
    ax.margins(x=0.08)
    _save(fig, ax.xaxis, path)


def _plot_times(eager: list[float], compiled: list[float], window: Sequence[float], path: Path) -> None:
    import numpy as np

    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    bounds = [float(b) for b in window if b and b > 0]
    positive = [v for v in eager + compiled if v > 0]
    lo, hi = min(positive + bounds), max(positive + bounds)
    if hi <= lo * 1.01:
        lo, hi = lo / 1.5, hi * 1.5
    bins = np.geomspace(lo, hi, 31)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist([v for v in eager if v > 0], bins=bins, color="tab:blue", alpha=0.75, label="eager")
    if compiled:
        ax.hist([v for v in compiled if v > 0], bins=bins, histtype="step", color="tab:orange", lw=1.5,
                label="torch.compile")
    for i, b in enumerate(bounds):
        ax.axvline(b, color="grey", ls="--", lw=1,
                   label=f"window {float(window[0]):g} to {float(window[1]):g} ms" if i == 0 else None)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("time per call (ms, log scale)")
    ax.set_ylabel("tasks")
    ax.set_title("run time of the accepted tasks")
    ax.legend(loc="best", framealpha=0.9)
    _save(fig, ax.yaxis, path)


def _plot_similarity(sims: list[float], threshold: float, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(sims, bins=[i / 25 for i in range(26)], color="tab:purple", alpha=0.8)
    ax.axvline(threshold, color="tab:red", ls="--", lw=1.2, label=f"threshold {threshold:g}")
    ax.set_xlim(0, 1)
    ax.set_xlabel("highest similarity to a KernelBench task")
    ax.set_ylabel("tasks")
    ax.set_title("decontamination: similarity to KernelBench")
    ax.legend(loc="best", framealpha=0.9)
    _save(fig, ax.yaxis, path)


def _plot_rejections(items: list[tuple[str, int]], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(items) + 1.4))
    bars = ax.barh([k for k, _ in items][::-1], [v for _, v in items][::-1], color="tab:red")
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_xlabel("attempts")
    ax.set_title("rejected attempts by reason")
    ax.margins(x=0.08)
    _save(fig, ax.xaxis, path)
