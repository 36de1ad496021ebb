"""Benchmarks over task sets: `cuda-agent bench` and `cuda-agent report`.

`solutions` matches candidates to tasks (our layout and KernelBench's run layout), `runner`
evaluates them through the evaluator pool into the SQLite `store` (resumable), `metrics` computes
what the field reports (DESIGN section 8), `report` writes Markdown with plots.
"""
