"""Which corpus CUDA units compile with each light torch/extension.h, and do they mean the same?

    python benchmarks/diagnostics/light_headers.py stage                   # once: corpus sources to .light/
    python benchmarks/diagnostics/tensor_header.py --n 80 --json out.json  # here (nvcc; no GPU needed)

For a seeded sample of the staged CUDA sources, each as `load_inline` writes it (torch's
<torch/types.h>, cuda.h and cuda_runtime.h included first), nvcc's host front end (`nvcc --cuda`: preprocessing
and cudafe++) runs with each of the evaluator's light headers first on the include path
(`tensor_headers`, then `light_headers`: worker/light_nvcc.py), timed. For each unit that compiles
with both, two checks that the lighter header changed nothing of what the unit does:
- host: cudafe++'s two outputs compiled by g++ -O0 (no inlining), and every function both objects
  define compared instruction by instruction, with the functions each calls (an overload or template
  that resolved otherwise would call another function);
- device: the PTX of both (`nvcc -ptx`) compared, comments aside.
Printed last: how many compiled with each header, the median front-end time of each, the units one
header compiled and the other did not (with the first error), and the two checks' counts.

Last run (2-core machine, torch 2.13's headers, 2026-12-05, `--n 40 --seed 3`): 32 of 40 compiled
with both headers, 8 with neither (cuBLAS headers absent there, or their own errors); front end
median 7.8 s with the tensor header against 11.3 s (2 at once); 30,438 host functions compared, none
differing; PTX the same for 32 of 32. The same with torch 2.11's headers (the H200's torch; its
wheel's torch/include, `--torch-include DIR`): 32 of 40, 30,471 functions, none differing, PTX the
same 32 of 32, front end median 8.0 s against 11.9 s. Both runs compiled the sources without
load_inline's first lines; with them (torch 2.13, the same sample): the same 32 units, 30,438
functions, none differing, PTX the same 32 of 32, 8.1 s against 11.7 s.

Flags are torch's for a `load_inline` CUDA build as far as they matter to the front end (defines,
include folders, -std, sm_90). Sources that include cuBLAS or ATen's CUDA headers are left out where
nvcc's include folder lacks cuBLAS's headers (the 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "src" / "cuda_agent" / "evaluate" / "worker"
HEADERS = {"tensor": WORKER / "tensor_headers", "light": WORKER / "light_headers"}
# What cpp_extension.load_inline writes ahead of every CUDA source (its `no_implicit_headers` off)
LOAD_INLINE_PREFIX = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
NEEDS_CUDA_LIBRARIES = re.compile(r"cublas|cusparse|CUDAContext|CUDAGuard|c10/cuda|ATen/cuda")


def flags(torch_include: Path | None = None) -> list[str]:
    """nvcc's flags; `torch_include` is another torch's include folder (its wheel's torch/include)."""
    import torch.utils.cpp_extension as ce

    roots = [str(torch_include), str(torch_include / "torch" / "csrc" / "api" / "include")] if torch_include \
        else ce.include_paths()
    incs = [w for p in [*roots, sysconfig.get_paths()["include"]] for w in ("-isystem", p)]
    return [*incs, "-DTORCH_EXTENSION_NAME=ext", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1",
            "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr", "-O3", "-std=c++17",
            "--compiler-options", "-fPIC", "-gencode", "arch=compute_90,code=sm_90"]


def has_cublas() -> bool:
    """Whether nvcc finds cuBLAS's headers (main has checked that nvcc is there)."""
    probe = subprocess.run(["nvcc", "-E", "-x", "cu", "-"], input="#include <cublas_v2.h>\n", capture_output=True,
                           text=True)
    return probe.returncode == 0


def functions(obj: Path) -> dict[str, list[str]]:
    """Each function `obj` defines (global, weak or local): its instructions, addresses left out,
    with the symbols its relocations name (what it calls and loads)."""
    defined = {parts[2] for parts in (line.split() for line in subprocess.run(
        ["nm", "--defined-only", str(obj)], capture_output=True, text=True, check=True).stdout.splitlines())
        if len(parts) == 3 and parts[1] in "TtW" and not parts[2].startswith("_GLOBAL__sub_I_")}
    out: dict[str, list[str]] = {}
    current = None
    for line in subprocess.run(["objdump", "-dr", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head or line.startswith("Disassembly of section"):
            current = head.group(1) if head else None
            if current:
                out.setdefault(current, [])
        elif current and line.strip():
            line = re.sub(r"^\s*[0-9a-f]+:\s*", "", line)
            line = re.sub(r"\.(rodata|LC)\S*", ".rodata", line)  # where the unit's strings landed
            out[current].append(re.sub(r"[0-9a-f]+ <[^>]*>", "<jump>", line))
    return {name: code for name, code in out.items() if name in defined}


def front_end(src: Path, header: str, work: Path, base: list[str]) -> dict:
    out = work / f"{src.stem}.{header}.ii"
    t0 = time.monotonic()
    done = subprocess.run(["nvcc", "-I", str(HEADERS[header]), *base, "--cuda", str(src), "-o", str(out)],
                          capture_output=True, text=True)
    errors = re.findall(r"error: (.*)", done.stderr)
    return {"ok": done.returncode == 0, "seconds": round(time.monotonic() - t0, 2),
            "first_error": (errors[0] if errors else done.stderr[-200:])[:200] if done.returncode else None}


def same_meaning(src: Path, work: Path, base: list[str]) -> dict:
    """Host: the -O0 objects of both cudafe++ outputs, function by function. Device: the PTX of both."""
    objects, ptx = {}, {}
    for header in HEADERS:
        ii, obj = work / f"{src.stem}.{header}.ii", work / f"{src.stem}.{header}.o"
        subprocess.run(["g++", "-O0", "-std=c++17", "-fPIC", "-w", "-c", "-x", "c++", str(ii), "-o", str(obj)],
                       check=True, capture_output=True)
        objects[header] = functions(obj)
        p = work / f"{src.stem}.{header}.ptx"
        subprocess.run(["nvcc", "-I", str(HEADERS[header]), *base, "-ptx", str(src), "-o", str(p)], check=True,
                       capture_output=True)
        ptx[header] = re.sub(r"//[^\n]*", "", p.read_text())
    a, b = objects["tensor"], objects["light"]
    common = set(a) & set(b)
    return {"functions_compared": len(common), "functions_differing": sorted(n for n in common if a[n] != b[n]),
            "ptx_same": ptx["tensor"] == ptx["light"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", type=Path, default=ROOT / ".light", help="light_headers.py stage's folder")
    ap.add_argument("--n", type=int, default=80, help="sources (a seeded sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--torch-include", type=Path, metavar="DIR",
                    help="another torch's headers (torch/include from its wheel) instead of the installed torch's")
    args = ap.parse_args()
    if args.torch_include and not (args.torch_include / "ATen" / "core" / "Tensor.h").is_file():
        sys.exit(f"{args.torch_include}: no ATen/core/Tensor.h there; name a torch wheel's torch/include folder")
    if not (args.stage / "index.json").is_file():
        sys.exit(f"{args.stage / 'index.json'} not found: run `python benchmarks/diagnostics/light_headers.py stage`")
    if shutil.which("nvcc") is None:
        sys.exit("nvcc not found on PATH: this diagnostic compiles with it (no GPU needed)")
    sources = sorted(args.stage.glob("*.cu"))
    if not has_cublas():
        sources = [s for s in sources if not NEEDS_CUDA_LIBRARIES.search(s.read_text())]
    sources = random.Random(args.seed).sample(sources, min(args.n, len(sources)))
    base = flags(args.torch_include)
    work = Path(tempfile.mkdtemp(prefix="tensor-header-"))
    done = 0

    def one(staged: Path) -> dict:
        nonlocal done
        src = work / staged.name  # the unit as load_inline writes it
        src.write_text(LOAD_INLINE_PREFIX + staged.read_text())
        row = {"name": src.stem, **{h: front_end(src, h, work, base) for h in HEADERS}}
        if row["tensor"]["ok"] and row["light"]["ok"]:
            row.update(same_meaning(src, work, base))
        for f in work.glob(f"{src.stem}.*"):
            f.unlink()
        done += 1
        print(f"[{done}/{len(sources)}] {src.stem}: tensor {row['tensor']['ok']} {row['tensor']['seconds']} s, "
              f"light {row['light']['ok']} {row['light']['seconds']} s"
              + (f", {row['functions_compared']} functions, {len(row['functions_differing'])} differ, "
                 f"PTX {'same' if row['ptx_same'] else 'DIFFERS'}" if "ptx_same" in row else ""), flush=True)
        return row

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, sources))
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"n": len(rows), "jobs": args.jobs, "rows": rows}, indent=1))
    print(f"\n{len(rows)} CUDA sources, {args.jobs} at once:")
    for h in HEADERS:
        ok = [r[h]["seconds"] for r in rows if r[h]["ok"]]
        print(f"  {h}: compiled {len(ok)}, front end median {statistics.median(ok) if ok else 0:.1f} s")
    for r in rows:
        if r["tensor"]["ok"] != r["light"]["ok"]:
            failed = "tensor" if not r["tensor"]["ok"] else "light"
            print(f"  only with {'light' if failed == 'tensor' else 'tensor'}: {r['name']}: {r[failed]['first_error']}")
    both = [r for r in rows if "ptx_same" in r]
    print(f"  compiled with both: {len(both)}; host functions compared {sum(r['functions_compared'] for r in both)}, "
          f"units with a differing one {sum(1 for r in both if r['functions_differing'])}; "
          f"PTX the same {sum(1 for r in both if r['ptx_same'])} of {len(both)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
