"""Fault: the file defines no ModelNew (the class is named after the reference instead).

Expected: no_model_new, a clean verdict rather than an AttributeError of the harness.
"""
# category: 13
# fault: no_model_new
# devices: cpu cuda
# expect[strict]: no_model_new

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
