"""Cheating on purpose: memoises the output by the input buffer's address, so a harness that times
the same input tensors again and again sees a free softmax.
Expected verdict: output_mismatch (the judge refills the same buffers with fresh inputs)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.memo:
            self.memo[key] = torch.softmax(x, dim=1)
        return self.memo[key]
