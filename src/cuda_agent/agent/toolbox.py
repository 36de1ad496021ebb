"""Every tool of the agent behind one `call`: the file tools (tools.py) and the shell tools, Bash,
BashOutput and KillBash, which run in the sandbox (sandbox.py). Schemas follow the Claude Code tool
set. Whatever the model sends (malformed JSON, an unknown tool, wrong arguments), the result is text
it can act on, and `ok` says whether the call was valid, for the trajectory's statistics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cuda_agent.agent.sandbox import Sandbox
from cuda_agent.agent.tools import SCHEMAS as FILE_SCHEMAS
from cuda_agent.agent.tools import FileTools, ToolError, check_args, schema

BASH_DEFAULT_MS = 120_000
BASH_MAX_MS = 600_000

SHELL_SCHEMAS: dict[str, dict[str, Any]] = {
    "Bash": {
        "description": "Run a bash command in the workspace (sandboxed: no network, writes only in the "
                       f"workspace and /tmp). Times out after `timeout` ms (default {BASH_DEFAULT_MS}, at most "
                       f"{BASH_MAX_MS}); with run_in_background it returns a shell id at once.",
        "parameters": schema({
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "integer", "description": f"Milliseconds (at most {BASH_MAX_MS})"},
            "run_in_background": {"type": "boolean", "description": "Run it in the background; read its "
                                  "output with BashOutput"},
            "description": {"type": "string", "description": "What the command does, in 5-10 words"},
        }, ["command"]),
    },
    "BashOutput": {
        "description": "The new output and the status of a background shell.",
        "parameters": schema({"bash_id": {"type": "string", "description": "The shell's id"}}, ["bash_id"]),
    },
    "KillBash": {
        "description": "Kill a background shell.",
        "parameters": schema({"shell_id": {"type": "string", "description": "The shell's id"}}, ["shell_id"]),
    },
}
SCHEMAS = {**SHELL_SCHEMAS, **FILE_SCHEMAS}


@dataclass
class ToolResult:
    text: str
    ok: bool  # False: an invalid call (malformed, unknown tool, bad arguments, error result)


class Toolbox:
    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.files = FileTools(sandbox.root)

    @staticmethod
    def specs() -> list[dict[str, Any]]:
        """The tools in the chat-completions `tools` format."""
        return [{"type": "function", "function": {"name": k, **v}} for k, v in SCHEMAS.items()]

    def call(self, name: str, arguments: str | dict[str, Any] | None) -> ToolResult:
        if name not in SCHEMAS:
            return ToolResult(f"Error: no tool named {name!r}; the tools are {', '.join(SCHEMAS)}", False)
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as exc:
                return ToolResult(f"Error: the arguments of {name} are not valid JSON ({exc}); send one JSON "
                                  "object", False)
        if not isinstance(arguments, dict):
            return ToolResult(f"Error: the arguments of {name} must be a JSON object", False)
        if name in FILE_SCHEMAS:
            text = self.files.call(name, arguments)
            return ToolResult(text, not text.startswith("Error:"))
        try:
            check_args(name, arguments, SHELL_SCHEMAS)
            return ToolResult(getattr(self, f"_{name.lower()}")(**arguments), True)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", False)

    def _bash(self, command: str, timeout: int | None = None, run_in_background: bool = False,
              description: str | None = None) -> str:
        if not command.strip():
            raise ToolError("Bash: the command is empty")
        if run_in_background:
            return f"Command running in background with ID: {self.sandbox.start(command)}"
        ms = min(max(int(timeout or BASH_DEFAULT_MS), 1000), BASH_MAX_MS)
        r = self.sandbox.run(command, timeout_s=ms / 1000)
        text = r.output.rstrip("\n")
        if r.timed_out:
            text += f"\nCommand timed out after {ms} ms and was killed"
        elif r.exit_code:
            text += f"\nExit code {r.exit_code}"
        return text or "(no output)"

    def _bashoutput(self, bash_id: str) -> str:
        try:
            status, out = self.sandbox.output(bash_id)
        except KeyError as exc:
            raise ToolError(str(exc.args[0])) from None
        return f"<status>{status}</status>\n{out.rstrip()}" if out else f"<status>{status}</status>"

    def _killbash(self, shell_id: str) -> str:
        try:
            self.sandbox.kill(shell_id)
        except KeyError as exc:
            raise ToolError(str(exc.args[0])) from None
        return f"Killed {shell_id}"
