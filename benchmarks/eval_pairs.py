"""Evaluate (task, candidate) pairs and print a table: the figures quoted in issue notes.

    python benchmarks/eval_pairs.py --examples --kernelbench KB_ROOT --solutions benchmarks/solutions \
        --device cuda --cold-parallel 4 --out results.json

Two passes over the same cache: a *cold* pass (empty build and compile caches, `--cold-parallel`
evaluations at a time, so cold builds overlap as they would in a pool) and a *warm* pass, one at a
time, whose timings are the ones to quote. Each row gives both wall times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cuda_agent.evaluate import EvalConfig, evaluate, load_candidate
from cuda_agent.tasks import load_task


def pairs(args) -> list[tuple[str, Path, Path]]:
    out = []
    if args.examples:
        from cuda_agent.examples import list_examples

        for ex in list_examples():
            for form, path in ex.candidates(args.device).items():
                out.append((f"{ex.name}/{form}", ex.task, path))
    if args.solutions:
        for sol in sorted(Path(args.solutions).glob("level*/*.py")):
            task = Path(args.kernelbench) / sol.parent.name / sol.name
            out.append((f"{sol.parent.name}/{sol.stem}", task, sol))
    return out


def one(name, task, cand, cfg) -> dict:
    t0 = time.monotonic()
    res = evaluate(load_task(task), load_candidate(cand), cfg)
    return {"case": name, "wall_s": time.monotonic() - t0, "result": res.to_json()}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--examples", action="store_true")
    p.add_argument("--kernelbench", default="../shared/kernelbench")
    p.add_argument("--solutions")
    p.add_argument("--device", default="cuda")
    p.add_argument("--cold-parallel", type=int, default=1)
    p.add_argument("--skip-cold", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--out", default="eval_pairs.json")
    args = p.parse_args()
    cases = [c for c in pairs(args) if args.only in c[0]]
    cfg = EvalConfig(device=args.device)
    report: dict = {"cold": {}, "warm": {}}
    if not args.skip_cold:
        with ThreadPoolExecutor(args.cold_parallel) as pool:
            for r in pool.map(lambda c: one(*c, cfg), cases):
                report["cold"][r["case"]] = r
                print(f"cold {r['case']}: {r['wall_s']:.1f} s reward {r['result']['reward']}", flush=True)
    for c in cases:
        r = one(*c, cfg)
        report["warm"][r["case"]] = r
        print(f"warm {r['case']}: {r['wall_s']:.1f} s reward {r['result']['reward']}", flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    table = Table(title=f"{args.device}: cold pass x{args.cold_parallel} parallel, warm pass sequential")
    for col in ("case", "cold s", "cold load s", "warm s", "warm load s", "eager ms", "compile ms",
                "cand ms", "x eager", "x compile", "reward", "reasons"):
        table.add_column(col)
    for name, w in report["warm"].items():
        res, cold = w["result"], report["cold"].get(name)
        t = res["times_ms"]
        ms = lambda k: f"{t[k]['median']:.4g}" if t.get(k) else "-"  # noqa: E731
        table.add_row(
            name, f"{cold['wall_s']:.1f}" if cold else "-",
            f"{cold['result']['phases_s'].get('load', 0) + cold['result']['phases_s'].get('build', 0):.1f}" if cold else "-",
            f"{w['wall_s']:.1f}", f"{res['phases_s'].get('load', 0) + res['phases_s'].get('build', 0):.2f}",
            ms("eager"), ms("compile"), ms("candidate"),
            f"{res['speedup_eager']:.2f}" if res["speedup_eager"] else "-",
            f"{res['speedup_compile']:.2f}" if res["speedup_compile"] else "-",
            str(res["reward"]), ",".join(r["code"] for r in res["reasons"]) or "-")
    Console(width=200).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
