"""The model: any OpenAI-compatible chat-completions endpoint with tool calling (a hosted API, vLLM,
SGLang), through the `openai` package, which does the retries with backoff and the request timeouts.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.errors import UsageError

API_KEY_ENV = "OPENAI_API_KEY"  # the environment variable holding the endpoint's key, by default
REQUEST_TIMEOUT_S = 600.0  # limit of one request, by default (retried with backoff)
CONTEXT_TOKENS = 131_072  # the context the paper trains and runs its agent at (128K tokens)


@dataclass
class Reply:
    message: dict[str, Any]  # the assistant message as it goes back into the conversation
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens, total_tokens
    finish_reason: str | None = None
    seconds: float = 0.0


class ChatClient:
    def __init__(self, base_url: str, model: str, api_key_env: str | None = API_KEY_ENV,
                 timeout_s: float = REQUEST_TIMEOUT_S, max_retries: int = 5, temperature: float | None = None,
                 max_tokens: int | None = None):
        """`api_key_env`: the environment variable holding the key (servers of your own may need
        none: the key is then "EMPTY")."""
        import openai

        key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and key is None and "localhost" not in base_url and "127.0.0.1" not in base_url:
            raise UsageError(f"${api_key_env} is not set; export the API key of {base_url} there, or pass "
                             "--api-key-env NAME")
        self.model = model
        self.temperature, self.max_tokens = temperature, max_tokens
        self.client = openai.OpenAI(base_url=base_url, api_key=key or "EMPTY", timeout=timeout_s,
                                    max_retries=max_retries)

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        """One completion; `tools` go to the API only when there are some (some servers reject an empty
        list, and a plain completion needs none)."""
        kw: dict[str, Any] = {}
        if tools:
            kw["tools"] = tools
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        if self.max_tokens is not None:
            kw["max_tokens"] = self.max_tokens
        t0 = time.monotonic()
        resp = self.client.chat.completions.create(model=self.model, messages=messages, **kw)
        choice = resp.choices[0]
        msg = choice.message
        out: dict[str, Any] = {"role": "assistant", "content": msg.content or ""}
        if msg.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                 for c in msg.tool_calls]
        usage = {}
        if resp.usage is not None:
            usage = {k: int(getattr(resp.usage, k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        return Reply(out, usage, choice.finish_reason, time.monotonic() - t0)
