"""Where does the spread of a timed sub-millisecond call come from? A diagnostic for the [speed]
stability target: the same workloads timed by several protocols, each in 5 fresh processes (as 5
evaluations would), printing per protocol the spread inside one process (IQR / median of the batch
means) and between processes (max / min of their medians, for several estimators).

    python benchmarks/diagnostics/timing_noise.py [--procs 5] [--batches 150] [--workloads matmul,relu] [--pin]
        [--protocols harness,spin,...] [--epochs E]

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

`--epochs E` asks instead what a process's level follows: each process times, batch by batch
alternately, the inputs it made first (`first`) and a set made anew for each of E epochs (`new`:
fresh device memory, the earlier sets kept; `--pad-gb G` takes G GiB more before each set), with
the harness's protocol, by the host clock and by CUDA events. Per epoch it also reports the SM
clock (NVML, and a cupy kernel counting clock64 cycles over globaltimer), power, temperature and
the share of the time NVML counted the clocks slowed, by reason; per process, the kernels one call
runs (torch's profiler). `--gap-ms G` leaves the GPU idle G ms after each call, a duty cycle nearer
the evaluator's. (On 2026-12-01, one H200: back to back, the matmul drew up to 690 W with NVML's
software power cap engaged and the clock at 1650-1950 MHz; with 2 ms gaps, 240 W at 1980 MHz by
both clocks and no reason counted, yet epochs still moved 3.7-4.9% inside a process. In every
process the same cuBLAS kernel ran, and by events a process sat at about 0.375 or about 0.415 ms,
steady within 0.2% for seconds; one switched from the first level to the second mid-run with
`first` and `new` together, 7 GiB apart. So the level is the GPU's state at the time: not the
process, not where the buffers lie, not the SM clock, not the host.)

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: gpu_sampler.py

from gpu_sampler import GpuSampler, describe  # noqa: E402

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


def make_inputs(workload: str, calls: int, dev) -> tuple:
    """The workload's function and `calls` argument tuples on `dev`, each in memory of its own."""
    import torch

    if workload == "gelu":  # about 0.2 ms: tanh-GELU on 32M floats
        def fn(x):
            return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x.pow(3))))
        return fn, [(torch.randn(4096, 8192, device=dev),) for _ in range(calls)]
    if workload == "matmul":  # about 0.4 ms with TF32
        b = torch.randn(4096, 4096, device=dev)
        return torch.matmul, [(torch.randn(4096, 4096, device=dev), b) for _ in range(calls)]
    return torch.relu, [(torch.randn(16384, 16384, device=dev),) for _ in range(calls)]  # about 0.5 ms


CLOCK_KERNEL = r"""
extern "C" __global__ void clk(long long* out, long long spin) {
    long long g0, g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    long long t0 = clock64(), t1 = t0;
    while (t1 - t0 < spin) t1 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    out[0] = t1 - t0;
    out[1] = g1 - g0;
}
"""


def sm_clock():
    """A function that returns the SM clock in MHz as one thread counts it, not as NVML reports it:
    clock64 cycles over globaltimer nanoseconds while spinning 2M cycles (about 1 ms, as the timer
    may tick by the microsecond). None without cupy."""
    try:
        import cupy
    except ImportError:
        return None
    import torch

    kernel = cupy.RawKernel(CLOCK_KERNEL, "clk")
    out = torch.zeros(2, dtype=torch.int64, device="cuda")
    ptr = cupy.asarray(out)

    def measure() -> float:
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel((1,), (1,), (ptr, cupy.int64(2_000_000)))
        cycles, ns = out.tolist()
        return cycles / ns * 1e3
    return measure


def kernels(fn, arg) -> list[str]:
    """The names of the GPU kernels one call runs (torch's profiler): does a process that times
    slower run another kernel?"""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*arg)
        torch.cuda.synchronize()
    return sorted({e.key[:90] for e in prof.key_averages() if e.device_type.name == "CUDA"})


def epochs_child(workload: str, epochs: int, batches: int, calls: int, gap_ms: float = 0.0,
                 pad_gb: float = 0.0) -> dict:
    """`--epochs`: per epoch, the medians of the batch means on the process's first inputs and on
    inputs made for that epoch, their batches alternating; the median call of both by CUDA events;
    the GPU's clocks and state (`GpuSampler`, `sm_clock`)."""
    import torch

    from cuda_agent.evaluate.timing import Timer

    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    timer = Timer(dev, "bf16")
    fn, first = make_inputs(workload, calls, dev)
    kept = []  # every epoch's inputs stay allocated: the next epoch's come from new memory
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    events: list[float] = []  # the same calls as CUDA events time them: the GPU's side alone

    def batch(args) -> float:
        ms = []
        for arg in args:
            timer.flush()
            timer.touch()
            with torch.no_grad():
                t0 = time.perf_counter()
                start.record()
                fn(*arg)
                end.record()
                torch.cuda.synchronize()
                ms.append((time.perf_counter() - t0) * 1e3)
                events.append(start.elapsed_time(end))
            time.sleep(gap_ms / 1e3)  # the GPU idle a while, as between an evaluation's timed calls
        return sum(ms) / len(ms)

    batch(first)  # warm-up
    out: dict[str, list] = {"first": [], "new": [], "gpu": [], "clock": [], "events": [],
                            "kernels": kernels(fn, first[0])}
    try:  # this process's GPU, sampled every 5 ms
        sampler = GpuSampler([f"GPU-{torch.cuda.get_device_properties(dev).uuid}"], period_s=0.005)
    except Exception:  # noqa: BLE001 - NVML knows it by no such UUID: every GPU, the busiest reported
        sampler = GpuSampler(period_s=0.005)
    clock = sm_clock()
    sampler.span()  # the first epoch's span starts here
    for _ in range(epochs):
        if pad_gb:  # device memory taken (and kept) first: the epoch's inputs lie elsewhere still
            kept.append(torch.empty(int(pad_gb * 2**30), dtype=torch.uint8, device=dev))
        kept.append(make_inputs(workload, calls, dev)[1])
        batch(kept[-1])
        means: dict[str, list[float]] = {"first": [], "new": []}
        mhz = []
        events.clear()
        for i in range(batches):
            for k in (("first", "new") if i % 2 == 0 else ("new", "first")):
                means[k].append(batch(first if k == "first" else kept[-1]))
            if clock is not None:
                mhz.append(clock())
        out["clock"].append(statistics.median(mhz) if mhz else 0.0)
        out["events"].append(statistics.median(events))
        for k, v in means.items():
            out[k].append(statistics.median(v))
        out["gpu"].append(sampler.span())
    sampler.close()
    return out


