"""The one timing method used for eager, torch.compile and the candidate.

Each call is timed on the host around `fn(*args)` followed by a device-wide synchronize, so the
measurement counts launch overhead and work on every stream of the process. Before each call the L2
cache is flushed (CUDA) and the input set rotates, so results cached from the previous call do not
pay. Warm-up calls are not timed.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch


class Timer:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self._flush = None
        if self.cuda:
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
            self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        if self._flush is not None:
            self._flush.zero_()

    def run(self, fn: Callable[..., Any], input_sets: list[list[Any]], *, budget_s: float,
            min_iters: int, max_iters: int, warmup: int = 0) -> tuple[list[float], Any, int]:
        """Time calls until `budget_s` of timed work or `max_iters`, at least `min_iters`.

        Returns (samples in ms, the last call's output, the index of its input set).
        """
        out, idx = None, 0
        with torch.no_grad():
            for i in range(warmup):
                out = fn(*input_sets[i % len(input_sets)])
            self.sync()
            samples: list[float] = []
            spent = 0.0
            i = 0
            while i < max_iters and (i < min_iters or spent < budget_s):
                idx = i % len(input_sets)
                args = input_sets[idx]
                self.flush()
                self.sync()
                t0 = time.perf_counter()
                out = fn(*args)
                self.sync()
                dt = time.perf_counter() - t0
                samples.append(dt * 1e3)
                spent += dt
                i += 1
        return samples, out, idx
