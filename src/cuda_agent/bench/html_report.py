"""`report.html`: one self-contained page per run (or two runs side by side) to browse.

No server and no network: the page carries its data (one JSON block), its plots (the report's PNGs,
inlined), its style and a small script. It shows the metrics, the plots, what a published dump
claimed against what we measured (disagreements first), a table of every sample (task, run,
model, verdict, reward, reasons, speedups with their spread, claimed figures) that sorts by any
column, filters by text and by verdict, and opens a sample's code and full reasons on click. A
sample opens from the address too (`report.html#s=3`), so a link can point at one.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any

from cuda_agent.bench.store import Store

CODE_LIMIT = 200_000  # characters of a sample's code kept in the page
SPEEDUP_DISAGREES = 1.5  # claimed and measured speedups further apart than this factor disagree


def _code(candidate: str) -> str:
    p = Path(candidate)
    try:
        if p.is_dir():
            files = [p / "model_new.py"] + sorted(q for q in (p / "kernels").rglob("*") if q.is_file())
            text = "\n\n".join(f"# ---- {q.relative_to(p)}\n{q.read_text(errors='replace')}" for q in files if q.is_file())
        else:
            text = p.read_text(errors="replace")
    except OSError:
        return f"(the code is no longer at {candidate})"
    return text if len(text) <= CODE_LIMIT else text[:CODE_LIMIT] + "\n... (cut)"


def _spread(eager: Any, cand: Any) -> list[float] | None:
    """The speedup over eager with the candidate's time at its median -+ half its interquartile
    range: how firmly the speedup is known."""
    if eager is None or cand is None or not cand.median:
        return None
    hi, lo = cand.median + cand.iqr / 2, max(cand.median - cand.iqr / 2, cand.median / 100)
    return [round(eager.median / hi, 3), round(eager.median / lo, 3)]


# failures that only the strict policy gives (CUDA Agent's rules, not KernelBench's): a dump measured
# under KernelBench's rules is told that these disagreements are the rules'
STRICT_RULES = frozenset({"torch_fallback", "decoy_kernel", "state_dict_mismatch"})


def agreement(measured_correct: bool, measured_speedup: float | None, claimed: dict[str, Any]) -> str | None:
    """How a dump's claim and our verdict disagree, or None where they agree (or nothing is claimed)."""
    said = claimed.get("correct")
    if said is True and not measured_correct:
        return "claimed correct, judged not"
    if said is False and measured_correct:
        return "claimed incorrect, judged correct"
    c = claimed.get("speedup")
    if c and measured_speedup and measured_correct and abs(math.log(c / measured_speedup)) > math.log(SPEEDUP_DISAGREES):
        return f"speedup claimed {c:.2f}x, measured {measured_speedup:.2f}x"
    return None


def samples(store: Store, run: str) -> list[dict[str, Any]]:
    """Every stored sample of `run` as the page's rows."""
    claimed = store.claimed(run)
    rows = []
    for r in store.records(run):
        res = r.result
        c = claimed.get((r.task, r.sample), {})
        times = res.times_ms if isinstance(res.times_ms, dict) else {}
        spread = _spread(times.get("eager"), times.get("candidate"))
        rows.append({
            "run": run, "task": r.task, "level": r.level, "sample": r.sample, "model": c.get("model"),
            "correct": bool(res.correct), "reward": res.reward,
            "codes": [x.code.value for x in res.reasons if x.kind.value != "info"],
            "strict_only": not res.correct and bool(res.failures)
                           and all(x.code.value in STRICT_RULES for x in res.failures),
            "reasons": [f"{x.code.value}: {x.message}" for x in res.reasons],
            "eager": res.speedup_eager, "compile": res.speedup_compile, "spread": spread,
            "sol": (res.sol or {}).get("fraction"), "generalizes": (res.generalization or {}).get("generalizes"),
            "claimed_correct": c.get("correct"), "claimed_speedup": c.get("speedup"),
            "disagreement": agreement(bool(res.correct), res.speedup_eager, c) if c else None,
            "origin": c.get("origin"), "candidate": r.candidate, "code": _code(r.candidate),
        })
    return rows


