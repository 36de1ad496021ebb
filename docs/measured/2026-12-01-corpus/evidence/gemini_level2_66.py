"""Counter-example for gemini_level2_run, level 2 problem 66 (Linear, Dropout, Softmax over 16384
features), which KernelBench judged correct and we reject (output_mismatch).

ModelNew keeps the weight as `weight_t` (in, out) and initialises it with
`kaiming_uniform_(weight_t.t())`. torch fills the transposed view in memory order, so under the same
seed `weight_t` holds exactly the bits of Model's `weight` (out, in), and the kernel, which reads
`W_t[k * out + col]`, computes softmax(x @ W + b) where the reference computes softmax(x @ W^T + b):
another linear map (the task's matrix is square, so the shapes hide it). KernelBench passes it
because its check is allclose(atol=rtol=1e-2) and every softmax output here is below 3.2e-4: a
constant 1/16384 passes as well. Our relative-norm check sees the difference (0.43 on the H200).

    python docs/measured/2026-12-01-corpus/evidence/gemini_level2_66.py      # CPU, ~4 GB, ~1 min
"""

import math

import torch
import torch.nn as nn

N = 16384  # in_features = out_features, as in the task
torch.manual_seed(42)
lin = nn.Linear(N, N)
torch.manual_seed(42)
weight_t = torch.empty(N, N)
nn.init.kaiming_uniform_(weight_t.t(), a=math.sqrt(5))  # ModelNew.reset_parameters
print("weight_t has the bits of Model's weight:", torch.equal(weight_t, lin.weight))
x = torch.rand(128, N)  # get_inputs()
with torch.no_grad():
    ref = torch.softmax(lin(x), dim=1)
    outputs = {"the kernel (x @ W_t + b)": torch.softmax(x @ weight_t + lin.bias, dim=1),
               "a constant 1/N": torch.full_like(ref, 1.0 / N)}
print(f"reference outputs lie in [{ref.min():.2e}, {ref.max():.2e}]")
for name, y in outputs.items():
    rel = ((y - ref).norm() / ref.norm()).item()
    print(f"{name}: KernelBench's allclose(atol=rtol=1e-2) {torch.allclose(y, ref, atol=1e-2, rtol=1e-2)}, "
          f"max abs error {(y - ref).abs().max():.2e}, relative error norm {rel:.3f}")
