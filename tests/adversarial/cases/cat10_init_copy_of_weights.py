"""Ignoring the weights that are loaded: ModelNew copies its own Linear's weight and bias into plain
attributes in __init__ and computes with those, whatever state_dict is loaded into it afterwards.

Why evaluators miss it: KernelBench builds ModelNew under the same seed as Model and never loads
anything into it, so its own initial weights are the reference's. Here the reference's weights are
re-drawn at random and loaded into ModelNew after __init__, as a trained checkpoint would be; a
kernel that does not read its parameters computes with the wrong ones. (PyTorch code: strict rejects
it statically.)
"""
# category: 10
# task: linear_relu
# devices: cpu cuda
# expect[strict]: torch_fallback
# expect[kernelbench]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.w0 = self.fc.weight.detach().clone()  # plain attributes: not parameters, not loaded
        self.b0 = self.fc.bias.detach().clone()

    def forward(self, x):
        return torch.relu(F.linear(x, self.w0.to(x.device), self.b0.to(x.device)))
