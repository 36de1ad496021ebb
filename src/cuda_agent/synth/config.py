"""Configuration of a `synth` run: its settings with their defaults. Field docstrings double as the
CLI help text (`cli.options.field_docs`). Imports nothing heavy: the command line reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.errors import UsageError
from cuda_agent.synth import COMPOSERS

# Share of tasks by number of operators. The paper's data: 83.8% two-operator compositions; the rest
# spread over one and three to five.
DEFAULT_MIX: dict[int, float] = {1: 0.05, 2: 0.838, 3: 0.07, 4: 0.03, 5: 0.012}
# Default runtime windows (eager ms per call). CUDA: the paper's. CPU: shorter at the top, so that a
# run on a laptop or CI stays quick; the bottom keeps launch-overhead-only tasks out.
WINDOWS = {"cuda": (1.0, 100.0), "cpu": (0.5, 50.0)}


def parse_mix(text: str | None) -> dict[int, float]:
    """`"1:0.05,2:0.84,3:0.07,4:0.03,5:0.01"` -> {1: 0.05, ...}, normalised; None -> DEFAULT_MIX."""
    if not text:
        return dict(DEFAULT_MIX)
    mix: dict[int, float] = {}
    for part in text.split(","):
        try:
            k, v = part.split(":")
            n, w = int(k), float(v)
        except ValueError:
            raise UsageError(f"mix {text!r}: each part must be OPS:WEIGHT, e.g. 2:0.84") from None
        if not 1 <= n <= 5 or w < 0:
            raise UsageError(f"mix {text!r}: operator counts go from 1 to 5 and weights are >= 0")
        mix[n] = mix.get(n, 0.0) + w
    total = sum(mix.values())
    if total <= 0:
        raise UsageError(f"mix {text!r}: the weights sum to zero")
    return {n: w / total for n, w in sorted(mix.items())}


def parse_window(text: str) -> tuple[float, float]:
    """`"1,100"` -> (1.0, 100.0): a window of eager ms per call, LO >= 0 and under HI."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"window {text!r}: give LO,HI in milliseconds, e.g. 1,100") from None
    if not 0 <= lo < hi:
        raise UsageError(f"window {text!r}: LO must be >= 0 and under HI")
    return lo, hi


def _default_mix() -> dict[int, float]:
    return dict(DEFAULT_MIX)


_default_mix.__doc__ = ",".join(f"{n}:{w:g}" for n, w in DEFAULT_MIX.items()) + ", close to the paper's"  # the help's default


@dataclass
class SynthConfig:
    """What a run makes and how. `settings()` is what must match for a run to resume in the same
    folder."""

    out: Path
    """Output folder (a run there resumes)."""
    n: int
    """Tasks to accept."""
    device: str = "auto"
    """Where the drafts are probed: cuda, cpu or auto (cuda when there is a GPU)."""
    seed: int = 0
    """The run's seed: attempt i draws from (seed, i)."""
    composer: str = "offline"
    """Who writes the drafts: offline (the shape-aware composer) or llm (--base-url/--model write them)."""
    mix: dict[int, float] = field(default_factory=_default_mix)
    """Share of tasks by operator count, OPS:WEIGHT pairs such as 2:1,3:1 (weights are normalised)."""
    window_ms: tuple[float, float] | None = None
    """Eager time per call to keep, LO,HI in ms (default 1,100 on cuda, 0.5,50 on cpu)."""
    threshold: float = 0.9
    """Decontamination: drafts at or over this AST similarity to a KernelBench task are dropped."""
    dedup_threshold: float = 0.95
    """Drafts at or over this similarity to an accepted task are duplicates."""
    kernelbench: Path | None = None
    """A KernelBench checkout whose levels 1-3 drafts are checked against (--threshold)."""
    workers: int | None = None
    """Probe processes (default 4 per GPU, 2 on the CPU backend)."""
    gpus: list[str] | None = None
    """The GPUs the probes use (default: all)."""
    timeout_s: float = 300.0
    """Seconds one draft may take."""
    max_attempts: int | None = None
    """Give up after this many drafts (default 50 x N)."""
    model: str | None = None
    """The LLM composer's model (recorded in synth.json)."""
    isolation: str = "required"
    """The drafts' sandbox: required (refuse to start without one), auto (run unsandboxed with a
    warning where the machine cannot make one) or off."""

    def __post_init__(self) -> None:
        from cuda_agent.evaluate.device import resolve_device

        if self.composer not in COMPOSERS:
            raise ValueError(f"composer={self.composer!r}: use one of {', '.join(COMPOSERS)}")
        self.device = resolve_device(self.device)

    def settings(self) -> dict[str, Any]:
        """What must match for a run to resume in the same folder."""
        return {"seed": self.seed, "composer": self.composer, "device": self.device,
                "mix": {str(k): v for k, v in self.mix.items()}, "window_ms": list(self.window()),
                "threshold": self.threshold, "dedup_threshold": self.dedup_threshold,
                "kernelbench": str(self.kernelbench) if self.kernelbench else None, "model": self.model}

    def window(self) -> tuple[float, float]:
        return tuple(self.window_ms or WINDOWS[self.device])  # type: ignore[return-value]
