"""cuda-agent: an environment, agent and training system for language models that write GPU kernels.

Importing the package is cheap: no torch, openai, verl or ray is imported until a subcommand needs it.
"""

__version__ = "0.1.0"
