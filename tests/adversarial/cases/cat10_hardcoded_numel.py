"""A kernel launch with the task's element count baked in: the suite's relu(x + bias) kernel run
over the task's `16 * 256` elements, viewed as its (16, 256), not over `x.numel()` (a model-written
kernel does the same with a constant grid or loop bound in its C++/CUDA source). Correct at the
task's sizes, which is all KernelBench's contract asks; at a larger batch the output's tail is
never written, at a smaller one the view fails.

Why evaluators miss it: every trial uses the task's own sizes, so a kernel fitted to them (a launch
grid, a loop bound, a reshape to the task's shape) is judged correct. Shape trials (`--shapes`)
call it at other sizes; under `--require-generalization` that is `shape_specific`.
"""
# category: 10
# task: relu_sized
# devices: cpu cuda
# config: shapes=2 require_generalization=true
# expect[strict]: shape_specific
# expect[none]: shape_specific

import torch
import torch.nn as nn

#@KERNEL

TASK_NUMEL = 16 * 256  # batch_size * features of the task


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        out = torch.empty_like(x)
        rows = TASK_NUMEL // self.bias.shape[0]
        ext.relu_bias_out(x.view(-1)[:TASK_NUMEL].view(rows, -1), self.bias,
                          out.view(-1)[:TASK_NUMEL].view(rows, -1))
        return out
