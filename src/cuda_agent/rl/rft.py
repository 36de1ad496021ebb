"""Rejection fine-tuning data (the paper's second warm-up stage): the agent trajectories whose final
evaluation earned a reward above zero, with no invalid tool call and no redundant loop, as rows of
verl's multi-turn SFT format.

Each row holds `messages` (the conversation in the chat-completions format, tool calls and tool
results included) and `tools` (the tools' schemas), both as JSON text, plus the task, reward and
speedups for inspection. JSON text, not Parquet structs: a struct column is the union of every
element's keys, so each tool's schema would come back with every other tool's parameters as nulls, and
the chat template would show the model tools that do not exist. `verl_sft.JsonMultiTurnSFTDataset`
(the recipes' `data.custom_cls`) decodes them for verl's trainer.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from cuda_agent.errors import CudaAgentError
from cuda_agent.parquet import write_rows
from cuda_agent.agent.trajectory import Trajectory, TrajectoryError, find_trajectories, read_trajectory


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


@dataclass(frozen=True)
class RFTFilter:
    """What a trajectory must satisfy to be kept (the paper's: reward > 0, no invalid tool call,
    no redundant loop)."""

    min_reward: float = 0.0  # kept when the final reward is strictly above this
    max_invalid_tool_calls: int = 0
    loop_repeats: int = 3  # a block of turns repeated this many times back to back is a redundant loop
    loop_max_period: int = 3  # blocks of 1 to this many turns are looked for

    def __post_init__(self) -> None:
        if self.max_invalid_tool_calls < 0 or self.loop_repeats < 2 or self.loop_max_period < 1:
            raise ValueError("RFT filter: need max_invalid_tool_calls >= 0, loop_repeats >= 2 and "
                             "loop_max_period >= 1")

    def reasons(self, traj: Trajectory) -> list[str]:
        """Why `traj` is rejected; empty when it is kept."""
        if not traj.finished:
            return ["unfinished"]
        out = []
        if traj.reward is None or traj.reward <= self.min_reward:
            out.append("reward")
        if traj.invalid_tool_calls > self.max_invalid_tool_calls:
            out.append("invalid_tool_calls")
        if longest_loop(traj.turn_signatures(), self.loop_max_period)[0] >= self.loop_repeats:
            out.append("redundant_loop")
        return out


@dataclass
class RFTReport:
    thresholds: dict[str, Any]
    trajectories: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # by reason (a trajectory may have several)
    unreadable: list[str] = field(default_factory=list)  # "path: why"
    kept_with_elided_context: int = 0
    kept_by_reward: dict[str, int] = field(default_factory=dict)
    out: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def sft_row(traj: Trajectory) -> dict[str, Any]:
    res = traj.result
    return {"messages": json.dumps(traj.messages, ensure_ascii=False),
            "tools": json.dumps(traj.tools, ensure_ascii=False),
            "task": traj.task, "model": traj.model, "reward": traj.reward,
            "speedup_eager": res.get("speedup_eager"), "speedup_compile": res.get("speedup_compile"),
            "turns": sum(m.get("role") == "assistant" for m in traj.messages), "source": str(traj.path)}


def select(paths: Iterable[Path], flt: RFTFilter) -> tuple[list[Trajectory], RFTReport]:
    """The trajectories of `paths` that `flt` keeps, and the report of what was dropped and why."""
    report = RFTReport(thresholds=asdict(flt))
    rejected: Counter[str] = Counter()
    by_reward: Counter[str] = Counter()
    kept = []
    for p in paths:
        report.trajectories += 1
        try:
            traj = read_trajectory(p)
        except TrajectoryError as exc:
            report.unreadable.append(str(exc))
            rejected["unreadable"] += 1
            continue
        reasons = flt.reasons(traj)
        rejected.update(reasons)
        if not reasons:
            kept.append(traj)
            by_reward[str(int(traj.reward) if float(traj.reward).is_integer() else traj.reward)] += 1
            report.kept_with_elided_context += traj.elided > 0
    report.kept = len(kept)
    report.rejected = dict(sorted(rejected.items()))
    report.kept_by_reward = dict(sorted(by_reward.items()))
    return kept, report


def build_rft(trajectories: str | Path, out: str | Path, flt: RFTFilter | None = None) -> RFTReport:
    """Filter every trajectory.jsonl under `trajectories` and write the kept ones to the Parquet file
    `out`, with the report beside it (`out` with the suffix .report.json)."""
    try:
        import pyarrow as pa
    except ImportError:
        raise CudaAgentError("writing Parquet needs pyarrow: pip install 'cuda-agent[data]'") from None
    out = Path(out)
    if out.suffix != ".parquet":
        raise CudaAgentError(f"{out}: the RFT data is a Parquet file; give a path ending in .parquet")
    paths = list(find_trajectories(trajectories))
    if not paths:
        raise CudaAgentError(f"{trajectories}: no trajectory.jsonl under it; point --trajectories at the "
                             "--out folder of `cuda-agent solve` or `bench --agent`")
    kept, report = select(paths, flt or RFTFilter())
    rows = [sft_row(t) for t in kept]
    schema = pa.schema([("messages", pa.string()), ("tools", pa.string()), ("task", pa.string()),
                        ("model", pa.string()), ("reward", pa.float64()), ("speedup_eager", pa.float64()),
                        ("speedup_compile", pa.float64()), ("turns", pa.int64()), ("source", pa.string())])
    write_rows(out, rows, schema)
    report.out = str(out)
    out.with_suffix(".report.json").write_text(json.dumps(report.to_json(), indent=1) + "\n")
    return report
