"""`cuda-agent report`: a run (or two, side by side) as Markdown with tables and PNG plots.

Written into one folder: `report.md`, `speedups.png` (per level: the speedups against eager and
compile, and the fraction of the speed of light reached), `fast_p.png` (fast_p curves against both
baselines) and `failures.png` (reasons for failure by count), and `report.html`, the page to browse
(html_report.py). Where the solutions came from a published dump, both put what it claimed beside
what was measured (and `claims.png`, claimed against measured speedup, where it claimed speedups).
Plots use matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from cuda_agent.bench.html_report import SPEEDUP_DISAGREES, claimed_summary, claims_sentence, samples, write_html
from cuda_agent.bench.metrics import FAST_P, fast_p
from cuda_agent.bench.runner import NOT_EVALUATED, Summary, summarize_run
from cuda_agent.bench.store import Store
from cuda_agent.reporting import percent, pyplot

BASELINES = ("eager", "compile")


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


METRIC_COLUMNS = ("tasks", "correct", "faster than eager", "faster than compile",
                  "geomean vs eager (correct / all)", "geomean vs compile (correct / all)",
                  "speed of light reached (p25 / median / p75)")


def metric_cells(m: dict[str, Any]) -> list[str]:
    """One group's metrics (a level, overall, a sample, a run) as the cells of METRIC_COLUMNS."""
    return [str(m["tasks"]), percent(m["pass_rate"]), percent(m["faster_eager_rate"]), percent(m["faster_compile_rate"]),
            f"{_x(m['geomean_eager'])} / {_x(m['geomean_eager_all'])}",
            f"{_x(m['geomean_compile'])} / {_x(m['geomean_compile_all'])}", _sol_cell(m.get("sol"))]


def _sol_cell(sol: dict[str, Any] | None) -> str:
    """The quartiles of the SOL fractions of a group's timed correct tasks, in percent."""
    if not sol or not sol.get("timed"):
        return "-"
    return " / ".join(percent(sol[k]) for k in ("p25", "median", "p75")) + f" (of {sol['timed']})"


def metrics_table(groups: dict[str, dict[str, Any]], first: str = "level") -> list[str]:
    """Markdown rows: one per group (a level, overall, a sample, a run)."""
    lines = ["| " + " | ".join((first, *METRIC_COLUMNS)) + " |", "| --- " * (1 + len(METRIC_COLUMNS)) + "|"]
    for name, m in groups.items():
        lines.append("| " + " | ".join((name, *metric_cells(m))) + " |")
    return lines


