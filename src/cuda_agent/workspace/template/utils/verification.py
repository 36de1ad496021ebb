"""Fixed entry point into cuda-agent's evaluator (do not edit; edits change nothing).

    python3 -m utils.verification [--device cuda|cpu] [--trials N] [--json]

Checks ModelNew (model_new.py + kernels/) against the task's Model on fresh random inputs and stress
inputs. Exit status 0 when correct, 1 when not.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The workspace is dropped from the import path: nothing in it may shadow cuda_agent or torch.
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != ROOT]

from cuda_agent.workspace.commands import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("verify", ROOT, sys.argv[1:]))
