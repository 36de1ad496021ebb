"""An episode's trajectory.jsonl (agent/loop.py) read back for training.

The conversation is rebuilt exactly as the model had it: the system and first user prompts, then each
assistant message followed by one tool message per call, in order (the tool outputs in full: where the
context budget elided old outputs, `elided` counts the times). The tools' schemas come from the
trajectory's meta record (`tool_specs`); trajectories written before it was recorded get today's
schemas of the tools it names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from cuda_agent.errors import CudaAgentError


class TrajectoryError(CudaAgentError):
    """A trajectory file that cannot be read (not JSON lines, no meta record)."""


@dataclass
class Trajectory:
    path: Path
    task: str
    model: str
    messages: list[dict[str, Any]]  # the conversation, in the chat-completions format
    tools: list[dict[str, Any]]  # the tools' schemas, in the chat-completions `tools` format
    tool_ok: list[bool] = field(default_factory=list)  # per tool call, in order: was it valid
    elided: int = 0  # times the context budget elided old tool outputs
    final: dict[str, Any] | None = None  # the final record; None when the episode did not finish writing

    @property
    def finished(self) -> bool:
        return self.final is not None

    @property
    def result(self) -> dict[str, Any]:
        return (self.final or {}).get("result") or {}

    @property
    def reward(self) -> float | None:
        """The final evaluation's milestone reward (None when there is none)."""
        r = self.result.get("reward")
        return float(r) if isinstance(r, (int, float)) else None

    @property
    def invalid_tool_calls(self) -> int:
        return sum(not ok for ok in self.tool_ok)

    def turn_signatures(self) -> list[tuple]:
        """One hashable signature per assistant message: its tool calls (name and arguments, JSON
        normalised), or its text when it calls none."""
        sigs = []
        for m in self.messages:
            if m.get("role") != "assistant":
                continue
            calls = m.get("tool_calls") or []
            if calls:
                sigs.append(tuple((c.get("function", {}).get("name"), _canonical(c.get("function", {}).get("arguments")))
                                  for c in calls))
            else:
                sigs.append(("text", (m.get("content") or "").strip()))
        return sigs


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, sort_keys=True)


def longest_loop(signatures: list[tuple], max_period: int = 3) -> tuple[int, int]:
    """The most times a block of 1 to `max_period` consecutive turns repeats back to back:
    (repeats, period). (1, 1) when nothing repeats."""
    best = (1, 1)
    n = len(signatures)
    for p in range(1, max_period + 1):
        for i in range(n - p):
            k = 1
            while i + (k + 1) * p <= n and signatures[i + k * p:i + (k + 1) * p] == signatures[i:i + p]:
                k += 1
            if k > best[0]:
                best = (k, p)
    return best


def read_trajectory(path: str | Path) -> Trajectory:
    """Read one trajectory.jsonl. TrajectoryError (with the file and line) when it is not one."""
    path = Path(path)
    meta: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = []
    tool_ok: list[bool] = []
    elided = 0
    final = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"{path}: cannot be read ({exc})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            kind = r["type"]
            if kind == "meta":
                meta = r
            elif kind == "message":
                messages.append(r["message"])
            elif kind == "tool":
                messages.append({"role": "tool", "tool_call_id": r["id"], "content": r["result"]})
                tool_ok.append(bool(r["ok"]))
            elif kind == "elided":
                elided += 1
            elif kind == "final":
                final = r
        except (ValueError, KeyError, TypeError) as exc:
            if n == len(lines) and final is None and meta is not None:
                break  # the last line of an episode cut off while writing: the episode did not finish
            raise TrajectoryError(f"{path}:{n}: not a trajectory record ({type(exc).__name__}: {exc}); "
                                  "trajectories are the trajectory.jsonl files that `cuda-agent solve` "
                                  "and `bench --agent` write") from None
    if meta is None:
        raise TrajectoryError(f"{path}: no meta record; is this a trajectory.jsonl of `cuda-agent solve`?")
    tools = meta.get("tool_specs")
    if tools is None:  # written before the schemas were recorded: today's, of the tools it names
        from cuda_agent.agent.toolbox import Toolbox

        named = set(meta.get("tools") or [])
        tools = [t for t in Toolbox.specs() if t["function"]["name"] in named]
    return Trajectory(path=path, task=str(meta.get("task")), model=str(meta.get("model")), messages=messages,
                      tools=tools, tool_ok=tool_ok, elided=elided, final=final)


def find_trajectories(root: str | Path) -> Iterator[Path]:
    """Every trajectory.jsonl under `root` (a file is itself), in path order."""
    root = Path(root)
    if root.is_file():
        yield root
        return
    if not root.is_dir():
        raise TrajectoryError(f"{root}: no such folder; pass the --out folder of `cuda-agent solve` or "
                              "`bench --agent`, or a trajectory.jsonl")
    yield from sorted(root.rglob("trajectory.jsonl"))
