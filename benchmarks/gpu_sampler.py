"""The GPUs' side of a timed run, for the benchmarks: SM clock, power draw and temperature sampled
through NVML by a thread, with NVML's counters of the time the clocks were slowed, by reason. The
evaluator benchmark's stability step (evaluator.py) reads the clocks through it.

Needs nvidia-ml-py (`import pynvml`): `GpuSampler` raises where it or NVML is missing, and
`open_sampler` says so and returns None, so that a run goes on without the clocks.
"""

from __future__ import annotations

import statistics
import threading
import time

# NVML's reasons for slowing the clocks whose time it counts (NVML_FI_DEV_CLOCKS_EVENT_REASON_*)
REASONS = ("SW_POWER_CAP", "HW_THERM_SLOWDOWN", "SW_THERM_SLOWDOWN", "HW_POWER_BRAKE_SLOWDOWN", "SYNC_BOOST")


class GpuSampler:
    """Every `period_s` seconds, for each GPU of `gpus` (NVML indices, or UUIDs such as "GPU-...";
    default: every GPU NVML lists), its SM clock, power, temperature and slowdown counters, each
    sample stamped with `time.monotonic()`.

    `window(t0, t1)` gives the figures between two such times, `span()` those since the last
    `span()` (or the start); both of the GPU that drew the most power in it (the one that did the
    work), as `gpu`, `sm_mhz` (mean), `sm_mhz_min`, `power_w`, `temp_c` (means), `slowed`
    ({reason: share of the time NVML counted the clocks slowed for it}, the reasons counted only; a
    share over 100% is the counters' granularity) and `samples`; {} where no sample fell in it."""

    def __init__(self, gpus=None, period_s: float = 0.1) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        if gpus is None:
            gpus = range(pynvml.nvmlDeviceGetCount())
        self.handles = {g: pynvml.nvmlDeviceGetHandleByUUID(g) if isinstance(g, str)
                        else pynvml.nvmlDeviceGetHandleByIndex(g) for g in gpus}
        self.fields = [getattr(pynvml, f"NVML_FI_DEV_CLOCKS_EVENT_REASON_{r}") for r in REASONS]
        self.period_s = period_s
        # (time, gpu, SM MHz, W, C, slowdown counters in ns)
        self.rows: list[tuple[float, object, int, float, int, list[int]]] = []
        self.lock = threading.Lock()
        self.mark = time.monotonic()  # where the next span() starts
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        nv = self.nv
        while not self.stop.wait(self.period_s):
            t = time.monotonic()
            for g, h in self.handles.items():
                try:
                    counters = [v.value.ullVal if v.nvmlReturn == 0 else 0
                                for v in nv.nvmlDeviceGetFieldValues(h, self.fields)]
                    row = (t, g, nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM), nv.nvmlDeviceGetPowerUsage(h) / 1e3,
                           nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), counters)
                except nv.NVMLError:  # a reading NVML cannot give now: the next period tries again
                    continue
                with self.lock:
                    self.rows.append(row)

    def window(self, t0: float, t1: float) -> dict:
        with self.lock:
            rows = [r for r in self.rows if t0 <= r[0] <= t1]
        by_gpu: dict[object, list] = {}
        for r in rows:
            by_gpu.setdefault(r[1], []).append(r)
        if not by_gpu:
            return {}
        gpu, rs = max(by_gpu.items(), key=lambda kv: statistics.mean(r[3] for r in kv[1]))
        first, last = rs[0], rs[-1]
        slowed = {} if last[0] <= first[0] else {
            reason: (b - a) / 1e9 / (last[0] - first[0])
            for reason, a, b in zip(REASONS, first[5], last[5]) if b > a}
        return {"gpu": gpu, "sm_mhz": round(statistics.mean(r[2] for r in rs), 1), "sm_mhz_min": min(r[2] for r in rs),
                "power_w": round(statistics.mean(r[3] for r in rs), 1),
                "temp_c": round(statistics.mean(r[4] for r in rs), 1), "slowed": slowed, "samples": len(rs)}

    def span(self) -> dict:
        """The figures since the last span(); the samples before now are dropped."""
        t0, self.mark = self.mark, time.monotonic()
        out = self.window(t0, self.mark)
        with self.lock:
            self.rows = [r for r in self.rows if r[0] > self.mark]
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.nv.nvmlShutdown()


def open_sampler(period_s: float = 0.1, say=None) -> GpuSampler | None:
    """A sampler of every GPU, or None where NVML or nvidia-ml-py is missing, with a line saying
    why through `say` (default: printed)."""
    try:
        return GpuSampler(period_s=period_s)
    except Exception as exc:  # noqa: BLE001 - no nvidia-ml-py or no NVML: the run goes on without the clocks
        (say or (lambda line: print(line, flush=True)))(f"(no GPU clocks: {type(exc).__name__}: {exc})")
        return None


def describe(g: dict) -> str:
    """One sampler window as text: clock, power, temperature and the reasons the clocks were slowed."""
    if not g:
        return "no GPU samples"
    return (f"SM MHz mean {g['sm_mhz']:.0f} min {g['sm_mhz_min']}, {g['power_w']:.0f} W, {g['temp_c']:.0f} C"
            + "".join(f", {r} {v:.0%} of the time" for r, v in g["slowed"].items()))
