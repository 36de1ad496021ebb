"""An episode's `trajectory.jsonl`: written as the episode happens (`TrajectoryWriter`: agent/loop.py
and the verl agent loop), read back as records (`records`: `cuda-agent replay`) and as the
conversation the model had (`read_trajectory`: rejection fine-tuning, rl/rft.py). One JSON object per
line:

    {"type": "meta", "task", "model", "isolation", "config", "tools", "tool_specs", "started"}
    {"type": "message", "turn", "message", "usage", "finish_reason", "seconds"}    the model's turns
    {"type": "tool", "turn", "id", "name", "arguments", "result", "ok", "seconds"}  each tool call
    {"type": "elided", "turn", "messages", "tokens"}                                context budget
    {"type": "error", "turn", "error"}                                              the endpoint failed
    {"type": "final", "stop", "turns", "tokens", "wall_s", "eval_s", "invalid_tool_calls", "result"}

Each line is flushed as it is written, so an episode killed mid-write leaves a partial last line after
its meta record and no final one: readers take it as an episode that did not finish.

The conversation is rebuilt exactly as the model had it: the system and first user prompts, then each
assistant message followed by one tool message per call, in order (the tool outputs in full: where the
context budget elided old outputs, `elided` counts the times). The tools' schemas come from the meta
record (`tool_specs`); trajectories written before it was recorded get today's schemas of the tools it
names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from cuda_agent.errors import UsageError

_WHAT = "trajectories are the trajectory.jsonl files that `cuda-agent solve` and `bench --agent` write"


class TrajectoryError(UsageError):
    """A trajectory file that cannot be read (not JSON lines, no meta record), with its file and line."""


class TrajectoryWriter:
    """Appends records to a new trajectory.jsonl, each flushed as it is written."""

    def __init__(self, path: Path):
        self.path = path
        self.f = open(path, "w", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self.f.write(json.dumps(record, default=str) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def trajectory_file(path: str | Path) -> Path:
    """`path` itself, or the trajectory.jsonl in it when it is an episode's folder (solve's --out)."""
    path = Path(path)
    if path.is_dir():
        path = path / "trajectory.jsonl"
    if not path.is_file():
        raise TrajectoryError(f"{path}: no trajectory here; pass a trajectory.jsonl or the --out folder of `solve`")
    return path


def records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each record of the trajectory at `path`, in order; a partial last
    line of an episode cut off while writing ends it. TrajectoryError names a line that is not a
    record."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"{path}: cannot be read ({exc})") from None
    started = finished = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as exc:
            if n == len(lines) and started and not finished:
                return  # the last line of an episode cut off while writing: it did not finish
            raise TrajectoryError(f"{path}:{n}: not a JSON line ({exc}); {_WHAT}") from None
        if not isinstance(r, dict) or "type" not in r:
            raise not_a_record(path, n, "no record type")
        started |= r["type"] == "meta"
        finished |= r["type"] == "final"
        yield n, r


def not_a_record(path: Path, line: int, why: Any) -> TrajectoryError:
    """The error of a JSON line that is not the record its type says (a missing field, say)."""
    return TrajectoryError(f"{path}:{line}: not a trajectory record ({why}); {_WHAT}")


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


def read_trajectory(path: str | Path) -> Trajectory:
    """Read one trajectory.jsonl. TrajectoryError (with the file and line) when it is not one."""
    path = Path(path)
    meta: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = []
    tool_ok: list[bool] = []
    elided = 0
    final = None
    for n, r in records(path):
        try:
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
        except (KeyError, TypeError) as exc:
            raise not_a_record(path, n, f"{type(exc).__name__}: {exc}") from None
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
