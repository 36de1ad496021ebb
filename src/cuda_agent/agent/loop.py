"""One episode: the model works in a fresh workspace through the tools until it stops calling them,
or the turn, context or wall-clock budget runs out; then the final workspace gets a fresh, full
evaluation, and that verdict is the episode's result (never anything the agent printed).

Everything is written as it happens to `trajectory.jsonl` (agent/trajectory.py says its records).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.agent.bridge import EvalBridge
from cuda_agent.agent.config import EpisodeConfig
from cuda_agent.agent.llm import ChatClient
from cuda_agent.agent.sandbox import Limits, Sandbox
from cuda_agent.agent.toolbox import Toolbox
from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.evaluate import EvalConfig, EvalResult, evaluate, load_candidate
from cuda_agent.evaluate.evaluator import EvaluatorBase
from cuda_agent.tasks import Task
from cuda_agent.workspace import init_workspace

SYSTEM = """You are an expert GPU kernel engineer working in a development workspace through tools. \
Your job: make the PyTorch model in model.py faster with your own kernels, written as SKILL.md says. \
Use the tools to read files, write code, compile, verify and profile; iterate until your ModelNew is \
correct and as fast as you can make it. The workspace's commands are the judge: only their verdict counts. \
There is no network. When you are done, answer without calling any tool."""
ELIDED = "[output elided: the conversation reached its context budget]"


@dataclass
class Episode:
    stop: str  # finished | turn_limit | context_budget | wall_clock | llm_error
    turns: int
    tokens: dict[str, int]
    wall_s: float
    eval_s: float
    invalid_tool_calls: int
    result: EvalResult
    workspace: Path
    trajectory: Path


