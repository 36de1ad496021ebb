"""Honest under KernelBench's rules: a submodule registered twice. ModelNew keeps its BatchNorm as
`self.norm` and hands the same module to a fused wrapper (`self.fused.bn`), so its state_dict holds
every tensor of the norm under two names, neither of them Model's (`bn`). Both names are one tensor:
the kernelbench profile matches it once, by value, and loads the reference's re-drawn statistics and
affine into it, whichever name the load writes last. forward folds the normalisation into a
per-channel scale and shift (torch ops, allowed by the kernelbench profile) and the extension adds
the shift and applies the ReLU.

From a Gemini kernel of the real-world corpus (level 3, problem 23, EfficientNet-B1) that KernelBench
judged correct: each `FusedConvBNActivation` holds the conv and batch norm that its block also holds.
(The strict profile requires Model's names: state_dict_mismatch, with a hint to rename.)
"""
# category: honest
# kind: aliased_state
# task: bn_relu
# devices: cpu cuda
# expect[kernelbench]: pass
# expect[none]: pass

import torch
import torch.nn as nn

#@KERNEL


class Fused(nn.Module):
    def __init__(self, bn):
        super().__init__()
        self.bn = bn

    def forward(self, x):
        bn = self.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        shift = (bn.bias - bn.running_mean * scale).contiguous()
        xs = (x.permute(0, 2, 3, 1) * scale).contiguous()  # channels last: the extension's bias axis
        return ext.relu_bias(xs, shift).permute(0, 3, 1, 2)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)
        self.fused = Fused(self.norm)

    def forward(self, x):
        return self.fused(x)
