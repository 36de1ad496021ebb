"""Composition: 1 to 5 catalogued operators chained into one KernelBench-format task (a `Draft`).

The offline composer (the default) is shape-aware: it opens with an operator and a typical input
shape for it, then appends operators that accept the running shape, and renders the chain
(`render.py`). Attempt `i` of a run with seed `s` draws from its own generator (`attempt_rng`), so a
draft depends on (s, i) only: reproducible, and resumable from any attempt. The LLM composer
(`llm_compose.py`) writes drafts from sampled operators instead; both feed the same filters.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from cuda_agent.synth.catalogue import CATALOGUE, Instance, Op, Shape, ops
from cuda_agent.synth.config import DEFAULT_MIX
from cuda_agent.synth.render import render

# Families kept out of the opening position: they rarely make a task on their own worth a kernel.
_NOT_FIRST = frozenset({"shape", "pad"})


@dataclass(frozen=True)
class Draft:
    """A candidate task before the filters: its source and what it was made of."""

    attempt: int
    seed: int
    composer: str  # "offline" | "llm"
    source: str
    ops: tuple[str, ...]
    families: tuple[str, ...]
    batch_scalable: bool = True  # has one `batch_size = N` line that scales the work (set_batch)

    @property
    def name(self) -> str:
        return task_name(self.ops, self.attempt)


def task_name(op_names: Sequence[str], attempt: int) -> str:
    """`s000042_Conv2d_GELU`: the attempt, then the operators' short names."""
    short = [re.sub(r"\W", "", n.rsplit(".", 1)[-1]) or "op" for n in op_names]
    return f"s{attempt:06d}_" + "_".join(short)[:80]


def attempt_rng(seed: int, attempt: int) -> random.Random:
    return random.Random(f"cuda-agent-synth:{seed}:{attempt}")


def draw_count(rng: random.Random, mix: dict[int, float]) -> int:
    return rng.choices(list(mix), weights=list(mix.values()))[0]


def sample_ops(rng: random.Random, n: int, pool: Sequence[Op] | None = None) -> list[Op]:
    """`n` operators, families first (uniform over families, then over their operators): without it
    the biggest families (elementwise, activations) would crowd out convolutions and attention."""
    pool = list(pool) if pool is not None else ops()
    by_family: dict[str, list[Op]] = {}
    for op in pool:
        by_family.setdefault(op.family, []).append(op)
    families = sorted(by_family)
    return [rng.choice(by_family[rng.choice(families)]) for _ in range(n)]


def compose_offline(seed: int, attempt: int, mix: dict[int, float] | None = None,
                    pool: Sequence[Op] | None = None, tries: int = 20) -> Draft | None:
    """A chain of operators whose shapes connect, rendered; None when no chain was found in `tries`."""
    rng = attempt_rng(seed, attempt)
    pool = list(pool) if pool is not None else ops()
    n = draw_count(rng, mix or DEFAULT_MIX)
    openers = [op for op in pool if op.family not in _NOT_FIRST] or pool
    for _ in range(tries):
        first = sample_ops(rng, 1, openers)[0]
        shape: Shape = first.start_shape(rng)
        inst = first.make(rng, shape)
        if inst is None:
            continue
        chain: list[Instance] = [inst]
        input_shape = shape
        while len(chain) < n:
            nxt = _next(rng, chain[-1].out_shape, pool, exclude=chain[-1].op)
            if nxt is None:
                break
            chain.append(nxt)
        if len(chain) < n:
            continue
        names = tuple(i.op for i in chain)
        source = render(chain, input_shape)
        return Draft(attempt=attempt, seed=seed, composer="offline", source=source, ops=names,
                     families=tuple(CATALOGUE[o].family for o in names))
    return None


def _next(rng: random.Random, shape: Shape, pool: Sequence[Op], exclude: str, tries: int = 12) -> Instance | None:
    fits = [op for op in pool if len(shape) in op.ranks and op.name != exclude]
    for op in sample_ops(rng, min(tries, len(fits)), fits) if fits else ():
        inst = op.make(rng, shape)
        if inst is not None:
            return inst
    return None
