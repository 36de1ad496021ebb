"""Does running nvcc's host and device chains side by side (worker/nvcc_stages.py) give nvcc's own
result on model-written CUDA sources, and how much sooner?

    python benchmarks/diagnostics/light_headers.py stage          # once: the corpus's CUDA sources to .light/
    python benchmarks/diagnostics/nvcc_stages.py --n 12 [--pch] [--json OUT]

Each of `--n` sources (a seeded sample of the staged corpus) is compiled twice, one after the other
and in alternating order: by nvcc as it is (`--keep` into a folder of its own, so that the object
file names no temporary file) and by `nvcc_stages.compile`, with the flags of this torch's
`load_inline` CUDA compile and, for a source that includes torch/extension.h, the light header in
front (the evaluator's first compile, `light_nvcc.py`). Compared: exit status, output, object file
bytes; timed: each compile. With `--pch`, a third compile also gives the final host compile a
precompiled header of the unit's headers (`worker/nvcc_pch.py`, one folder for the whole run, as an
evaluator's cache): compared with nvcc's object on code, data, relocations and symbols, the name of
the headers' anonymous namespace made one; timed apart for the compiles that built a header and
those that used one. Works without a GPU (nvcc and torch's headers are enough): a CPU build
of torch gets `TORCH_CUDA_ARCH_LIST` (default 9.0a), the CUDA toolkit's folder for CUDA_HOME, and
an empty stand-in for the one generated header of c10/cuda that it lacks.

Last run (2-core development machine, 2026-12-04, `--n 12` and `--n 24 --seed 1`): 36 of 36 sources
got nvcc's exit status, output and object file; the 20 that compiled took 0.72 of nvcc's time
(median 25.7 s against 18.5 s for the 24); docs/measured/2026-12-04-fresh-h200.md, last section.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).parent))


def flags(work: Path) -> tuple[str, list[str], list[str]]:
    """nvcc and the flags of this torch's `load_inline` CUDA compile (a probe build's ninja file)."""
    import torch.utils.cpp_extension as ce

    from light_headers import nvcc_command

    if ce.CUDA_HOME is None:  # a CPU build of torch: it still writes the file
        found = shutil.which("nvcc")
        homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
                 str(Path(found).resolve().parents[1]) if found else None]
        ce.CUDA_HOME = next((h for h in homes if h and Path(h, "include", "cuda_runtime.h").is_file()), None)
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0a")
    try:
        nvcc, pre, post = nvcc_command(work)
    except Exception:  # noqa: BLE001  (the link fails without CUDA libraries; the file is written first)
        if not (work / "build.ninja").is_file():
            raise
        values = dict(line.partition(" = ")[::2] for line in (work / "build.ninja").read_text().splitlines()
                      if " = " in line)
        nvcc, pre, post = (values.get("nvcc_from_env") or values["nvcc"], shlex.split(values["cuda_cflags"]),
                           shlex.split(values.get("cuda_post_cflags", "")))
    macros = Path(ce.include_paths()[0], "c10", "cuda", "impl", "cuda_cmake_macros.h")
    if not macros.is_file():  # a CPU build of torch lacks this generated header of c10/cuda
        stub = work / "cpu-torch" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text("#pragma once\n")
        pre = [*pre, "-I", str(work / "cpu-torch")]
    return nvcc, pre, post


def normalised(obj: Path) -> str | None:
    """An object's code, data, relocations and symbols, the anonymous namespaces' names made one."""
    if not obj.is_file():
        return None
    text = "".join(subprocess.run(["objdump", *how, str(obj)], capture_output=True, text=True).stdout
                   for how in (["-d", "--no-show-raw-insn", "-s"], ["-r"], ["-t"]))
    text = text.replace(str(obj), "OBJ")
    return "\n".join(sorted(re.sub(r"\d*_GLOBAL__N__\w+", "ANON", text).splitlines()))


def both(src: Path, work: Path, nvcc: str, pre: list[str], post: list[str], split_first: bool,
         pch: Path | None = None) -> dict:
    from cuda_agent.evaluate.worker import light_nvcc, nvcc_stages
    from cuda_agent.evaluate.worker.inline_build import LIGHT_HEADERS

    shim = ["-I", str(LIGHT_HEADERS)] if light_nvcc.wants_light(str(src)) else []
    row: dict = {"name": src.stem, "light": bool(shim)}

    def as_is() -> None:
        keep = Path(tempfile.mkdtemp(dir=work))
        out = work / f"{src.stem}.nvcc.o"
        t0 = time.monotonic()
        done = subprocess.run([nvcc, "--keep", "--keep-dir", str(keep), *shim, *pre, "-c", str(src), "-o", str(out),
                               *post], capture_output=True)
        row["nvcc_s"] = round(time.monotonic() - t0, 2)
        row["nvcc"] = (done.returncode, done.stdout + done.stderr, out.read_bytes() if out.is_file() else None)
        shutil.rmtree(keep, ignore_errors=True)

    def split() -> None:
        out = work / f"{src.stem}.split.o"
        t0 = time.monotonic()
        done = nvcc_stages.compile([nvcc], [*shim, *pre, "-c", str(src), "-o", str(out), *post])
        row["split_s"] = round(time.monotonic() - t0, 2)
        row["split"] = None if done is None else (done.returncode, done.stdout + done.stderr,
                                                  out.read_bytes() if out.is_file() else None)

    def with_pch() -> None:
        out = work / f"{src.stem}.pch.o"
        t0 = time.monotonic()
        done = nvcc_stages.compile([nvcc], [*shim, *pre, "-c", str(src), "-o", str(out), *post], str(pch))
        row["pch_s"] = round(time.monotonic() - t0, 2)
        row["header"] = None if done is None else done.header
        row["pch"] = None if done is None else (done.returncode, done.stdout + done.stderr, normalised(out))

    for f in ((split, as_is) if split_first else (as_is, split)):
        f()
    if pch is not None:
        with_pch()
        c = row.pop("pch")
        plain = row["nvcc"]
        row["pch_same"] = c is not None and (c[0], c[1]) == plain[:2] and c[2] == normalised(work / f"{src.stem}.nvcc.o")
    a, b = row.pop("nvcc"), row.pop("split")
    row["compiled"] = a[0] == 0
    row["used"] = b is not None
    row["same_status"] = b is not None and a[0] == b[0]
    row["same_output"] = b is not None and a[1] == b[1]
    row["same_object"] = b is not None and a[2] == b[2]
    return row


def summary(doc: dict) -> None:
    rows = doc["rows"]
    used = [r for r in rows if r["used"]]
    print(f"\n{len(rows)} sources, one compile at a time ({doc['machine']}):")
    print(f"  split by nvcc_stages: {len(used)} (the rest were left to nvcc as it is)")
    for key in ("same_status", "same_output", "same_object"):
        print(f"  {key}: {sum(r[key] for r in used)} of {len(used)}")
    for compiled in (True, False):
        group = [r for r in used if r["compiled"] is compiled]
        if group:
            a, b = statistics.median(r["nvcc_s"] for r in group), statistics.median(r["split_s"] for r in group)
            print(f"  {'compiled' if compiled else 'did not compile'} ({len(group)}): nvcc {a:.1f} s, "
                  f"side by side {b:.1f} s (median; {b / a:.2f} of nvcc's)")
    with_pch = [r for r in rows if "pch_s" in r]
    if with_pch:
        print(f"  with the final compile's precompiled header: same status, output and object but for the "
              f"anonymous namespace's name: {sum(r['pch_same'] for r in with_pch)} of {len(with_pch)}")
        for header in ("used", "built", "not used", ""):
            group = [r for r in with_pch if r["header"] == header and r["compiled"]]
            if group:
                a, c = statistics.median(r["nvcc_s"] for r in group), statistics.median(r["pch_s"] for r in group)
                print(f"  header {header or 'none (too small, or not of the known shape)'} ({len(group)} compiled): "
                      f"nvcc {a:.1f} s, side by side with it {c:.1f} s (median; {c / a:.2f} of nvcc's)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", type=Path, default=ROOT / ".light", help="light_headers.py stage's folder")
    ap.add_argument("--n", type=int, default=12, help="sources (a seeded sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pch", action="store_true", help="also compile with the final compile's precompiled header")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--summary", type=Path, help="print the summary of a --json file again")
    args = ap.parse_args()
    if args.summary:
        summary(json.loads(args.summary.read_text()))
        return 0
    index_file = args.stage / "index.json"
    if not index_file.is_file():
        sys.exit(f"{index_file} not found: run `python benchmarks/diagnostics/light_headers.py stage` first")
    index = json.loads(index_file.read_text())
    sample = random.Random(args.seed).sample(index, min(args.n, len(index)))
    work = Path(tempfile.mkdtemp(prefix="nvcc-stages-"))
    nvcc, pre, post = flags(work / "probe")
    print(f"nvcc: {nvcc}\nflags: {' '.join(pre + post)[:300]}", flush=True)
    rows = []
    for i, r in enumerate(sample):
        row = both(args.stage / f"{r['name']}.cu", work, nvcc, pre, post, split_first=bool(i % 2),
                   pch=work / "pch" if args.pch else None)
        rows.append(row)
        print(f"[{i + 1}/{len(sample)}] {row['name']}: compiled={row['compiled']} nvcc {row['nvcc_s']} s, "
              f"side by side {row.get('split_s')} s, same status/output/object: "
              f"{row['same_status']}/{row['same_output']}/{row['same_object']}"
              + (f"; with the header ({row['header'] or 'none'}) {row['pch_s']} s, same: {row['pch_same']}"
                 if args.pch else ""), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"machine": os.uname().nodename, "cores": os.cpu_count(),
                                             "rows": rows}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    summary({"machine": f"{os.cpu_count()} cores", "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
