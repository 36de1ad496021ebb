"""Fault: the candidate is not valid Python: a parenthesis left open in the class statement.

Expected: load_error naming the SyntaxError; the candidate counts as not compiled.
"""
# category: 13
# fault: syntax_error
# devices: cpu cuda
# expect[strict]: load_error

import torch
import torch.nn as nn


class ModelNew(nn.Module:
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