def claimed_summary(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Claimed against measured over the samples a dump made claims of; None where there are none."""
    with_claims = [r for r in rows if r["claimed_correct"] is not None or r["claimed_speedup"] is not None]
    if not with_claims:
        return None
    said = [r for r in with_claims if r["claimed_correct"] is not None]
    ratios = [r["eager"] / r["claimed_speedup"] for r in with_claims
              if r["correct"] and r["eager"] and r["claimed_speedup"]]
    return {"samples": len(with_claims), "claimed_correct": sum(bool(r["claimed_correct"]) for r in said),
            "judged_correct": sum(r["correct"] for r in said),
            "agree_on_correctness": sum(bool(r["claimed_correct"]) == r["correct"] for r in said),
            "disagreements": sum(r["disagreement"] is not None for r in with_claims),
            "disagree_by_strict_rules": sum(r["disagreement"] is not None and bool(r.get("strict_only"))
                                            for r in with_claims),
            "median_measured_over_claimed": round(sorted(ratios)[len(ratios) // 2], 3) if ratios else None}


def claims_sentence(summary: dict[str, Any], disagree: str) -> str:
    """`claimed_summary` in words (report.md and report.html)."""
    ratio = summary["median_measured_over_claimed"]
    speed = (f"measured speedup over claimed, median {ratio}x" if ratio is not None else
             "no speedup to set against a claimed one (no kernel with a claimed speedup was judged correct)")
    strict = summary.get("disagree_by_strict_rules") or 0
    rule = (f" ({strict} of them only for a rule of the strict policy: PyTorch compute in forward, a decoy "
            "kernel, weights under other names; the dump's figures were measured without those rules, and "
            "--policy kernelbench judges as KernelBench does)" if strict else "")
    return (f"{summary['samples']} samples carry the dump's claims: {summary['claimed_correct']} claimed correct, "
            f"{summary['judged_correct']} judged correct here ({summary['agree_on_correctness']} agree on "
            f"correctness); {summary['disagreements']} {disagree}{rule}; {speed}")


def write_html(rows: list[dict[str, Any]], runs: list[str], out: Path, metrics_html: str, plots: list[Path]) -> Path:
    """Write `out/report.html` for `runs` (one, or two side by side) from their `samples` rows:
    `metrics_html` is the metrics table already made, `plots` the PNGs to inline."""
    rows = sorted(rows, key=lambda r: (r["disagreement"] is None, r["level"] or 0, r["task"], r["run"], r["sample"]))
    for i, r in enumerate(rows):
        r["id"] = i
    summary = claimed_summary(rows)
    images = "".join(f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
                     f'{base64.b64encode(p.read_bytes()).decode()}"></figure>' for p in plots if p.is_file())
    claims = ""
    if summary is not None:
        claims = ("<h2>Claimed against measured</h2><p>" + html.escape(
            claims_sentence(summary, "disagree (listed first below)")) + "</p>")
    data = json.dumps(rows).replace("</", "<\\/")
    page = PAGE.format(title=html.escape(" vs ".join(runs)), metrics=metrics_html, claims=claims, plots=images,
                       data=data)
    path = out / "report.html"
    path.write_text(page)
    return path


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cuda-agent report: {title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: left; }}
#samples th {{ cursor: pointer; background: #f4f4f4; position: sticky; top: 0; }}
#samples tr.row:hover {{ background: #eef5ff; cursor: pointer; }}
tr.bad td.verdict {{ color: #b00; }} tr.good td.verdict {{ color: #070; }} tr.disagree td.claim {{ background: #fff3cd; }}
pre {{ background: #f8f8f8; padding: 8px; overflow: auto; max-height: 40em; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; vertical-align: top; }} img {{ max-width: 40em; }}
.controls {{ margin: 1em 0; }} .controls input {{ width: 24em; }}
</style></head><body>
<h1>cuda-agent report: {title}</h1>
<h2>Metrics</h2>{metrics}
{claims}
<h2>Samples</h2>
<div class="controls"><input id="filter" placeholder="filter: task, model, reason..." aria-label="filter">
<select id="verdict" aria-label="verdict"><option value="">all verdicts</option><option value="correct">correct</option>
<option value="incorrect">not correct</option><option value="disagree">disagreeing with the claim</option></select>
<span id="count"></span></div>
<table id="samples"><thead><tr>
<th data-k="task">task</th><th data-k="run">run</th><th data-k="sample">sample</th><th data-k="model">model</th>
<th data-k="correct">verdict</th><th data-k="reward">reward</th><th data-k="codes">reasons</th>
<th data-k="eager">vs eager</th><th data-k="compile">vs compile</th><th data-k="sol" title="fraction of the speed of light">SOL</th>
<th data-k="generalizes" title="correct at other sizes (--shapes)">other sizes</th>
<th data-k="claimed_speedup">claimed</th>
</tr></thead><tbody></tbody></table>
<h2>Plots</h2>{plots}
<script type="application/json" id="data">{data}</script>
<script>
const rows = JSON.parse(document.getElementById("data").textContent);
const body = document.querySelector("#samples tbody");
let key = null, dir = 1, open = null;
const x = v => v == null ? "-" : v.toFixed(2) + "x";
const esc = s => String(s).replace(/[&<>"]/g, c => ({{"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}})[c]);
function claim(r) {{
  if (r.claimed_correct == null && r.claimed_speedup == null) return "-";
  return (r.claimed_correct == null ? "" : (r.claimed_correct ? "correct" : "incorrect")) +
         (r.claimed_speedup == null ? "" : " " + x(r.claimed_speedup));
}}
function render() {{
  const q = document.getElementById("filter").value.toLowerCase(), v = document.getElementById("verdict").value;
  let shown = rows.filter(r => (!q || [r.task, r.run, r.model, r.codes.join(" "), r.disagreement].join(" ").toLowerCase().includes(q))
    && (!v || (v === "correct" ? r.correct : v === "incorrect" ? !r.correct : r.disagreement)));
  if (key) shown = shown.slice().sort((a, b) => {{
    const p = a[key], q2 = b[key];
    return (p == null) - (q2 == null) || (p < q2 ? -dir : p > q2 ? dir : 0);
  }});
  body.innerHTML = shown.map(r => `<tr class="row ${{r.correct ? "good" : "bad"}} ${{r.disagreement ? "disagree" : ""}}" data-id="${{r.id}}">
    <td>${{esc(r.task)}}</td><td>${{esc(r.run)}}</td><td>${{r.sample}}</td><td>${{esc(r.model || "-")}}</td>
    <td class="verdict">${{r.correct ? "correct" : "not correct"}}</td><td>${{r.reward}}</td><td>${{esc(r.codes.join(", ") || "-")}}</td>
    <td>${{x(r.eager)}}${{r.spread ? ` <small>(${{r.spread[0].toFixed(2)}}-${{r.spread[1].toFixed(2)}})</small>` : ""}}</td>
    <td>${{x(r.compile)}}</td><td>${{r.sol == null ? "-" : (100 * r.sol).toFixed(1) + "%"}}</td>
    <td>${{r.generalizes == null ? "-" : r.generalizes ? "yes" : "no"}}</td><td class="claim" title="${{esc(r.disagreement || "")}}">${{esc(claim(r))}}</td></tr>` +
    (open === r.id ? `<tr class="detail" id="detail-${{r.id}}"><td colspan="12">
      ${{r.disagreement ? `<p><b>disagreement:</b> ${{esc(r.disagreement)}}</p>` : ""}}
      <p><b>candidate:</b> ${{esc(r.candidate)}}${{r.origin ? " (from " + esc(r.origin) + ")" : ""}}</p>
      <p><b>reasons:</b></p><pre class="reasons">${{esc(r.reasons.join("\\n\\n") || "none")}}</pre>
      <p><b>code:</b></p><pre class="code">${{esc(r.code)}}</pre></td></tr>` : "")).join("");
  document.getElementById("count").textContent = `${{shown.length}} of ${{rows.length}} samples`;
}}
body.addEventListener("click", e => {{
  const tr = e.target.closest("tr.row"); if (!tr) return;
  const id = Number(tr.dataset.id); open = open === id ? null : id; render();
}});
document.querySelectorAll("#samples th").forEach(th => th.addEventListener("click", () => {{
  dir = key === th.dataset.k ? -dir : 1; key = th.dataset.k; render();
}}));
document.getElementById("filter").addEventListener("input", render);
document.getElementById("verdict").addEventListener("change", render);
const m = location.hash.match(/s=(\\d+)/); if (m) open = Number(m[1]);
render();
</script></body></html>
"""
