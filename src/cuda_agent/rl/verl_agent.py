"""The agentic stage on verl: CUDA-Agent episodes as verl agent loops (imports verl).

`CudaAgentLoop` is verl's ToolAgentLoop (its token handling, tool-call parsing, turn and length
limits) around one `agent.loop.EpisodeEnv` per trajectory: the task's fresh workspace, the sandbox
its commands run in and the bridge to the evaluator. Our tools (Bash, Read, Write, Edit, ...) are
verl tools (`CudaAgentTool`); each call finds its trajectory's environment by the id verl hands the
tool (`create_kwargs`), so concurrent trajectories of one worker never share a workspace. At the end
the final workspace gets a fresh evaluation (`agent.loop.final_verdict`, on a process-wide Evaluator)
and its milestone reward goes on the last token the policy generated: verl puts a trajectory's
reward on its last response token, and a tool output's token there (mask 0) would drop it from GAE.
The environment is released on every path, the evaluation's failure included. With
`trajectory_dir`, each episode is also written as trajectory.jsonl in the agent's format, which
`cuda-agent train rft` reads.

verl reads the loop from an agent-loop config file (`actor_rollout_ref.rollout.agent.agent_loop_config_path`);
`rl.recipes` writes one:

    - name: cuda_agent
      _target_: cuda_agent.rl.verl_agent.CudaAgentLoop
      device: cuda
      eval_config: {device: cuda}   # EvalConfig fields of the final evaluation
      trajectory_dir: runs/agentic  # optional

Dataset rows name the loop (`agent_name: cuda_agent`) and carry the task (`rl.data.prompt_rows`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from cuda_agent.agent.loop import EpisodeEnv, final_verdict
from cuda_agent.agent.sandbox import Limits
from cuda_agent.agent.toolbox import Toolbox
from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.evaluate import EvalConfig
from cuda_agent.evaluate.result import Kind
from cuda_agent.rl.data import task_from_row
from cuda_agent.rl.reward import shared_evaluator

# The open environments of this process, by trajectory id, each with the lock that keeps its tool
# calls in order: verl runs one turn's calls concurrently (asyncio.gather), where a Write followed by
# a compile must happen in that order, as in the agent's own loop. The lock is fair, and verl starts
# the calls in their order, so they take it in that order.
_ENVS: dict[str, tuple[EpisodeEnv, asyncio.Lock]] = {}
_ENVS_LOCK = threading.Lock()


def open_environments() -> int:
    """How many trajectories' environments are open in this process (0 once every episode ended)."""
    with _ENVS_LOCK:
        return len(_ENVS)


