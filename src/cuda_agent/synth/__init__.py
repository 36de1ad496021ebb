"""Data synthesis: operator catalogue -> composition -> filters -> decontamination -> dataset.

Modules: `catalogue` (the operators and their argument/shape generators, and the sweep that says why
every other operator is out), `render` (a chain of operator instances -> a KernelBench-format task),
`similarity` (AST similarity for decontamination against KernelBench and deduplication).
"""

COMPOSERS = ("offline", "llm")  # who writes the drafts: the shape-aware composer, or an LLM
