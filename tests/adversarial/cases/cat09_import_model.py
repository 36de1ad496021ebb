"""Calling the reference model: `from model import Model` (KernelBench keeps the reference next to the
candidate) and ModelNew simply *is* the reference, with the same parameter names.

Why evaluators miss it: if the reference module is importable from the candidate's directory, the
candidate is exactly as correct and as fast as eager, and earns its reward on every task where eager
beats a slow torch.compile. Here the import fails, because the candidate's staged directory holds only
its own file (load_error).
"""
# category: 9
# devices: cpu cuda
# expect[strict]: load_error
# expect[kernelbench]: load_error
# expect[none]: load_error

import torch
import torch.nn as nn

from model import Model


class ModelNew(Model):
    pass
