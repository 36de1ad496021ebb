"""A scripted OpenAI-compatible chat-completions server: each request gets the next step of a script.
For tests and dry runs of everything that talks to a model (the agent loop, RL rollouts), over real
HTTP with the real `openai` client.

    steps = [ScriptStep(tool_calls=[("Read", {"file_path": "model.py"})]), ScriptStep(content="done")]
    with ScriptedServer(steps) as server:
        client = ChatClient(server.base_url, "scripted", api_key_env=None)

A step's `tool_calls` hold (name, arguments) pairs; arguments given as a string are sent verbatim
(malformed JSON, for tests). A step may also be a callable receiving the request's messages and
returning a step (to react to tool results). When the script runs out, the server answers "done"
without tool calls. `requests` keeps every request body.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class ScriptStep:
    content: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    prompt_tokens: int | None = None  # usage to report (default: a count of the request's characters / 4)
    status: int = 200  # another status makes the server fail this request (the client retries)


class ScriptedServer:
    def __init__(self, steps: list[ScriptStep | Callable[[list[dict]], ScriptStep]]):
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, payload = server._answer(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append(body)
            n = len(self.requests)
            step = self.steps.pop(0) if self.steps else ScriptStep(content="done")
        if callable(step):
            step = step(body.get("messages", []))
        if step.status != 200:
            return step.status, {"error": {"message": "scripted failure", "type": "server_error"}}
        calls = [{"id": f"call_{n}_{i}", "type": "function",
                  "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                 for i, (name, args) in enumerate(step.tool_calls)]
        prompt = step.prompt_tokens if step.prompt_tokens is not None else len(json.dumps(body.get("messages"))) // 4
        completion = max(len(step.content) // 4 + 20 * len(calls), 1)
        message: dict[str, Any] = {"role": "assistant", "content": step.content or None}
        if calls:
            message["tool_calls"] = calls
        return 200, {
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
