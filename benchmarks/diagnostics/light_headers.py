"""Do model-written CUDA units compile with the light torch/extension.h, and how much faster?

    python benchmarks/diagnostics/light_headers.py stage           # here: corpus CUDA sources to .light/
    python benchmarks/diagnostics/light_headers.py run --n 128     # on the GPU machine (carry .light)

`stage` takes every CUDA source of the corpus's `load_inline` kernels (`../shared/corpora/
kernelbench-a100-runs`; the kernel file runs with a `load_inline` that records its arguments and
builds nothing) and KernelBench's verdict of each. `run` builds one ordinary `load_inline` CUDA
extension to learn this torch's nvcc command and flags from its ninja file, then compiles `--n`
sources (a seeded sample) to object files, `--jobs` at once, each through `light_nvcc.py` (the
evaluator's path: the light headers first, tensor then light, as written where both fail), and
`--direct` of them as written only (nvcc alone, as torch would run it), each timed. Printed last: how
many compiled with each light header, how many only as written, how many not at all, set against KernelBench's
`compiled` verdict, and the median times. Every row goes to `--json`.

Last run (H200, 2026-12-04, `--n 48 --direct 12`, cut by the call's limit before its summary; rows
from its progress lines, docs/measured/2026-12-04-fresh-h200.md): 43 of 48 compiled with the light
header (median 30 s, 16 at once), among them all 39 that KernelBench compiled; the other 5 did not
compile either way, and KernelBench had judged none of them compiled. The `direct` compiles (nvcc
alone, flags from the ninja file) all failed after about 50 s, for a reason the run did not keep:
their errors are printed now.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import runpy
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpora" / "kernelbench-a100-runs"
STAGE = ROOT / ".light"
sys.path.insert(0, str(ROOT / "src"))


class _Recorded(Exception):
    pass


def cmd_stage(args: argparse.Namespace) -> int:
    import torch.utils.cpp_extension as ce

    rows = [json.loads(line) for line in (args.corpus / "verdicts.jsonl").read_text().splitlines() if line.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    index = []
    for r in rows:
        got: list[str] = []

        def record(*a, **k):
            src = k.get("cuda_sources", a[2] if len(a) > 2 else None)
            got.append("\n".join(src) if isinstance(src, list) else (src or ""))
            raise _Recorded

        ce.load_inline = record
        try:
            runpy.run_path(str(args.corpus / r["file"]), run_name="staged")
        except BaseException:  # noqa: BLE001  (model-written code: anything may fail; _Recorded is success)
            pass
        if got and got[0]:
            name = f"{r['run']}__l{r['level']}_p{r['problem']}"
            (args.out / f"{name}.cu").write_text(got[0])
            index.append({"name": name, "kernelbench_compiled": (r.get("kernelbench") or {}).get("compiled")})
    (args.out / "index.json").write_text(json.dumps(index, indent=0))
    print(f"staged {len(index)} CUDA sources of {len(rows)} kernels in {args.out}")
    return 0


def nvcc_command(build: Path) -> tuple[str, list[str], list[str]]:
    """The nvcc command and flags of an ordinary `load_inline` CUDA build made here (its ninja file)."""
    from torch.utils.cpp_extension import load_inline

    build.mkdir(parents=True, exist_ok=True)
    load_inline(name="probe_flags", cpp_sources=["void f();"], cuda_sources=["void f() {}"], functions=["f"],
                build_directory=str(build))
    values = {}
    for line in (build / "build.ninja").read_text().splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key in ("nvcc", "nvcc_from_env", "cuda_cflags", "cuda_post_cflags"):
            values[key] = value
    nvcc = values.get("nvcc_from_env", values["nvcc"])
    return nvcc, shlex.split(values["cuda_cflags"]), shlex.split(values["cuda_post_cflags"])


def compile_one(src: Path, out_dir: Path, nvcc: str, pre: list[str], post: list[str], light: bool) -> dict:
    from cuda_agent.evaluate.worker.inline_build import light_nvcc_command

    out = out_dir / f"{src.stem}.{'light' if light else 'direct'}.o"
    compiler = light_nvcc_command(nvcc) if light else nvcc  # the evaluator's ninja file names the former
    cmd = [*shlex.split(compiler), *pre, "-c", str(src), "-o", str(out), *post]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    note = Path(f"{out}.how").read_text(errors="replace") if Path(f"{out}.how").is_file() else ""
    how, _, light_errors = note.partition("\n")
    errors = re.findall(r"error: (.*)", light_errors or done.stderr)
    return {"ok": done.returncode == 0, "how": how or None, "seconds": round(time.monotonic() - t0, 2),
            "first_error": errors[0][:200] if errors else None}


def cmd_run(args: argparse.Namespace) -> int:
    index = json.loads((args.stage / "index.json").read_text())
    rows = random.Random(args.seed).sample(index, min(args.n, len(index)))
    work = Path(tempfile.mkdtemp(prefix="light-"))
    nvcc, pre, post = nvcc_command(work / "probe")
    print(f"nvcc: {nvcc}\nflags: {' '.join(pre + post)[:400]}", flush=True)
    jobs = [(r, True) for r in rows] + [(r, False) for r in rows[:args.direct]]
    done = 0

    def run(job):
        nonlocal done
        r, light = job
        res = compile_one(args.stage / f"{r['name']}.cu", work, nvcc, pre, post, light)
        done += 1
        print(f"[{done}/{len(jobs)}] {r['name']} {'light path' if light else 'direct'}: "
              f"{res['how'] or 'failed'} {res['seconds']} s"
              + (f" ({res['first_error']})" if res["first_error"] else ""), flush=True)
        return {**r, "path": "light" if light else "direct", **res}

    t0 = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run, jobs))
    doc = {"nvcc": nvcc, "n": len(rows), "jobs": args.jobs, "wall_s": round(time.monotonic() - t0, 1),
           "rows": results}
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    summary(doc)
    return 0


def summary(doc: dict) -> None:
    light = [r for r in doc["rows"] if r["path"] == "light"]
    direct = {r["name"]: r for r in doc["rows"] if r["path"] == "direct"}
    print(f"\n{len(light)} CUDA sources through light_nvcc.py ({doc['jobs']} at once, {doc['wall_s']} s):")
    for kb in (True, False, None):
        group = [r for r in light if r["kernelbench_compiled"] is kb]
        if group:
            counts = {k: sum(1 for r in group if (r["how"] or "failed") == k)
                      for k in ("tensor", "light", "as written", "failed")}
            print(f"  KernelBench compiled={kb}: {len(group)}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for how in ("tensor", "light", "as written", "failed"):
        secs = [r["seconds"] for r in light if (r["how"] or "failed") == how]
        if secs:
            print(f"  {how}: median {statistics.median(secs):.1f} s (n={len(secs)})")
    pairs = [(r["seconds"], direct[r["name"]]["seconds"]) for r in light
             if r["name"] in direct and r["how"] in ("tensor", "light")]
    if pairs:
        print(f"  same sources as written only (nvcc alone): median {statistics.median(d for _, d in pairs):.1f} s "
              f"against {statistics.median(l for l, _ in pairs):.1f} s light (n={len(pairs)})")
    disagree = [r["name"] for r in light if r["name"] in direct and r["ok"] != direct[r["name"]]["ok"]]
    print(f"  compiled by one path and not the other: {disagree or 'none'}")
    for r in light:
        if r["how"] not in ("tensor", "light"):
            print(f"  {r['how'] or 'failed'}: {r['name']}: {r.get('first_error')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage", help="the corpus's CUDA sources to --out")
    s.add_argument("--corpus", type=Path, default=CORPUS)
    s.add_argument("--out", type=Path, default=STAGE)
    r = sub.add_parser("run", help="compile a sample of them (GPU machine: nvcc, CUDA libraries' headers)")
    r.add_argument("--stage", type=Path, default=STAGE)
    r.add_argument("--n", type=int, default=128, help="sources to compile (a seeded sample)")
    r.add_argument("--direct", type=int, default=32, help="of them, also compiled as written only")
    r.add_argument("--jobs", type=int, default=16)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", type=Path)
    s2 = sub.add_parser("summary", help="print the summary of a --json file again")
    s2.add_argument("file", type=Path)
    args = ap.parse_args()
    if args.cmd == "summary":
        summary(json.loads(args.file.read_text()))
        return 0
    return cmd_stage(args) if args.cmd == "stage" else cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