def child(workload: str, batches: int, calls: int, protocols: list[str]) -> dict:
    import torch

    from cuda_agent.evaluate.config import TOUCHES
    from cuda_agent.evaluate.timing import Timer

    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    timers = {t: Timer(dev, t) for t in TOUCHES}  # the evaluator's touches
    timer = timers["bf16"]
    fn, args = make_inputs(workload, calls, dev)
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


def show_epochs(w: str, n: int, r: dict) -> None:
    """One process of `--epochs`: its epochs' medians, kernels, and the GPU's clocks and state."""
    def row(xs, fmt=".4f"):
        return " ".join(f"{x:{fmt}}" for x in xs)
    print(f"{w:8} process {n}: first {row(r['first'])} | new {row(r['new'])}", flush=True)
    print(f"{w:8}   kernels: {r['kernels']}")
    print(f"{w:8}   both, by CUDA events (median call): {row(r['events'])}")
    print(f"{w:8}   SM MHz by clock64/globaltimer: {row(r['clock'], '.0f')}")
    print(f"{w:8}   per epoch, the GPU: " + "; ".join(describe(g) for g in r["gpu"]), flush=True)


def show_epochs_spread(w: str, procs: list[dict]) -> None:
    """max/min - 1 of the epochs inside each process (the median over processes), and of the
    processes' medians."""
    def rel(xs):
        return max(xs) / min(xs) - 1
    inside = {k: statistics.median(rel(r[k]) for r in procs) for k in ("first", "new", "events")}
    between = {k: rel([statistics.median(r[k]) for r in procs]) for k in ("first", "new", "events")}
    print(f"{w:8} epochs, max/min - 1: inside a process (median over processes) "
          + " ".join(f"{k} {v:.2%}" for k, v in inside.items()) + "; between processes (their medians) "
          + " ".join(f"{k} {v:.2%}" for k, v in between.items()), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=5)
    p.add_argument("--batches", type=int, default=150)
    p.add_argument("--calls", type=int, default=8)
    p.add_argument("--pin", action="store_true", help="run every process on the GPU's NUMA node")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    p.add_argument("--protocols", default=",".join(PROTOCOLS), help=f"comma-separated, of {', '.join(PROTOCOLS)}")
    p.add_argument("--epochs", type=int, default=0,
                   help="instead of the protocols: E epochs of new inputs per process against its first inputs")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="with --epochs: the GPU left idle this long after each call (a lower duty cycle)")
    p.add_argument("--pad-gb", type=float, default=0.0,
                   help="with --epochs: this many GiB of device memory taken before each epoch's inputs")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    protocols = [x for x in args.protocols.split(",") if x]
    if unknown := sorted(set(protocols) - set(PROTOCOLS)):
        p.error(f"--protocols: unknown {', '.join(unknown)}; choose from {', '.join(PROTOCOLS)}")
    if args.child and args.epochs:
        print(json.dumps(epochs_child(args.child, args.epochs, args.batches, args.calls, args.gap_ms, args.pad_gb)))
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.batches, args.calls, protocols)))
        return 0
    from cuda_agent.evaluate.device import gpu_local_cpus

    local = gpu_local_cpus(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
    print(f"GPU's NUMA node: CPUs {sorted(local) if local else 'unknown'}; "
          f"processes {'pinned to it' if args.pin and local else 'placed by the OS'}")
    pin = (lambda: os.sched_setaffinity(0, local)) if args.pin and local else None
    if not args.epochs:
        print(f"{'workload':8} {'protocol':8} {'ms':>7} {'callCV':>7} {'IQR/med':>8}  between processes (max/min - 1):")
    chosen = [w for w in args.workloads.split(",") if w]
    if unknown := sorted(set(chosen) - set(WORKLOADS)):
        p.error(f"--workloads: unknown {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    for w in chosen:
        procs = []
        for _ in range(args.procs):
            out = subprocess.run([sys.executable, __file__, "--child", w, "--batches", str(args.batches),
                                  "--calls", str(args.calls), "--protocols", ",".join(protocols),
                                  "--epochs", str(args.epochs), "--gap-ms", str(args.gap_ms),
                                  "--pad-gb", str(args.pad_gb)],
                                 capture_output=True, text=True, check=True, preexec_fn=pin)
            procs.append(json.loads(out.stdout.splitlines()[-1]))
            if args.epochs:
                show_epochs(w, len(procs), procs[-1])
        if args.epochs:
            show_epochs_spread(w, procs)
            continue
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
