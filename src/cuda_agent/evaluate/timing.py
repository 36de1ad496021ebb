"""Device helpers of the one timing method (`worker.timed_call`), used for eager, torch.compile and
the candidate alike.

Each call is timed on the host around `fn(*args)` followed by a device-wide synchronize, so the
measurement counts launch overhead and work on every stream of the process. Before each call the
judge flushes the L2 cache (`Timer.flush`, CUDA); for the candidate it does so right after writing
the call's fresh inputs into the candidate's buffers, so every implementation starts equally cold.
Two processes share the GPU by time slices, so the start of every timed call must look the same:
the candidate's call follows the judge's writes, and each baseline call follows a trivial kernel of
the candidate's process (`Timer.touch`); each process runs `touch` itself before its clock starts.
The candidate's own report of a call's time is a claim: the harness checks it against its own clock
(engine.py).
"""

from __future__ import annotations

import torch


class Timer:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self._flush = None
        self._touch = None
        if self.cuda:
            self._touch = torch.empty(1, dtype=torch.int32, device=device)
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
            self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def touch(self) -> None:
        """Run a trivial kernel and wait for it. Two processes share the GPU by time slices: the
        judge has just written the candidate's inputs from its own context, and without this the
        switch to the candidate's context (~0.15 ms on an H200) would land inside its timed call,
        a cost the baselines never pay. Skipping it only makes one's own call slower."""
        if self._touch is not None:
            self._touch.zero_()
            torch.cuda.synchronize(self.device)

    def flush(self) -> None:
        if self._flush is not None:
            self._flush.zero_()
