"""Honest: state derived from the weights at the first call and kept as a buffer. ModelNew registers
`bias_folded` as None in __init__ and fills it on its first forward (here the bias made contiguous;
in the real kernel this pattern comes from, BatchNorm's affine and running statistics folded into a
per-channel scale and shift). A buffer registered as None is not in the state_dict until it is set,
so the state after the calls has an entry that the loaded state did not: derived state, not a
modified weight (the loaded bias is untouched). The evaluator loads the weights before the first
call, so the fold sees the weights it is judged with.

From a Gemini kernel of the real-world corpus (level 2, problem 73) that KernelBench judged correct.
Strict forbids the torch op of the fold inside forward, as it forbids every torch op there.
"""
# category: honest
# kind: lazy_derived_state
# devices: cpu cuda
# expect[kernelbench]: pass
# expect[none]: pass

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("bias_folded", None)

    def forward(self, x):
        if self.bias_folded is None:
            with torch.no_grad():
                self.bias_folded = self.bias.detach().contiguous().clone()
        return ext.relu_bias(x, self.bias_folded)
