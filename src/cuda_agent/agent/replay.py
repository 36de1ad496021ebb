"""A trajectory (agent/trajectory.py) as a readable transcript: `cuda-agent replay`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from cuda_agent.agent.trajectory import records, trajectory_file
from cuda_agent.text import clip


def transcript(path: str | Path, width: int = 1500, prompts: bool = False) -> Iterator[str]:
    """The transcript of the trajectory at `path` (a file or an episode's folder), one entry at a
    time (an entry may span lines): texts clipped to `width` characters, the system and first user
    prompts only counted unless `prompts`. A line that is not a record raises TrajectoryError (a
    UsageError) naming it."""
    return _entries(trajectory_file(path), width, prompts)


def _entries(path: Path, width: int, prompts: bool) -> Iterator[str]:
    def short(text: Any) -> str:
        text = "" if text is None else str(text)
        return clip(text, width, keep="head")

    def speedup(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}x"

    for _, r in records(path):
        kind = r.get("type")
        if kind == "meta":
            yield f"# {r['task']} with {r['model']} (sandbox: {r['isolation']['level']}), started {r['started']}\n"
        elif kind == "message":
            m = r["message"]
            if m["role"] in ("system", "user") and not prompts:
                yield f"[{m['role']}: {len(m['content'])} characters; --prompts shows them]"
            elif m.get("content"):
                yield f"[turn {r['turn']}] {m['role']}: {short(m['content'])}"
            for c in m.get("tool_calls") or []:
                yield f"[turn {r['turn']}] -> {c['function']['name']} {short(c['function']['arguments'])}"
        elif kind == "tool":
            mark = "" if r["ok"] else " (invalid)"
            yield f"[turn {r['turn']}] <- {r['name']}{mark} in {r['seconds']} s:\n{short(r['result'])}\n"
        elif kind == "elided":
            yield f"[turn {r['turn']}] ({r['messages']} old tool outputs elided for the context budget)"
        elif kind == "error":
            yield f"[turn {r['turn']}] error: {r['error']}"
        elif kind == "final":
            res = r["result"]
            yield (f"\n# {r['stop']} after {r['turns']} turns, {r['wall_s']} s ({r['eval_s']} s evaluating), "
                   f"{r['tokens'].get('total_tokens', 0)} tokens, {r['invalid_tool_calls']} invalid tool calls")
            yield (f"# final evaluation: reward {res['reward']}, correct {res['correct']}, "
                   f"vs eager {speedup(res.get('speedup_eager'))}, vs compile {speedup(res.get('speedup_compile'))}"
                   + (f", reasons: {', '.join(why['code'] for why in res['reasons'])}" if res.get("reasons") else ""))