class CudaAgentTool(BaseTool):
    """One of the agent's tools as a verl tool. The trajectory's environment comes from the id that
    `create` returns, set per trajectory by CudaAgentLoop in `tools_kwargs`."""

    def __init__(self, config: dict | None = None, tool_schema: OpenAIFunctionToolSchema | None = None):
        name = (config or {}).get("name") or (tool_schema.function.name if tool_schema else None)
        spec = next((t for t in Toolbox.specs() if t["function"]["name"] == name), None)
        if spec is None:
            raise ValueError(f"CudaAgentTool: no tool named {name!r}; the tools are "
                             f"{', '.join(t['function']['name'] for t in Toolbox.specs())}")
        self.spec = spec  # the full schema (verl's pydantic one drops `items`, `default`, ...)
        super().__init__(config or {}, tool_schema or OpenAIFunctionToolSchema.model_validate(spec))

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        env_id = (kwargs.get("create_kwargs") or {}).get("env_id") or instance_id
        if env_id is None:
            raise ValueError(f"{self.name}: no env_id in create_kwargs; run it inside CudaAgentLoop")
        return env_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
                      ) -> tuple[ToolResponse, float, dict]:
        with _ENVS_LOCK:
            env, in_order = _ENVS.get(instance_id, (None, None))
        if env is None:
            return ToolResponse(text="Error: the episode's environment is closed"), 0.0, {"ok": False}
        async with in_order:
            res = await asyncio.to_thread(env.tools.call, self.name, parameters)
        return ToolResponse(text=res.text), 0.0, {"ok": res.ok}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Nothing per call: the environment lives for the trajectory and CudaAgentLoop closes it."""


_TOOLS: list[CudaAgentTool] = []


def all_tools() -> list[CudaAgentTool]:
    """Every tool of the agent, made once per process (verl's BaseTool prints each schema it makes)."""
    with _ENVS_LOCK:
        if not _TOOLS:
            _TOOLS.extend(CudaAgentTool({"type": "native", "name": t["function"]["name"]}) for t in Toolbox.specs())
        return list(_TOOLS)


def tool_config() -> dict[str, Any]:
    """verl's tool config (`multi_turn.tool_config_path`) declaring the agent's tools, for verl's own
    tool agent loops; CudaAgentLoop needs none."""
    return {"tools": [{"class_name": f"{__name__}.CudaAgentTool",
                       "config": {"type": "native", "name": t["function"]["name"]}, "tool_schema": None}
                      for t in Toolbox.specs()]}


def reward_on_last_policy_token(output: AgentLoopOutput, reward: float) -> AgentLoopOutput:
    """Set the trajectory's reward and cut any trailing observation tokens (mask 0) off the response,
    so that verl's reward position, the last response token, is one the policy generated. A
    response with no policy token is left as it is."""
    mask = output.response_mask
    last = max((i for i, m in enumerate(mask) if m), default=None)
    if last is not None and last < len(mask) - 1:
        keep = last + 1
        output.response_ids = output.response_ids[:keep]
        output.response_mask = mask[:keep]
        if output.response_logprobs is not None:
            output.response_logprobs = output.response_logprobs[:keep]
        if output.routed_experts is not None:
            output.routed_experts = output.routed_experts[: len(output.prompt_ids) + keep]
    output.reward_score = float(reward)
    return output


@register("cuda_agent")
class CudaAgentLoop(ToolAgentLoop):
    def __init__(self, *args: Any, device: str = "auto", eval_config: dict | None = None, work_dir: str | None = None,
                 trajectory_dir: str | None = None, unsandboxed: bool = False, limits: dict | None = None,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not self.tools:  # no tool config given to verl: all of ours
            self.tools = {t.name: t for t in all_tools()}
        # The prompt shows the tools' full schemas, as the agent and the RFT data do.
        self.tool_schemas = [t.spec if isinstance(t, CudaAgentTool) else
                             t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in self.tools.values()]
        self.device = device
        self.eval_fields = dict(eval_config or {})
        self.eval_fields.setdefault("device", device)
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.gettempdir()) / "cuda-agent-rl"
        self.trajectory_dir = Path(trajectory_dir) if trajectory_dir else None
        self.unsandboxed = unsandboxed
        self.limits = Limits(**(limits or {}))
        self.agent_data = None
        self.ok: dict[tuple[int, int], bool] = {}  # (assistant turn, call index) -> valid call

    async def _handle_pending_state(self, agent_data, sampling_params):
        self.agent_data = agent_data  # its messages are the conversation, for the trajectory file
        return await super()._handle_pending_state(agent_data, sampling_params)

    async def _call_tool(self, tool_call, tools_kwargs, agent_data):
        response, reward, metrics = await super()._call_tool(tool_call, tools_kwargs, agent_data)
        index = next((i for i, c in enumerate(agent_data.tool_calls) if c is tool_call), -1)
        # verl answers unknown tools and malformed arguments itself (no "ok" then): invalid calls
        self.ok[(agent_data.assistant_turns, index)] = bool((metrics or {}).get("ok", False))
        return response, reward, metrics

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_row(str(kwargs.get("data_source", "cuda-agent")), kwargs.get("extra_info"))
        env_id = uuid.uuid4().hex
        t_start = time.monotonic()
        try:
            env = await asyncio.to_thread(EpisodeEnv, task, self.work_dir / env_id / "workspace", self.device,
                                          self.limits, self.unsandboxed)
            with _ENVS_LOCK:
                _ENVS[env_id] = (env, asyncio.Lock())
            try:
                kwargs["raw_prompt"] = env.messages()
                kwargs["tools_kwargs"] = {name: {"create_kwargs": {"env_id": env_id}} for name in self.tools}
                output = await super().run(sampling_params, **kwargs)
            finally:  # nothing the agent started runs on while its work is judged, or after a failure
                with _ENVS_LOCK:
                    _ENVS.pop(env_id, None)
                await asyncio.to_thread(env.close)
            cfg = EvalConfig(**{"isolation": "required", **self.eval_fields})  # model-written code, unattended
            result = await asyncio.to_thread(final_verdict, task, env.workspace, cfg, shared_evaluator(self.eval_fields))
            messages = list(self.agent_data.messages) if self.agent_data is not None else []
            invalid = sum(not ok for ok in self.ok.values())
            output = reward_on_last_policy_token(output, result.reward)
            # verl logs these per batch; infra_error: the evaluator's own failure, which it has already
            # retried alone on the GPU (Evaluator), so a reward of -1 there is not the policy's doing
            output.extra_fields["reward_extra_info"] = {
                "correct": bool(result.correct), "speedup_eager": result.speedup_eager or 0.0,
                "speedup_compile": result.speedup_compile or 0.0, "invalid_tool_calls": invalid,
                "infra_error": any(r.kind is Kind.INFRA for r in result.reasons)}
            if self.trajectory_dir is not None:
                self._write_trajectory(self.trajectory_dir / env_id, task, env, messages, result, invalid,
                                       time.monotonic() - t_start)
            return output
        finally:
            await asyncio.to_thread(shutil.rmtree, self.work_dir / env_id, True)

    def _write_trajectory(self, out: Path, task, env: EpisodeEnv, messages: list[dict[str, Any]], result,
                          invalid: int, wall_s: float) -> None:
        """The episode in the agent's trajectory format (agent/loop.py), for `cuda-agent train rft`."""
        out.mkdir(parents=True, exist_ok=True)
        records: list[dict[str, Any]] = [{
            "type": "meta", "task": task.id, "task_origin": task.origin,
            "model": str(self.config.actor_rollout_ref.model.get("path", "policy")),
            "isolation": env.sandbox.isolation, "tools": list(self.tools), "tool_specs": self.tool_schemas,
            "config": {"max_turns": self.max_assistant_turns, "response_length": self.response_length,
                       "device": self.device, "rollout": "verl"},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]
        turn, pending = 0, []
        for m in messages:
            if m.get("role") == "assistant":
                turn += 1
                pending = list(enumerate(m.get("tool_calls") or []))
                records.append({"type": "message", "turn": turn, "message": m})
            elif m.get("role") == "tool":
                i, call = pending.pop(0) if pending else (-1, {})
                fn = call.get("function") or {}
                args = fn.get("arguments")
                records.append({"type": "tool", "turn": turn, "id": m.get("tool_call_id") or call.get("id"),
                                "name": fn.get("name"), "arguments": args if isinstance(args, str) else json.dumps(args),
                                "result": m.get("content"), "ok": self.ok.get((turn, i), False), "seconds": None})
            else:
                records.append({"type": "message", "turn": turn, "message": m})
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), {})
        stop = ("finished" if not last.get("tool_calls") else
                "turn_limit" if self.max_assistant_turns and turn >= self.max_assistant_turns else "context_budget")
        records.append({"type": "final", "stop": stop, "turns": turn, "tokens": {}, "wall_s": round(wall_s, 3),
                        "eval_s": None, "workspace_commands": env.bridge.calls,
                        "invalid_tool_calls": invalid, "result": result.to_json()})
        traj = TrajectoryWriter(out / "trajectory.jsonl")
        for r in records:
            traj.write(r)
        traj.close()
        (out / "result.json").write_text(json.dumps(result.to_json(), indent=1))
