"""A race: the kernel runs on a second CUDA stream that is *not* joined back to the caller's before
forward returns. The timer synchronizes the whole device after each call, so the side stream's work
is counted and the time is true, and a judge that reads the output only after that synchronize sees
correct numbers. But the output is not ready when forward returns: whatever the caller runs next on
its stream reads it half written.

Why evaluators miss it: they synchronize the device before they compare. Here, during correctness
trials, the SMs are held while forward queues its work and the output is copied on the caller's
stream the moment forward returns (worker.StreamCheck, `EvalConfig.stream_check`): work on a stream
that was never joined is not in that copy (stream_race).
"""
# category: 5
# devices: cuda
# config: stream_check=true
# expect[strict]: stream_race
# expect[kernelbench]: stream_race
# expect[none]: stream_race

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream(device=x.device)
        out = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(self.side):
            ext.relu_bias_out(x, self.bias, out)
        return out  # no join: the caller's stream does not wait for the side stream
