"""Do two GPUs of one host slow each other's driver calls? A diagnostic for the [speed] scaling target.

With the CPU mostly idle (the zygote), an evaluation's correctness phase and timed rounds still grow
when the second GPU is busy too. What the GPUs share is the host's driver. This times, per operation,
the driver work an evaluation does many times, with `--procs` processes per GPU on GPU 0 alone and
then on every GPU at once:

- `context`: a CUDA context created and destroyed (each worker process makes one, and it goes at exit);
- `malloc`: cudaMalloc and cudaFree of 64 MiB (the caching allocator's misses);
- `ipc`: a CUDA IPC handle of a peer process's buffer opened and closed (the judge, per checked output);
- `launch`: a one-element kernel launched and waited for (no driver lock expected).

Each operation also runs on GPU 0 while as many processes create and destroy contexts on GPU 1
(`churn`): evaluations on one GPU start and end workers while the other GPU's evaluations run.

    python benchmarks/diagnostics/driver_coupling.py [--procs 4] [--seconds 5]

Prints the median and 90th-percentile time per operation and the operations per second of each
process; a driver lock shared by the GPUs shows as slower operations when all GPUs take part, or
when contexts churn on the other GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import multiprocessing as mp
import statistics
import time

SIZE = 64 << 20


def _cuda():
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0, "cuInit failed"
    return cu


def contexts(gpu: int, seconds: float, out, start) -> None:
    cu = _cuda()
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    cu.cuDeviceGet(ctypes.byref(dev), gpu)
    start.wait()
    times, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        rc = cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
        assert rc == 0, f"cuCtxCreate_v2 returned {rc}"
        rc = cu.cuCtxDestroy_v2(ctx)
        assert rc == 0, f"cuCtxDestroy_v2 returned {rc}"
        times.append(time.perf_counter() - t0)
    out.put(('contexts', times))


def mallocs(gpu: int, seconds: float, out, start) -> None:
    cu = _cuda()
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    cu.cuDeviceGet(ctypes.byref(dev), gpu)
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cu.cuCtxSetCurrent(ctx)
    start.wait()
    times, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        rc = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(SIZE))
        assert rc == 0, f"cuMemAlloc_v2 returned {rc}"
        rc = cu.cuMemFree_v2(ptr)
        assert rc == 0, f"cuMemFree_v2 returned {rc}"
        times.append(time.perf_counter() - t0)
    out.put(('mallocs', times))


def _owner(gpu: int, handles, stop) -> None:
    import torch

    torch.cuda.set_device(gpu)
    bufs = [torch.empty(SIZE, dtype=torch.uint8, device="cuda") for _ in range(4)]
    handles.put([b.untyped_storage()._share_cuda_() for b in bufs])
    stop.wait()


def ipcs(gpu: int, seconds: float, out, start) -> None:
    import torch

    ctx = mp.get_context("spawn")
    handles, stop = ctx.Queue(), ctx.Event()
    owner = ctx.Process(target=_owner, args=(gpu, handles, stop))
    owner.start()
    shared = handles.get(timeout=120)
    torch.cuda.set_device(gpu)
    start.wait()
    times, end, i = [], time.monotonic() + seconds, 0
    while time.monotonic() < end:
        h = shared[i % len(shared)]
        i += 1
        t0 = time.perf_counter()
        torch.UntypedStorage._new_shared_cuda(*h)  # opened, then dropped at once
        torch.cuda.ipc_collect()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    stop.set()
    owner.join()
    out.put(('ipcs', times))


def _reporting(kind, gpu: int, seconds: float, out, start) -> None:
    """`kind`'s loop; a failure goes to the queue as text (and breaks the barrier) rather than
    leaving the parent waiting."""
    try:
        kind(gpu, seconds, out, start)
    except BaseException as exc:  # noqa: BLE001 - reported, the process ends anyway
        with contextlib.suppress(Exception):
            start.abort()
        out.put(f"{kind.__name__} on GPU {gpu}: {type(exc).__name__}: {exc}")


def launches(gpu: int, seconds: float, out, start) -> None:
    import torch

    torch.cuda.set_device(gpu)
    x = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    start.wait()
    times, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    out.put(("launches", times))


def run(kind, gpus: list[int], procs: int, seconds: float, churn: int | None = None) -> list[list[float]]:
    """`procs` processes of `kind` on each of `gpus`; with `churn`, as many more creating and
    destroying contexts on GPU `churn` meanwhile (only `kind`'s times are returned)."""
    ctx = mp.get_context("spawn")
    jobs = [(kind, g) for g in gpus for _ in range(procs)]
    jobs += [(contexts, churn) for _ in range(procs)] if churn is not None else []
    out, start = ctx.Queue(), ctx.Barrier(len(jobs), timeout=180)  # the loops start together
    ps = [ctx.Process(target=_reporting, args=(k, g, seconds, out, start)) for k, g in jobs]
    for p in ps:
        p.start()
    got = [out.get(timeout=seconds + 240) for _ in ps]
    for p in ps:
        p.join()
    errors = [g for g in got if isinstance(g, str)]
    if errors:
        raise RuntimeError("; ".join(sorted(set(errors))[:3]))
    mine = [g for g in got if g and g[0] == kind.__name__]
    return [g[1] for g in mine]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=4, help="processes per GPU")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    import torch

    n = torch.cuda.device_count()
    print(f"{'operation':10s} {'on GPUs':>8s} {'churn':>6s} {'median ms':>10s} {'p90 ms':>9s} {'ops/s per process':>18s}")
    for name, kind in (("context", contexts), ("malloc", mallocs), ("ipc", ipcs), ("launch", launches)):
        setups = [([0], None)]
        if n > 1:  # both GPUs at once; GPU 0 alone while contexts come and go on GPU 1
            setups += [(list(range(n)), None)] + ([([0], 1)] if kind is not contexts else [])
        for gpus, churn in setups:
            try:
                got = run(kind, gpus, args.procs, args.seconds, churn)
            except Exception as exc:  # noqa: BLE001 - one operation failing leaves the others to measure
                print(f"{name:10s} {len(gpus):8d} failed: {exc}", flush=True)
                continue
            every = sorted(t for ts in got for t in ts)
            med, p90 = statistics.median(every) * 1e3, every[int(0.9 * (len(every) - 1))] * 1e3
            rate = statistics.median(len(ts) for ts in got) / args.seconds
            where = ",".join(map(str, gpus))
            print(f"{name:10s} {where:>8s} {'GPU ' + str(churn) if churn is not None else '-':>6s} "
                  f"{med:10.3f} {p90:9.3f} {rate:18.1f}", flush=True)


if __name__ == "__main__":
    main()
