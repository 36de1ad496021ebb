"""Does the race check of the correctness trials (worker/runner.py, StreamCheck) hold on this GPU? Prints, for
the hold kernel and for forwards that leave work on an unjoined stream or join it back, how often
a race was reported over N tries, with the hold on and off.

    python benchmarks/diagnostics/stream_check.py [--tries 20]
    python benchmarks/diagnostics/stream_check.py --candidate KERNEL.py --task TASK.py [--tries 5]

What it measures:
- the hold's compile time (NVRTC, once per process) and how long one hold keeps the SMs (events);
- whether a kernel launched on another stream right after the hold waits for it;
- detection of an unjoined side stream (must be every try) and of a joined one (must be none), for
  a small and a large output.

    python benchmarks/diagnostics/stream_check.py --evaluator --candidate KERNEL.py --task TASK.py [--tries 2]

With --evaluator: the candidate through the whole evaluator (an Evaluator, as bench runs it), for
each variant of `--variants` (stream_check, ipc_segments), `--tries` evaluations, `--jobs` at a
time; a line per variant with the verdicts' codes. Run it under CUDA_LAUNCH_BLOCKING=1 too (the
workers inherit CUDA_*): where the check's fault needs the evaluator's processes, this says which
part of them.

With --candidate and --task (a KernelBench task file and a ModelNew file for it, e.g. a corpus
kernel): an honest kernel through StreamCheck.call, each of hold off/on x snapshot off/on in a
process of its own (a fault is sticky), its output compared with the reference's each try; a
line per variant: tries passed, races reported, or the error that ended the process.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


def main() -> int:
    import torch

    from cuda_agent.evaluate.worker import runner as worker
    from cuda_agent.evaluate.timing import Timer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--candidate", type=Path, default=None, help="a ModelNew file (with --task)")
    ap.add_argument("--task", type=Path, default=None, help="its KernelBench task file")
    ap.add_argument("--evaluator", action="store_true", help="through an Evaluator (with --candidate, --task)")
    ap.add_argument("--jobs", type=int, default=1, help="with --evaluator: evaluations at once")
    ap.add_argument("--variants", default="01,11,10", help="with --evaluator: stream_check,ipc_segments "
                    "pairs of 0/1, comma-separated (default: off+ipc, on+ipc, on+no ipc)")
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # hold,snapshot in 0/1: one child
    args = ap.parse_args()
    if args.candidate or args.task or args.evaluator:
        if not (args.candidate and args.task):
            ap.error("--candidate and --task go together")
        if args.evaluator:
            if any(len(v) != 2 or set(v) - {"0", "1"} for v in args.variants.split(",")):
                ap.error(f"--variants {args.variants!r}: give pairs of 0/1 (stream_check, ipc_segments), "
                         "comma-separated, e.g. 01,11,10")
            return through_evaluator(args)
        return variant(args) if args.variant else candidate(args)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    t0 = time.perf_counter()
    check = worker.StreamCheck(dev)
    print(f"hold compiled: {check.hold_fn is not None} in {time.perf_counter() - t0:.2f} s")
    if check.hold_fn is not None:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(check.stream):
            s.record()
            check.hold_fn(check.hold_in, ns=worker.STREAM_HOLD_MS * 1e6 / worker.HOLD_ELEMENTS_PER_THREAD)
            e.record()
        # a small kernel on a third stream, launched right after the hold
        other = torch.cuda.Stream()
        x = torch.randn(1 << 14, device=dev)
        torch.relu(x)  # loaded before it is timed
        torch.cuda.synchronize()
        done = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(check.stream):
            s.record()
            check.hold_fn(check.hold_in, ns=worker.STREAM_HOLD_MS * 1e6 / worker.HOLD_ELEMENTS_PER_THREAD)
            e.record()
        with torch.cuda.stream(other):
            torch.relu(x)
            done.record()
        torch.cuda.synchronize()
        print(f"hold: {s.elapsed_time(e):.2f} ms; a kernel on another stream finished {s.elapsed_time(done):.2f} ms "
              "after the hold began")
    timer = Timer(dev)
    side = torch.cuda.Stream()

    def unjoined(x):
        out = torch.empty_like(x)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.abs(x, out=out)
        return out

    def joined(x):
        out = unjoined(x)
        torch.cuda.current_stream().wait_stream(side)
        return out

    fails = 0
    for numel in (64 * 256, 1 << 24):
        for hold in (True, False):
            fn = check.hold_fn
            if not hold:
                check.hold_fn = None
            for name, forward in (("unjoined", unjoined), ("joined", joined)):
                caught = 0
                for _ in range(args.tries):
                    x = torch.randn(numel, device=dev)  # fresh inputs, as every trial has
                    try:
                        check.call(timer, forward, [x])
                    except worker.Failure as f:
                        assert f.code.value == "stream_race", f.code
                        caught += 1
                want = args.tries if name == "unjoined" else 0
                ok = caught == want or not hold
                fails += not ok
                print(f"numel {numel:>9} hold {'on ' if hold else 'off'} {name:9}: race reported "
                      f"{caught}/{args.tries}{'' if ok else '  <-- WRONG'}")
            check.hold_fn = fn
    return 1 if fails else 0


def through_evaluator(args) -> int:
    """A line per (stream_check, ipc_segments) in `--variants`: each evaluation's codes, or
    `correct`. The `--tries` evaluations of a variant go through one Evaluator (warm workers
    forked from its zygote, as bench runs them), `--jobs` at a time."""
    from cuda_agent.evaluate import EvalConfig, Evaluator, load_candidate
    from cuda_agent.tasks import load_task

    task, cand = load_task(args.task), load_candidate(args.candidate)
    for variant in args.variants.split(","):
        stream_check, ipc = (v == "1" for v in variant)
        cfg = EvalConfig(device="cuda", policy="kernelbench", compile_baseline=False,
                         stream_check=stream_check, ipc_segments=ipc)
        t0 = time.perf_counter()
        with Evaluator(cfg, jobs=args.jobs) as ev:
            results = ev.map([(task, cand)] * args.tries)
        verdicts = []
        for res in results:
            verdicts.append("correct" if res.correct else ",".join(r.code.value for r in res.failures))
            if not res.correct:
                print(f"  {res.failures[0].message[-600:]}", flush=True)
        print(f"stream_check {'on ' if stream_check else 'off'} ipc_segments {'on ' if ipc else 'off'} "
              f"jobs {args.jobs}: {' '.join(verdicts)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


def candidate(args) -> int:
    """Each variant in a child process; a line per variant."""
    import subprocess

    bad = 0
    for hold in (0, 1):
        for snap in (0, 1):
            cmd = [sys.executable, __file__, "--candidate", str(args.candidate), "--task", str(args.task),
                   "--tries", str(args.tries), "--variant", f"{hold},{snap}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            last = (proc.stdout.strip().splitlines() or [""])[-1]
            if proc.returncode != 0:
                err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-3:]
                last = f"FAILED (rc {proc.returncode}): {' | '.join(err)}"
                bad += 1
            print(f"hold {'on ' if hold else 'off'} snapshot {'on ' if snap else 'off'}: {last}", flush=True)
    return 1 if bad else 0


def variant(args) -> int:
    import importlib.util

    import torch

    from cuda_agent.evaluate.worker import runner as worker
    from cuda_agent.evaluate.timing import Timer

    hold, snap = (v == "1" for v in args.variant.split(","))

    def module(path: Path, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    task, cand = module(args.task, "task"), module(args.candidate, "model_new")
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs()).to(dev)
    torch.manual_seed(0)
    new = cand.ModelNew(*task.get_init_inputs()).to(dev)
    check, timer = worker.StreamCheck(dev), Timer(dev)
    if not hold:
        check.hold_fn = None
    if not snap:
        check._snapshot = lambda out, caller: []
    passed = races = 0
    for i in range(args.tries):
        torch.manual_seed(i)
        inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        with torch.no_grad():
            want = ref(*inputs)
            try:
                got, _ = check.call(timer, new, inputs)
            except worker.Failure as f:
                races += 1
                print(f"try {i}: {f.code.value}: {str(f)[:200]}", flush=True)
                continue
        torch.cuda.synchronize()
        passed += bool(torch.allclose(got, want, atol=1e-2, rtol=1e-2))
    print(f"{passed}/{args.tries} tries right, {races} race(s) reported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
