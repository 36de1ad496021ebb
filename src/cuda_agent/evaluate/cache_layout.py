"""The evaluator's cache folder (`EvalConfig.cache_dir`; by default `config.default_cache_dir()`): the
one place that names what lies in it, who writes each part, and which parts a sandboxed candidate sees.

The harness owns the folder. A sandbox sees only `VIEWS`, read-only except the build folder it is
given (isolate.py); everything else, the baselines' secret first, is hidden from candidate code.
Paths are relative to the cache folder (`cache_dir / BASELINES`).
"""

BASELINES = "baselines"  # each task's eager and compile times, MAC'd with their secret (baselines.py)
BUILDS = "builds"  # workspace builds by key, and below it the following (build.py)
BUILDS_INCREMENTAL = "builds/incremental"  # the slots a workspace's next build starts from (build.py)
BUILDS_BINDING = "builds/binding"  # our binding.cpp compiled once per toolchain (build.py)
BUILDS_INLINE = "builds/inline"  # the sandboxed builds of candidates' load_inline calls (isolate.Builds)
PCH = "pch"  # torch/extension.h precompiled for load_inline builds (worker/inline_build.py)
PCH_NVCC = "pch-nvcc"  # nvcc's precompiled prefixes (worker/nvcc_pch.py; inline_build.nvcc_pch_root: PCH's sibling)
TORCH_EXTENSIONS = "torch_extensions"  # torch's extension folders where candidates build unsandboxed (evaluation.py)
INDUCTOR = "inductor"  # torch.compile's cache of the compile baseline: trusted code only (protocol.py)
PEAKS = "peaks"  # the device's measured peak throughputs, by device (sol.py)
MEMORY = "memory"  # each task's measured device memory (memory.py)
LOCKS = "locks"  # device locks, admission gates and memory ledgers (locks.py)
WORKSPACES = "workspaces"  # the task each workspace was made for, by the workspace's path (workspace/)
SERVICE_LOG = "service.log"  # what a service started in the background prints (service.py)

VIEWS = (BUILDS, PCH, PCH_NVCC)  # the folders that sandboxes see (read-only) or build in
