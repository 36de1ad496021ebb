"""The milestone reward of CUDA Agent (DESIGN section 1), and ours on the speed of light (`--reward sol`)."""

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


# `--reward sol` (ours, not the paper's): thresholds on the fraction of the speed of light (sol.py).
SOL_STEPS = ((0.5, 3), (0.2, 2))


def sol_reward(correct: bool, fraction: float | None) -> int:
    """-1 if not correct; 3 at half the speed of light or more, 2 at a fifth or more, 1 otherwise
    (and when the fraction is unknown: not timed, or no peaks). Unlike the milestone reward it does
    not pay for beating a weak reference, and keeps paying where the reference is already fast."""
    if not correct:
        return -1
    for at_least, reward in SOL_STEPS:
        if fraction is not None and fraction >= at_least:
            return reward
    return 1
