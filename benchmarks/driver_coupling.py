"""Do two GPUs of one host slow each other's driver calls? A diagnostic for the [speed] scaling target.

With the CPU mostly idle (the zygote), an evaluation's correctness phase and timed rounds still grow
when the second GPU is busy too. What the GPUs share is the host's driver. This times, per operation,
the driver work an evaluation does many times, with `--procs` processes per GPU on GPU 0 alone and
then on every GPU at once:

- `context`: a CUDA context created and destroyed (each worker process makes one, and it goes at exit);
- `malloc`: cudaMalloc and cudaFree of 64 MiB (the caching allocator's misses);
- `ipc`: a CUDA IPC handle of a peer process's buffer opened and closed (the judge, per checked output).

    python benchmarks/driver_coupling.py [--procs 4] [--seconds 5]

Prints the median time per operation and the operations per second of each process; a driver lock
shared by the GPUs shows as slower operations when all GPUs take part.
"""

from __future__ import annotations

import argparse
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
        assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
        assert cu.cuCtxDestroy_v2(ctx) == 0
        times.append(time.perf_counter() - t0)
    out.put(times)


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
        assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(SIZE)) == 0
        assert cu.cuMemFree_v2(ptr) == 0
        times.append(time.perf_counter() - t0)
    out.put(times)


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
    out.put(times)


def run(kind, gpus: list[int], procs: int, seconds: float) -> list[list[float]]:
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(len(gpus) * procs)  # every process's loop starts together
    ps = [ctx.Process(target=kind, args=(g, seconds, out, start)) for g in gpus for _ in range(procs)]
    for p in ps:
        p.start()
    got = [out.get(timeout=seconds + 180) for _ in ps]
    for p in ps:
        p.join()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=4, help="processes per GPU")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    import torch

    n = torch.cuda.device_count()
    print(f"{'operation':10s} {'GPUs':>5s} {'median ms':>10s} {'ops/s per process':>18s}")
    for name, kind in (("context", contexts), ("malloc", mallocs), ("ipc", ipcs)):
        for gpus in ([0], list(range(n))) if n > 1 else ([0],):
            got = run(kind, gpus, args.procs, args.seconds)
            med = statistics.median(t for ts in got for t in ts) * 1e3
            rate = statistics.median(len(ts) for ts in got) / args.seconds
            print(f"{name:10s} {len(gpus):5d} {med:10.3f} {rate:18.1f}", flush=True)


if __name__ == "__main__":
    main()
