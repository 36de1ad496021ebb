"""Device helpers of the one timing method (`worker.timed_call`), used for eager, torch.compile and
the candidate alike.

Each call is timed on the host around `fn(*args)` followed by a device-wide synchronize, so the
measurement counts launch overhead and work on every stream of the process. Right before each call
the process that times it flushes the caches (`Timer.flush`: L2 on CUDA, the last-level cache on the
CPU backend) and runs a trivial kernel (`Timer.touch`), so every call starts cold in memory and with
its GPU context switched in. Calls come in batches of back-to-back calls per command (engine.py),
so the host side is as warm for the candidate as for the baselines. The candidate's own report of a
call's time is a claim: the harness checks it against its own clock (engine.py).
"""

from __future__ import annotations

from pathlib import Path

import torch


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


class Timer:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self._flush: torch.Tensor | None = None  # allocated on first use: twice the cache it evicts
        self._touch = torch.empty(1, dtype=torch.int32, device=device) if self.cuda else None

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def touch(self) -> None:
        """Run a trivial kernel and wait for it. Two processes share the GPU by time slices; without
        this, the switch to this process's context (~0.15 ms on an H200) would land inside the timed
        call. Skipping it only makes one's own call slower."""
        if self._touch is not None:
            self._touch.zero_()
            torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        """Evict the caches by writing a buffer twice their size (L2 on CUDA, the CPU's last level
        otherwise)."""
        if self._flush is None:
            size = (getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 64 << 20
                    ) if self.cuda else llc_bytes()
            self._flush = torch.empty(2 * size // 4, dtype=torch.int32, device=self.device)
        self._flush.zero_()
