#!/usr/bin/env bash
# utils/compile.sh -- fixed entry point into cuda-agent's evaluator (do not edit; edits change nothing).
# Builds kernels/*.cu / *.cpp with the fixed binding.cpp into the Python module `cuda_extension`,
# through the evaluator's build cache, and checks that the module loads.
# Usage: bash utils/compile.sh [--device cuda|cpu] [--json]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$root"
# The workspace is dropped from the import path: nothing in it may shadow cuda_agent or torch.
exec "${CUDA_AGENT_PYTHON:-python3}" -c '
import os, sys
root = os.path.realpath(sys.argv[1])
sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != root]
from cuda_agent.workspace.commands import main
sys.exit(main("compile", root, sys.argv[2:]))
' "$root" "$@"