def metric_groups(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"level 1": ..., "no level": ..., "overall": ...}: the rows of a metrics table, labelled."""
    return {**{f"level {k}" if k != "other" else "no level": v for k, v in m["levels"].items()},
            "overall": m["overall"]}


def write_report(store: Store, run: str, out: Path, compare: str | None = None) -> Path:
    """Write the report of `run` (and `compare` beside it) into the folder `out`; returns report.md."""
    out.mkdir(parents=True, exist_ok=True)
    a = summarize_run(store, run)
    b = summarize_run(store, compare) if compare else None
    params = store.require_run(run)
    lines = [f"# Benchmark report: {run}" + (f" vs {compare}" if compare else ""), ""]
    lines += [f"- task set: `{params['taskset']}` ({len(params['tasks'])} tasks)",
              f"- solutions: `{params['solutions']}`",
              f"- device: {params['device']}, policy: {params['policy']}",
              f"- verdicts stored: {len(a.records)}"
              + (f" (evaluator {', '.join(sorted({r.version for r in a.records}))})" if a.records else "")
              + (f"; {a.reasons[NOT_EVALUATED]} task(s) of the dump not evaluated yet (the run was cut: the same "
                 "command resumes it)" if a.reasons.get(NOT_EVALUATED) else ""), ""]
    lines += ["Rates are over all tasks (a task without a solution, or whose solution failed, is not correct). "
              "Faster means correct and more than 5% faster. Geometric means: over correct tasks / over all "
              "tasks with a failure counted as 1.0x.", ""]
    if b is None:
        lines += ["## Metrics (best of samples)" if len(a.samples) > 1 else "## Metrics", ""]
        lines += metrics_table(metric_groups(a.best))
        if len(a.samples) > 1:
            lines += ["", "## Per sample (overall)", ""]
            lines += metrics_table({f"sample {s}": m["overall"] for s, m in a.samples.items()}, first="sample")
    else:
        lines += ["## Metrics side by side", ""]
        side_by_side = {}
        for key, m in metric_groups(a.best).items():
            side_by_side[f"{key}: {run}"] = m
            other = metric_groups(b.best).get(key)
            if other:
                side_by_side[f"{key}: {compare}"] = other
        lines += metrics_table(side_by_side, first="level: run")
        lines += ["", "## Tasks whose verdict changed", ""] + _changes(a, b, run, compare)
    lines += ["", "## fast_p (share of all tasks correct and more than p times faster)", "",
              "| run | baseline | " + " | ".join(f"p={p:g}" for p in FAST_P) + " |",
              "| --- | --- | " + " | ".join("---" for _ in FAST_P) + " |"]
    for label, s in [(run, a)] + ([(compare, b)] if b else []):
        for base in BASELINES:
            curve = s.best["overall"][f"fast_p_{base}"]
            lines.append(f"| {label} | {base} | " + " | ".join(percent(v) for v in curve.values()) + " |")
    lines += ["", "![speedup distribution](speedups.png)", "", "![fast_p curves](fast_p.png)", "",
              "![failures](failures.png)", "", "## Failures by reason", ""]
    lines += ["| reason | count |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in a.reasons.items()]
    shapes = any(t.get("generalizes") is not None for t in a.per_task)  # (a run with --shapes)
    lines += ["", "## Tasks", "", "| task | samples | correct | vs eager | vs compile | speed of light | "
              + ("other sizes | " if shapes else "") + "reasons |", "| --- " * (7 + shapes) + "|"]
    for t in a.per_task:
        sol = "-" if t.get("sol_fraction") is None else percent(t["sol_fraction"])
        other = {True: "generalizes", False: "fails", None: "-"}[t.get("generalizes")] + " | " if shapes else ""
        lines.append(f"| {t['task']} | {t['samples']} | {'yes' if t['correct'] else 'no'} | "
                     f"{_x(t['speedup_eager'])} | {_x(t['speedup_compile'])} | {sol} | {other}"
                     f"{', '.join(t['reasons']) or '-'} |")
    rows = samples(store, run)  # every sample, its code read once, for both reports
    lines += _claims(rows)
    plots = [out / "speedups.png", out / "fast_p.png", out / "failures.png"]
    if _plot_claims(rows, out / "claims.png"):
        lines += ["", "![claimed against measured speedup](claims.png)"]
        plots.append(out / "claims.png")
    _plot_speedups(a, out / "speedups.png")
    _plot_fast_p([(run, a)] + ([(compare, b)] if b else []), out / "fast_p.png")
    _plot_failures(a, out / "failures.png")
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    metrics = metric_groups(a.best) if b is None else side_by_side
    write_html(rows + (samples(store, compare) if compare else []), [run] + ([compare] if compare else []), out,
               _html_table(metrics), plots)
    return path


def _claims(rows: list[dict[str, Any]]) -> list[str]:
    """Claimed against measured, for a run whose solutions came from a dump (its `samples` rows):
    the counts, then every disagreement (report.html has every sample)."""
    summary = claimed_summary(rows)
    if summary is None:
        return []
    lines = ["", "## Claimed against measured", "", claims_sentence(summary, "disagree, listed below") + ".", ""]
    bad = [r for r in rows if r["disagreement"]]
    if bad:
        lines += ["| task | sample | model | disagreement | our reasons |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['task']} | {r['sample']} | {r['model'] or '-'} | {r['disagreement']} | "
                  f"{', '.join(r['codes']) or '-'} |" for r in bad]
    return lines


def _html_table(groups: dict[str, dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ("", *METRIC_COLUMNS))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (name, *metric_cells(m))) + "</tr>"
                   for name, m in groups.items())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _changes(a: Summary, b: Summary, run: str, compare: str) -> list[str]:
    other = {t["task"]: t for t in b.per_task}
    lines = [f"| task | {run} | {compare} |", "| --- | --- | --- |"]
    n = 0
    for t in a.per_task:
        o = other.get(t["task"])
        if o is None:
            continue
        if t["correct"] != o["correct"] or _moved(t["speedup_eager"], o["speedup_eager"]):
            lines.append(f"| {t['task']} | {_verdict(t)} | {_verdict(o)} |")
            n += 1
    return lines if n else ["No task changed its verdict or its speedup over eager by more than 5%."]


def _moved(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return (x is None) != (y is None)
    return abs(math.log(x / y)) > math.log(1.05)


def _verdict(t: dict[str, Any]) -> str:
    return f"correct, {_x(t['speedup_eager'])} eager" if t["correct"] else ", ".join(t["reasons"]) or "not correct"


# -- plots ------------------------------------------------------------------------------------------

def _plot_speedups(s: Summary, path: Path) -> None:
    """Per level: the speedups over eager and over compile, and the fraction of the speed of light
    reached, of the correct tasks (points, and their box)."""
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    levels = sorted({t["level"] for t in s.per_task}, key=lambda lv: (lv is None, lv or 0))
    labels = [f"level {lv}" if lv is not None else "no level" for lv in levels]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[1].sharey(axes[0])
    panels = [(f"speedup_{b}", f"speedup vs {b} (correct tasks)", lambda v: f"{v:g}x", 1.0) for b in BASELINES]
    panels.append(("sol_fraction", "speed of light reached (correct, timed)", lambda v: f"{100 * v:.3g}%", None))
    for ax, (key, title, fmt, line) in zip(axes, panels):
        data = [[t[key] for t in s.per_task if t["level"] == lv and t["correct"] and t.get(key)] for lv in levels]
        for i, ys in enumerate(data):
            ax.scatter([i + 1] * len(ys), ys, alpha=0.6, s=18)
        if any(data):
            ax.boxplot([d if d else [float("nan")] for d in data], widths=0.5, showfliers=False)
            ax.set_yscale("log")
            ticks = FuncFormatter(lambda v, _, fmt=fmt: fmt(v))
            ax.yaxis.set_major_formatter(ticks)
            ax.yaxis.set_minor_formatter(ticks)
        ax.set_xticks(range(1, len(levels) + 1), labels)
        if line:
            ax.axhline(line, color="grey", lw=0.8, ls="--")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("speedup (log scale)")
    axes[2].set_ylabel("fraction of the speed of light (log scale)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_fast_p(runs: list[tuple[str, Summary]], path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, base in zip(axes, BASELINES):
        for label, s in runs:
            top = max([getattr(o, f"speedup_{base}") or 0 for o in s.outcomes] + [2.0])
            ps = [top * i / 200 for i in range(201)]
            curve = fast_p(s.outcomes, base, ps)
            ax.plot(ps, list(curve.values()), label=label)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("p (speedup threshold)")
        ax.set_title(f"fast_p vs {base}")
        ax.set_ylim(0, 1.02)
        ax.legend()
    axes[0].set_ylabel("share of all tasks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_claims(rows: list[dict[str, Any]], path: Path) -> bool:
    """Claimed speedup (x) against measured speedup over eager (y), log-log, one point per sample
    whose dump claimed a speedup; a sample judged incorrect sits on the bottom edge as a red cross.
    Points off the diagonal band are the disagreements. Returns False (no file) where nothing
    claims a speedup."""
    pts = [r for r in rows if isinstance(r["claimed_speedup"], (int, float)) and r["claimed_speedup"] > 0]
    if not pts:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ok = [(r["claimed_speedup"], r["eager"]) for r in pts if r["correct"] and r["eager"]]
    bad = [r["claimed_speedup"] for r in pts if not (r["correct"] and r["eager"])]
    ys = [y for _, y in ok]
    floor = min(ys + [c for c, _ in ok] + bad) / 2
    top = max(ys + [c for c, _ in ok] + bad) * 2
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([floor, top], [floor, top], color="grey", lw=1, label="measured = claimed")
    ax.fill_between([floor, top], [floor / SPEEDUP_DISAGREES, top / SPEEDUP_DISAGREES],
                    [floor * SPEEDUP_DISAGREES, top * SPEEDUP_DISAGREES], color="grey", alpha=0.12,
                    label=f"within {SPEEDUP_DISAGREES:g}x (agree)")
    if ok:
        ax.scatter([c for c, _ in ok], ys, s=18, color="tab:blue", label=f"judged correct ({len(ok)})")
    if bad:
        ax.scatter(bad, [floor * 1.05] * len(bad), marker="x", color="tab:red",
                   label=f"judged incorrect ({len(bad)})")
    ax.set_xlim(floor, top)
    ax.set_ylim(floor, top)
    ax.set_xlabel("claimed speedup (the dump's)")
    ax.set_ylabel("measured speedup over eager (ours)")
    ax.set_title("claimed against measured")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_failures(s: Summary, path: Path) -> None:
    plt = pyplot()
    items = list(s.reasons.items())
    fig, ax = plt.subplots(figsize=(7, max(2.0, 0.4 * len(items) + 1)))
    if items:
        ax.barh([k for k, _ in items][::-1], [v for _, v in items][::-1], color="tab:red")
        ax.set_xlabel("verdicts")
    else:
        ax.text(0.5, 0.5, "no failures", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title("reasons for failure")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
