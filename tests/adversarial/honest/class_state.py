"""Honest: state on its own class and backend flags in its own process. The extension module is kept
as an attribute of ModelNew's class (`ModelNew._ext = ext`), a counter lives on the class, and
cuDNN's flags are set at import; none of this reaches the judge or the baselines, which run in
processes of their own.
"""
# category: honest
# kind: class_state
# devices: cpu cuda
# expect[strict]: pass
# expect[kernelbench]: pass

import torch
import torch.nn as nn

#@KERNEL

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = True


class ModelNew(nn.Module):
    _ext = None
    instances = 0

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        type(self).instances += 1

    def forward(self, x):
        return ModelNew._ext.relu_bias(x, self.bias)


ModelNew._ext = ext