class EpisodeEnv:
    """What one episode's tools act on: the task's fresh workspace, the sandbox its commands run in,
    the bridge that runs the workspace's verify and profile commands outside the sandbox, and the
    tools. Used by `run_episode` and by the verl agent loop (rl/verl_agent.py). `close()` kills what
    the sandbox left running and stops the bridge; the workspace stays for the final evaluation."""

    def __init__(self, task: Task, workspace: Path, device: str = "auto", limits: Limits | None = None,
                 allow_unsandboxed: bool = False):
        self.task = task
        self.workspace = init_workspace(task, workspace, device=device)
        self.sandbox = Sandbox(self.workspace, limits=limits or Limits(), allow_unsandboxed=allow_unsandboxed)
        try:
            self.bridge = EvalBridge(self.workspace, self.sandbox.tmp / "eval.sock")
        except BaseException:
            self.sandbox.close()
            raise
        self.sandbox.env["CUDA_AGENT_EVAL_SOCKET"] = self.sandbox.visible(self.sandbox.tmp / "eval.sock")
        self.tools = Toolbox(self.sandbox)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation's start: the system prompt and the task with the workspace's SKILL.md."""
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _first_prompt(self.workspace)}]

    def close(self) -> None:
        try:
            self.bridge.close()
        finally:
            self.sandbox.close()

    def __enter__(self) -> "EpisodeEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def final_verdict(task: Task, workspace: Path, config: EvalConfig, evaluator: EvaluatorBase | None = None
                  ) -> EvalResult:
    """The episode's reward: a fresh evaluation of the final workspace (its model_new.py and kernels/
    only), by `evaluator` when given, else one-shot. A workspace with nothing to evaluate is a verdict
    too (load_error), never an exception."""
    try:
        cand = load_candidate(workspace)
        return evaluator.evaluate(task, cand, config) if evaluator else evaluate(task, cand, config)
    except Exception as exc:  # no model_new.py left, say
        from cuda_agent.evaluate import Code

        result = EvalResult(task=task.id, candidate=str(workspace))
        result.add(Code.LOAD_ERROR, str(exc))
        return result


def _first_prompt(ws: Path) -> str:
    skill = (ws / "SKILL.md").read_text()
    model = (ws / "model.py").read_text()
    return f"{skill}\n\n## model.py\n\n```python\n{model}\n```\n\nThe workspace is {ws}. Begin."


def _elide(messages: list[dict[str, Any]], over: int) -> tuple[int, int]:
    """Replace the oldest tool outputs until about `over` tokens are freed (4 characters a token).
    Returns (messages elided, tokens freed)."""
    freed = n = 0
    for m in messages:
        if freed >= over:
            break
        if m["role"] == "tool" and m["content"] != ELIDED:
            freed += max(len(m["content"]) // 4 - len(ELIDED) // 4, 0)
            m["content"] = ELIDED
            n += 1
    return n, freed


def run_episode(task: Task, out_dir: str | Path, client: ChatClient, cfg: EpisodeConfig | None = None,
                evaluator: EvaluatorBase | None = None) -> Episode:
    """Solve `task` in `out_dir/workspace`; write `trajectory.jsonl` and `result.json` into `out_dir`.
    `evaluator`: the pool that gives the final verdict (default: a one-shot evaluation)."""
    cfg = cfg or EpisodeConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    traj = TrajectoryWriter(out / "trajectory.jsonl")
    t_start = time.monotonic()
    tokens = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    turns = invalid = 0
    stop = "finished"
    with EpisodeEnv(task, out / "workspace", cfg.device, cfg.limits, cfg.allow_unsandboxed) as env:
        ws, bridge, tools = env.workspace, env.bridge, env.tools
        traj.write({"type": "meta", "task": task.id, "task_origin": task.origin, "model": client.model,
                    "isolation": env.sandbox.isolation, "tools": [t["function"]["name"] for t in tools.specs()],
                    "tool_specs": tools.specs(),
                    "config": {"max_turns": cfg.max_turns, "context_tokens": cfg.context_tokens,
                               "wall_s": cfg.wall_s, "device": cfg.device},
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        messages = env.messages()
        for m in messages:
            traj.write({"type": "message", "turn": 0, "message": m})
        last_prompt, counted = 0, len(messages)  # tokens of the conversation up to messages[:counted]
        while True:
            if turns >= cfg.max_turns:
                stop = "turn_limit"
                break
            if time.monotonic() - t_start > cfg.wall_s:
                stop = "wall_clock"
                break
            growth = sum(len(m.get("content") or "") for m in messages[counted:]) // 4
            if last_prompt + growth > cfg.context_tokens:
                n, freed = _elide(messages, last_prompt + growth - int(0.8 * cfg.context_tokens))
                traj.write({"type": "elided", "turn": turns, "messages": n, "tokens": freed})
                if n == 0:
                    stop = "context_budget"
                    break
                last_prompt -= freed
            turns += 1
            try:
                reply = client.chat(messages, tools.specs())
            except Exception as exc:  # after the client's own retries: the episode ends, nothing lost
                stop = "llm_error"
                traj.write({"type": "error", "turn": turns, "error": f"{type(exc).__name__}: {exc}"})
                break
            for k in tokens:
                tokens[k] += reply.usage.get(k, 0)
            last_prompt = reply.usage.get("prompt_tokens", last_prompt) + reply.usage.get("completion_tokens", 0)
            messages.append(reply.message)
            counted = len(messages)
            traj.write({"type": "message", "turn": turns, "message": reply.message, "usage": reply.usage,
                        "finish_reason": reply.finish_reason, "seconds": round(reply.seconds, 3)})
            calls = reply.message.get("tool_calls") or []
            if not calls:
                break
            for call in calls:
                fn = call.get("function", {})
                t0 = time.monotonic()
                res = tools.call(str(fn.get("name")), fn.get("arguments"))
                invalid += not res.ok
                messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": res.text})
                traj.write({"type": "tool", "turn": turns, "id": call.get("id"), "name": fn.get("name"),
                            "arguments": fn.get("arguments"), "result": res.text, "ok": res.ok,
                            "seconds": round(time.monotonic() - t0, 3)})
    # The reward: a fresh evaluation of the final workspace.
    t0 = time.monotonic()
    result = final_verdict(task, ws, cfg.eval or EvalConfig(device=cfg.device), evaluator)
    final_s = time.monotonic() - t0
    (out / "result.json").write_text(json.dumps(result.to_json(), indent=1))
    ep = Episode(stop, turns, tokens, time.monotonic() - t_start, bridge.seconds + final_s, invalid, result, ws,
                 traj.path)
    traj.write({"type": "final", "stop": stop, "turns": turns, "tokens": tokens, "wall_s": round(ep.wall_s, 3),
                "eval_s": round(ep.eval_s, 3), "workspace_commands": bridge.calls, "invalid_tool_calls": invalid,
                "result": result.to_json()})
    traj.close()
    return ep
