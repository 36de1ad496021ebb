"""The agent: tools with the Claude Code tool set's names and arguments (tools.py), a sandboxed shell,
an OpenAI-compatible LLM loop, and trajectories (DESIGN section 5)."""
