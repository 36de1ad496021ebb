"""How the judge's weights rule (evaluate/weights.py) will treat each staged corpus kernel, on the CPU,
without building anything: Model and ModelNew are built under one seed (ModelNew's extension
builds are replaced by stubs; nothing is called), and the judge's matching decides where the
re-drawn reference weights go.

    python benchmarks/diagnostics/corpus_weights.py [--only-correct] [--runs NAME,..] [--json OUT] [--memory-gb N]

Per kernel: `name` (ModelNew has Model's state_dict names: the weights are loaded by name),
`value` (matched by value; `copied` of Model's learned tensors reach ModelNew), `same_seed`
(ModelNew holds some random-init tensor of Model nowhere, fused or reshaped, or a copy of one in
another layout, `copies`: those keep their default init, KernelBench's rule), or `unbuildable`
(ModelNew's __init__ needs the GPU or the extension here). `ignored` lists the learned tensors of Model that will be re-drawn but reach no
tensor of ModelNew (a kernel that does not use them fails: right for a cheat, wrong for a kernel
that derives them from other state). Run after `corpus.py stage`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from cuda_agent.evaluate import weights  # noqa: E402
from cuda_agent.evaluate.transport import dtype_name  # noqa: E402

STAGED = ROOT / ".corpus"


class _Stub:
    """What a stubbed load_inline returns: any attribute is a function that must not be called."""

    def __getattr__(self, name: str):
        def missing(*a, **k):
            raise RuntimeError(f"extension function {name} called on the CPU check")
        return missing


def _module(path: Path, name: str, source: str | None = None):
    mod = type(sys)(name)
    mod.__file__ = str(path)
    code = compile(source if source is not None else path.read_text(), str(path), "exec")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(code, mod.__dict__)
    return mod


def check(task_path: Path, kernel_path: Path, seed: int = 1234) -> dict:
    import torch.utils.cpp_extension as ext

    task = _module(task_path, "corpus_task")
    torch.manual_seed(seed)
    init = task.get_init_inputs()
    model = task.Model(*init).eval()
    default = {k: v.detach().clone() for k, v in model.state_dict().items()}
    learned = weights.learned(model)
    saved = ext.load_inline, ext.load
    ext.load_inline = ext.load = lambda *a, **k: _Stub()
    try:
        cand = _module(kernel_path, "corpus_model_new")
        torch.manual_seed(seed)
        new = cand.ModelNew(*init).eval()
    except Exception as exc:  # noqa: BLE001 - a kernel that needs the GPU or its extension in __init__
        return {"rule": "unbuildable", "why": f"{type(exc).__name__}: {str(exc)[:120]}"}
    finally:
        ext.load_inline, ext.load = saved
    own = {k: v.detach() for k, v in weights.distinct(new.state_dict())[0].items()}  # as the runner sends it
    ref = weights.distinct(model.state_dict())[0]
    specs = {k: {"shape": list(v.shape), "dtype": dtype_name(v.dtype)} for k, v in own.items()}
    m = weights.match_by_name(ref, specs)
    fused, copied = [], {}
    random_init = weights.random_init_names(learned, default)
    if m is None:
        m = weights.match_by_value({k: default[k] for k in ref}, own)
        fused, copied = weights.fused_or_copied(m, own, default, random_init)
    reached = set(m.pairs.values())
    rule = "same_seed" if fused or copied else m.by
    redrawn = set(learned) - (set(random_init) if rule == "same_seed" else set())
    return {"rule": rule, "learned": len(learned), "copied": len([k for k in reached if k in learned]),
            "ignored": sorted(redrawn - reached), "fused": fused[:6], "copies": dict(list(copied.items())[:6]),
            "extra": m.extra[:6]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--staged", type=Path, default=STAGED)
    ap.add_argument("--only-correct", action="store_true", help="only kernels KernelBench judged correct")
    ap.add_argument("--runs", default=None, help="only these corpus runs, comma-separated")
    ap.add_argument("--json", type=Path, default=None, help="write one JSON line per kernel here")
    ap.add_argument("--memory-gb", type=float, default=16.0,
                    help="address space of this process at most (default 16): a task whose Model does not fit "
                    "on this machine is reported as task_unbuildable instead of the kernel's OOM killer ending the run")
    args = ap.parse_args()
    import resource
    limit = int(args.memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sel = args.staged / "selection.jsonl"
    if not sel.is_file():
        print(f"corpus_weights.py: {sel} not found: run `python benchmarks/corpus.py select && "
              "python benchmarks/corpus.py stage` first", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in sel.read_text().splitlines() if line.strip()]
    if args.only_correct:
        rows = [r for r in rows if (r["kernelbench"] or {}).get("correct")]
    if args.runs:
        rows = [r for r in rows if r["run"] in args.runs.split(",")]
    out, rules = [], Counter()
    for r in rows:
        tasks = {int(p.name.split("_", 1)[0]): p for p in (args.staged / "tasks" / f"level{r['level']}").glob("*.py")}
        kernel = args.staged / "solutions" / r["run"] / f"level_{r['level']}_problem_{r['problem']}_sample_0_kernel.py"
        try:
            res = check(tasks[r["problem"]], kernel)
        except Exception as exc:  # noqa: BLE001 - the task itself does not build on the CPU
            res = {"rule": "task_unbuildable", "why": f"{type(exc).__name__}: {str(exc)[:120]}"}
        res = {"run": r["run"], "level": r["level"], "problem": r["problem"],
               "kb_correct": (r["kernelbench"] or {}).get("correct"), **res}
        rules[res["rule"]] += 1
        out.append(res)
        if res.get("ignored"):
            print(f"{r['run']} L{r['level']} P{r['problem']}: {res['rule']}, re-drawn but reaching nothing in "
                  f"ModelNew: {', '.join(res['ignored'][:6])}", flush=True)
    print("rules:", dict(rules))
    print("kernels whose re-drawn tensors reach nothing in ModelNew:", sum(bool(r.get("ignored")) for r in out))
    if args.json:
        args.json.write_text("".join(json.dumps(r) + "\n" for r in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
