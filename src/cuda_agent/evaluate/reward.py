"""The milestone reward of CUDA Agent (DESIGN section 1)."""

from __future__ import annotations

# "more than 5% faster": a speedup strictly above this counts.
FASTER_THAN = 1.05


def milestone_reward(correct: bool, speedup_eager: float | None, speedup_compile: float | None) -> int:
    """-1 if not correct; 3 if more than 5% faster than both eager and compile; 2 if more than 5%
    faster than eager only; 1 if correct otherwise. A baseline that was not measured (None) is never
    beaten, so a missing compile baseline caps the reward at 2."""
    if not correct:
        return -1
    beats_eager = speedup_eager is not None and speedup_eager > FASTER_THAN
    beats_compile = speedup_compile is not None and speedup_compile > FASTER_THAN
    if beats_eager and beats_compile:
        return 3
    if beats_eager:
        return 2
    return 1
