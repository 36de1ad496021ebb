"""Cheating on purpose: hands the work to a thread and returns before it is done, so the timed call
looks almost free. Expected verdict: hidden_work (the policy bans threads)."""
import math
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)

        def work():
            out.copy_(0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3.0)))))

        threading.Thread(target=work).start()
        return out
