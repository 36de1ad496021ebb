"""Where does the spread of a timed sub-millisecond call come from? A diagnostic for the [speed]
stability target: the same workloads timed by several protocols, each in 5 fresh processes (as 5
evaluations would), printing per protocol the spread inside one process (IQR / median of the batch
means) and between processes (max / min of their medians, for several estimators).

    python benchmarks/timing_noise.py [--procs 5] [--batches 150] [--workloads matmul,relu] [--pin]
        [--protocols harness,spin,...]

Protocols (each is busy work before the call, a clock, and the inputs the calls use):
- `harness` is the evaluator's (`worker.timed_call`: L2 flush, `Timer.touch`, host clock around the
  call and a device-wide synchronize; `touch` was a trivial kernel until this diagnostic showed the
  spin's effect, and is now two bf16 2048x2048 products into a fixed buffer);
- `events`: the same with CUDA events around the call (what the GPU itself took);
- `spin`: four TF32 1024x1024 products before the call instead, each into a fresh output (the
  evaluator's `EvalConfig.touch="tf32"`; with it a 0.4 ms TF32 matmul's median varied 0.3-1.0%
  between processes, against 0.6-5.4% for `harness`, on one H200 on 2026-12-01); `spin_bf16`,
  `spin_out` and `touch_tf32` change one thing of it at a time: bf16 instead of TF32; a fixed
  output buffer; the touch's size (two 2048x2048 products) in TF32; `touch_fresh` is the touch's
  work on random values into fresh outputs;
- `ring` cycles batch by batch through 6 sets of input buffers allocated at different places, and
  `one` (host clock) and `one_ev` (events) call every call of a batch on the same buffers: is the
  spread between processes a matter of where the buffers lie? (On 2026-12-01: no, all three varied
  like `harness`.)
- `fresh` and `judged` model what the evaluator does between a candidate's timed calls and the bare
  loop does not: every call's inputs get new random values first, written in this process
  (`fresh`) or, as the evaluator's judge does, by another process through CUDA IPC (`judged`: a
  context switch to it and back before each call). (On 2026-12-01 the evaluator's matmul spread
  5-7% with either touch, where `spin` held the bare loop under 1%.)

Each process's CPU at the end is shown beside its median (`far`: not on the GPU's NUMA node), and
`--pin` runs every process on the GPU's node (`EvalConfig.pin_cpus` in the evaluator): is the spread
between processes a matter of which socket times the launches and synchronizes?
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ("gelu", "matmul", "relu")
# protocol: (busy work before each call, clock, inputs: which buffers, refilled by whom)
PROTOCOLS = {
    "harness": ("bf16", "host", "args"), "events": ("bf16", "events", "args"),
    "spin": ("tf32", "host", "args"), "spin_bf16": ("bf16_1024x4", "host", "args"),
    "spin_out": ("tf32_1024x4_out", "host", "args"), "touch_tf32": ("tf32_2048x2_out", "host", "args"),
    "touch_fresh": ("bf16_2048x2", "host", "args"),
    "ring": ("bf16", "host", "ring"), "one": ("bf16", "host", "one"), "one_ev": ("bf16", "events", "one"),
    "fresh": ("bf16", "host", "fresh"), "judged": ("bf16", "host", "judged"),
    "judged_spin": ("tf32", "host", "judged"),
}


def judge(inbox, outbox) -> None:
    """The other process of `judged`: holds the inputs (shared through CUDA IPC) and, for each index
    it is sent, writes new random values into that input and waits for the device; None ends it."""
    import torch

    inputs = inbox.get()
    while (i := inbox.get()) is not None:
        inputs[i].normal_()
        if inputs[i].is_cuda:
            torch.cuda.synchronize()
        outbox.put(i)


def busy(kind: str, timers: dict, mats: dict, sync) -> None:
    """The busy work before a timed call: a Timer's touch (`bf16`, `tf32`: EvalConfig.touch), or
    `DTYPE_NxK[_out]`: K products of an NxN matrix of random values with itself in TF32 (float32
    with TF32 on) or bf16, each into a fresh output or, with `_out`, into the same buffer; then a
    wait for the device. `mats` keeps the matrices made on first use, by kind."""
    import torch

    if kind in timers:
        timers[kind].touch()
        return
    parts = kind.split("_")
    n, k = (int(x) for x in parts[1].split("x"))
    if kind not in mats:
        dtype = torch.float32 if parts[0] == "tf32" else torch.bfloat16
        device = next(iter(timers.values())).device
        a = torch.randn(n, n, device=device, generator=torch.Generator(device).manual_seed(0)).to(dtype)
        mats[kind] = (a, torch.empty_like(a) if parts[-1] == "out" else None)
    a, out = mats[kind]
    for _ in range(k):
        if out is None:
            a @ a
        else:
            torch.mm(a, a, out=out)
    sync()


def child(workload: str, batches: int, calls: int, protocols: list[str]) -> dict:
    import torch

    from cuda_agent.evaluate.config import TOUCHES
    from cuda_agent.evaluate.timing import Timer

    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    timers = {t: Timer(dev, t) for t in TOUCHES}  # the evaluator's touches
    timer = timers["bf16"]
    if workload == "gelu":  # about 0.2 ms: tanh-GELU on 32M floats
        xs = [torch.randn(4096, 8192, device=dev) for _ in range(calls)]

        def fn(x):
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x.pow(3))))
        args = [(x,) for x in xs]
    elif workload == "matmul":  # about 0.4 ms with TF32
        a = [torch.randn(4096, 4096, device=dev) for _ in range(calls)]
        b = torch.randn(4096, 4096, device=dev)
        fn = torch.matmul
        args = [(x, b) for x in a]
    else:  # about 3 ms: relu over 1.6G floats... scaled down to 0.8 ms
        xs = [torch.randn(16384, 16384, device=dev) for _ in range(calls)]
        fn = torch.relu
        args = [(x,) for x in xs]
    ring = [[tuple(t.clone() for t in arg) for arg in args] for _ in range(6)]  # 6 more placements
    mats: dict = {}  # the busy work's matrices
    helper = None
    if any(PROTOCOLS[p][2] == "judged" for p in protocols):
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        helper = ctx.Process(target=judge, args=(inbox, outbox), daemon=True)
        helper.start()
        inbox.put([arg[0] for arg in args])  # through CUDA IPC: the helper writes this process's buffers
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one(i: int, arg, protocol: str) -> float:
        work, clock, inputs = PROTOCOLS[protocol]
        if inputs == "fresh":
            arg[0].normal_()
        elif inputs == "judged":
            inbox.put(i)
            outbox.get()
        timer.flush()
        busy(work, timers, mats, torch.cuda.synchronize)
        with torch.no_grad():
            if clock == "events":
                start.record()
                fn(*arg)
                end.record()
                torch.cuda.synchronize()
                return start.elapsed_time(end)
            t0 = time.perf_counter()
            fn(*arg)
            torch.cuda.synchronize()
            return (time.perf_counter() - t0) * 1e3

    for proto in protocols:  # warm-up
        for i, arg in enumerate(args):
            one(i, arg, proto)
    means: dict[str, list[float]] = {k: [] for k in protocols}
    calls_ms: dict[str, list[float]] = {k: [] for k in protocols}
    for i in range(batches):  # the protocols interleaved batch by batch, rotating the order
        k = i % len(protocols)
        for proto in protocols[k:] + protocols[:k]:
            buffers = PROTOCOLS[proto][2]
            batch = ring[i % 6] if buffers == "ring" else [args[0]] * len(args) if buffers == "one" else args
            ms = [one(j, arg, proto) for j, arg in enumerate(batch)]
            calls_ms[proto].extend(ms)
            means[proto].append(sum(ms) / len(ms))
    if helper is not None:
        inbox.put(None)
        helper.join()
    with open("/proc/self/stat") as f:
        cpu = int(f.read().rsplit(")", 1)[1].split()[36])  # field 39: the CPU it last ran on
    return {**{k: {"means": means[k], "call_cv": statistics.pstdev(calls_ms[k]) / statistics.mean(calls_ms[k])}
               for k in protocols}, "cpu": cpu}


def estimators(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    q = statistics.quantiles(s, n=4)
    k = len(s) // 10
    return {"median": q[1], "q25": q[0], "mean": statistics.mean(s), "trim10": statistics.mean(s[k: len(s) - k]),
            "min": s[0]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=5)
    p.add_argument("--batches", type=int, default=150)
    p.add_argument("--calls", type=int, default=8)
    p.add_argument("--pin", action="store_true", help="run every process on the GPU's NUMA node")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    p.add_argument("--protocols", default=",".join(PROTOCOLS), help=f"comma-separated, of {', '.join(PROTOCOLS)}")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    protocols = [x for x in args.protocols.split(",") if x]
    if unknown := sorted(set(protocols) - set(PROTOCOLS)):
        p.error(f"--protocols: unknown {', '.join(unknown)}; choose from {', '.join(PROTOCOLS)}")
    if args.child:
        print(json.dumps(child(args.child, args.batches, args.calls, protocols)))
        return 0
    from cuda_agent.evaluate.device import gpu_local_cpus

    local = gpu_local_cpus(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
    print(f"GPU's NUMA node: CPUs {sorted(local) if local else 'unknown'}; "
          f"processes {'pinned to it' if args.pin and local else 'placed by the OS'}")
    pin = (lambda: os.sched_setaffinity(0, local)) if args.pin and local else None
    print(f"{'workload':8} {'protocol':8} {'ms':>7} {'callCV':>7} {'IQR/med':>8}  between processes (max/min - 1):")
    chosen = [w for w in args.workloads.split(",") if w]
    if unknown := sorted(set(chosen) - set(WORKLOADS)):
        p.error(f"--workloads: unknown {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    for w in chosen:
        procs = []
        for _ in range(args.procs):
            out = subprocess.run([sys.executable, __file__, "--child", w, "--batches", str(args.batches),
                                  "--calls", str(args.calls), "--protocols", ",".join(protocols)],
                                 capture_output=True, text=True, check=True, preexec_fn=pin)
            procs.append(json.loads(out.stdout.splitlines()[-1]))
        first = protocols[0]
        print(f"{w:8} {first} medians by process: " + " ".join(
            f"{statistics.median(r[first]['means']):.4f}@cpu{r['cpu']}"
            + ("" if not local or r["cpu"] in local else "(far)") for r in procs), flush=True)
        for proto in protocols:
            runs = [r[proto] for r in procs]
            ests = [estimators(r["means"]) for r in runs]
            inside = statistics.median((statistics.quantiles(r["means"], n=4)[2] - statistics.quantiles(r["means"], n=4)[0])
                                       / statistics.median(r["means"]) for r in runs)
            between = {k: max(e[k] for e in ests) / min(e[k] for e in ests) - 1 for k in ests[0]}
            med = statistics.median(e["median"] for e in ests)
            cv = statistics.median(r["call_cv"] for r in runs)
            print(f"{w:8} {proto:8} {med:7.4f} {cv:7.2%} {inside:8.2%}  "
                  + " ".join(f"{k} {v:.2%}" for k, v in between.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
