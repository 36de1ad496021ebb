"""What the Markdown reports of `bench` and `synth` share: numbers as the reports print them, and a
matplotlib that draws to files on machines without a screen."""

from __future__ import annotations

from typing import Any


def percent(v: float) -> str:
    """A share in [0, 1] as a percentage with one decimal: 0.4567 -> "45.7%"."""
    return f"{100 * v:.1f}%"


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (PNG files, no display needed); imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
