"""Device helpers of the one timing method (`worker.common.timed_call`), used for eager,
torch.compile and the candidate alike.

Each call is timed on the host around `fn(*args)` followed by a device-wide synchronize, so the
measurement counts launch overhead and work on every stream of the process. Right before each call
the process that times it flushes the caches (`Timer.flush`: L2 on CUDA, the last-level cache on the
CPU backend) and runs some tensor-core work (`Timer.touch`), so every call starts cold in memory, with
its GPU context switched in and the clocks up. Calls come in batches of back-to-back calls per command
(protocol.py), so the host side is as warm for the candidate as for the baselines. The candidate's own
report of a call's time is a claim: the harness checks it against its own clock (protocol.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from cuda_agent.evaluate.config import TOUCHES


def llc_bytes() -> int:
    """Size of the CPU's largest cache (from sysfs; 32 MiB where it cannot be read)."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            sizes.append(int(text.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(text[-1], 0))
        except (OSError, ValueError):
            continue
    return max(sizes, default=32 << 20)


@contextlib.contextmanager
def tf32_matmul():
    """float32 matrix products in TF32 inside, whatever the process set; its setting back after.
    Through torch's newer precision switch only, read and written back as it was, so a process
    that sets the older `allow_tf32` keeps what it set (the two are one state in torch)."""
    m = torch.backends.cuda.matmul
    old = m.fp32_precision
    m.fp32_precision = "tf32"
    try:
        yield
    finally:
        m.fp32_precision = old


class Timer:
    def __init__(self, device: torch.device, touch: str = "bf16"):
        if touch not in TOUCHES:
            raise ValueError(f"touch={touch!r}: use one of {', '.join(TOUCHES)}")
        self.device = device
        self.cuda = device.type == "cuda"
        self.touch_kind = touch
        self._flush: torch.Tensor | None = None  # allocated on first use: twice the cache it evicts
        # busy work before each call (touch). bf16: a matrix of ones and a product's buffer, so that
        # no precision setting of the process (TF32 on or off) changes its cost. tf32: a matrix of
        # random values (a private generator: the process's own random stream stays untouched).
        self._spin = None
        if self.cuda and touch == "bf16":
            self._spin = torch.ones(2, 2048, 2048, dtype=torch.bfloat16, device=device)
        elif self.cuda:
            self._spin = torch.randn(1024, 1024, device=device, generator=torch.Generator(device).manual_seed(0))
        self._event = None  # sync(spin=False)'s blocking event, made on first use

    def sync(self, spin: bool = True) -> None:
        """Wait for all of this process's device work. `spin` (timed calls): the host polls,
        holding a core, and notices the end at once. Otherwise it sleeps on a blocking event until
        the current stream is done (waking takes some microseconds more), then synchronizes the
        device for any other stream. Many evaluations share a GPU by time slices, so an untimed
        wait can last the other processes' slices, and spinning through them would hold a core per
        waiting process."""
        if not self.cuda:
            return
        if not spin:
            if self._event is None:
                self._event = torch.cuda.Event(blocking=True)
            self._event.record()
            self._event.synchronize()
        torch.cuda.synchronize(self.device)

    def touch(self, spin: bool = True) -> None:
        """Run some tensor-core work and wait for it, right before a timed call. Two processes share
        the GPU by time slices; without this, the switch to this process's context (long beside a
        short kernel) would land inside the timed call, and the clocks might not be up. Skipping it
        only makes one's own call slower.

        `bf16` (the default): two bf16 2048x2048 products (their time, and the switch's:
        docs/measured/2026-12-07-figures-from-the-code.md), whose cost no precision setting of the
        process changes (a candidate may switch TF32 on), so the judge's trusted overhead stays
        comparable with the candidate's. `tf32`: four TF32 1024x1024 products of random values (TF32
        forced for them, `tf32_matmul`): a warm-up of the kind that TF32 matmul tasks run."""
        if self._spin is None:
            return
        if self.touch_kind == "bf16":
            a, out = self._spin[0], self._spin[1]
            for _ in range(2):
                torch.mm(a, a, out=out)
        else:
            with tf32_matmul():
                for _ in range(4):
                    self._spin @ self._spin
        self.sync(spin)

    def flush(self) -> None:
        """Evict the caches by writing a buffer twice their size (L2 on CUDA, the CPU's last level
        otherwise)."""
        if self._flush is None:
            size = (getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 64 << 20
                    ) if self.cuda else llc_bytes()
            self._flush = torch.empty(2 * size // 4, dtype=torch.int32, device=self.device)
        self._flush.zero_()
