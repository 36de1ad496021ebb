"""Configuration of an agent episode. Imports nothing heavy: the command line reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuda_agent.agent.llm import CONTEXT_TOKENS
from cuda_agent.evaluate.config import EvalConfig

if TYPE_CHECKING:
    from cuda_agent.agent.sandbox import Limits


@dataclass
class EpisodeConfig:
    """One episode's budgets and sandbox. Field docstrings double as the CLI help text
    (`cli.options.field_docs`)."""

    max_turns: int = 200
    """Turn limit: the model's replies, each with its tool calls."""
    context_tokens: int = CONTEXT_TOKENS
    """Context budget: the oldest tool outputs are elided to stay within it."""
    wall_s: float = 4 * 3600.0
    """Wall-clock limit of the episode, seconds."""
    device: str = "auto"
    """Where the workspace's kernels build and run (the final evaluation's device)."""
    allow_unsandboxed: bool = False
    """Run the agent's commands without isolation where namespaces are unavailable."""
    limits: Limits | None = None
    """The sandbox's limits on the agent's commands (default: `Limits()`'s)."""
    eval: EvalConfig | None = None
    """The final evaluation (default: the device's defaults)."""
