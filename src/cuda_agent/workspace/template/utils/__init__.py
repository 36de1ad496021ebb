"""Fixed entry points of this workspace into cuda-agent's evaluator (do not edit; edits change nothing).

    bash utils/compile.sh            build kernels/ into the module `cuda_extension`
    python3 -m utils.verification    check ModelNew against the task's Model
    python3 -m utils.profiling       check, then time ModelNew against eager and torch.compile

Each takes --device cuda|cpu and --json; verification and profiling also take --trials N.
"""
