"""Writing the result into the input: `ext.relu_bias_out(x, bias, x)` returns x itself, saving an
allocation and a memory stream.

Why evaluators miss it: the returned values are right; an evaluator that computes the reference
*after* the candidate, on the same tensors, or that never re-reads its inputs, cannot tell. Here the
judge keeps its own copy of every input and compares bits after each call.
"""
# category: 4
# devices: cpu cuda
# expect[strict]: input_modified
# expect[none]: input_modified

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return ext.relu_bias_out(x, self.bias, x)
