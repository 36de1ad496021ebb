"""An agent episode driven by a scripted model, for the figures of an episode on a machine without an
LLM (the GPU machine has no network): the model writes the bundled example's kernel for the device,
compiles, verifies, profiles and stops. Prints turns, wall time, time in the evaluator, the isolation
and the final verdict.

    python benchmarks/scripted_episode.py --device cuda [--example elementwise] [--out DIR] [--unsandboxed]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from cuda_agent.agent.llm import ChatClient
from cuda_agent.agent.loop import EpisodeConfig, run_episode
from cuda_agent.agent.scripted import ScriptedServer, ScriptStep
from cuda_agent.evaluate import EvalConfig
from cuda_agent.evaluate.device import resolve_device
from cuda_agent.examples import get_example
from cuda_agent.tasks import load_task


def script(example, device: str) -> list[ScriptStep]:
    ws = example.candidate_path(device, "workspace")
    files = {str(p.relative_to(ws)): p.read_text() for p in sorted(ws.rglob("*")) if p.is_file()}
    flag = f"--device {device}"
    return [
        ScriptStep(content="Reading the task.", tool_calls=[("Read", {"file_path": "model.py"}),
                                                            ("Read", {"file_path": "SKILL.md", "limit": 60})]),
        ScriptStep(content="Writing the kernel.", tool_calls=[("Write", {"file_path": k, "content": v})
                                                              for k, v in files.items()]),
        ScriptStep(tool_calls=[("Bash", {"command": "rm -f kernels/example_scale*"}),
                               ("Bash", {"command": f"bash utils/compile.sh {flag}"})]),
        ScriptStep(tool_calls=[("Bash", {"command": f"python3 -m utils.verification {flag}"})]),
        ScriptStep(tool_calls=[("Bash", {"command": f"python3 -m utils.profiling {flag}"})]),
        ScriptStep(content="Correct and timed; done."),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--example", default="elementwise")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--unsandboxed", action="store_true")
    args = p.parse_args()
    device = resolve_device(args.device)
    ex = get_example(args.example)
    out = args.out or Path(tempfile.mkdtemp(prefix="cuda-agent-episode-"))
    cfg = EpisodeConfig(device=device, allow_unsandboxed=args.unsandboxed, eval=EvalConfig(device=device))
    with ScriptedServer(script(ex, device)) as server:
        ep = run_episode(load_task(ex.task), out, ChatClient(server.base_url, "scripted", api_key_env=None), cfg)
    final = json.loads((out / "trajectory.jsonl").read_text().splitlines()[-1])
    meta = json.loads((out / "trajectory.jsonl").read_text().splitlines()[0])
    print(json.dumps({"device": device, "stop": ep.stop, "turns": ep.turns, "wall_s": round(ep.wall_s, 1),
                      "eval_s": round(ep.eval_s, 1), "isolation": meta["isolation"]["level"],
                      "workspace_commands": final["workspace_commands"], "reward": ep.result.reward,
                      "speedup_eager": ep.result.speedup_eager, "speedup_compile": ep.result.speedup_compile,
                      "reasons": [r.code.value for r in ep.result.reasons], "out": str(out)}, indent=1))
    return 0 if ep.result.correct else 1


if __name__ == "__main__":
    sys.exit(main())
