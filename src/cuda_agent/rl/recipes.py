"""The training recipe, stage by stage, as verl command lines (Hydra overrides).

The paper's order: single-turn PPO; then rejection fine-tuning (RFT) of the actor on agent
trajectories (`cuda-agent train rft` makes the data) with value pretraining of the critic; then
multi-turn agentic PPO with the learned critic. Its hyper-parameters (PAPER) are the defaults; the
context lengths, warm-up steps and single-turn step counts it does not give are ours, marked below.

Value pretraining: verl 0.9.1 trains the critic offline on no dataset, so the agentic stage warms the
critic up online (`trainer.critic_warmup` steps of critic-only updates on the RFT'd actor's rollouts,
with GAE at gamma 1 and lambda 0.95: the same targets `rl.values` computes offline), or starts it from
a checkpoint given with `--critic-model`.

Every recipe resolves against verl's own config (Hydra compose of `ppo_trainer` or
`sft_trainer_engine`), so a key verl does not know fails here, before any GPU is taken.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.llm import CONTEXT_TOKENS
from cuda_agent.errors import CudaAgentError

# The paper's agentic PPO: clip 0.2 low / 0.28 high, actor lr 3e-6, critic lr 6e-6, batch 1024,
# GAE with gamma 1 and lambda 0.95, 150 turns, 131,072 tokens of context, about 150 steps.
PAPER: dict[str, Any] = {
    "algorithm.adv_estimator": "gae",
    "algorithm.gamma": 1.0,
    "algorithm.lam": 0.95,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.28,
    "actor_rollout_ref.actor.optim.lr": 3e-6,
    "critic.optim.lr": 6e-6,
    "data.train_batch_size": 1024,
}
AGENTIC_PROMPT_TOKENS = 16_384  # ours: the first prompt (SKILL.md, the task) fits in 16k
SINGLE_TURN = {"prompt": 8_192, "response": 16_384}  # ours: one answer holds one module
CRITIC_WARMUP_STEPS = 10  # ours: the paper gives none for its offline value pretraining
STAGES = ("single-turn", "agentic")


@dataclass
class Recipe:
    """One stage's verl launch: the module, its Hydra overrides, its environment and the files it
    reads (written beside the resolved config)."""

    stage: str
    module: str  # verl.trainer.main_ppo or verl.trainer.sft_trainer
    config_name: str  # the Hydra config the module composes
    overrides: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # name -> content, written into the out folder
    torchrun: tuple[int, int] | None = None  # (nodes, GPUs per node) for the SFT trainer

    def argv(self) -> list[str]:
        if self.torchrun:
            nodes, gpus = self.torchrun
            return ["torchrun", f"--nnodes={nodes}", f"--nproc_per_node={gpus}", "-m", self.module, *self.overrides]
        return [sys.executable, "-m", self.module, *self.overrides]

    def script(self) -> str:
        """The launch as a shell script for the training machine (its own python3)."""
        env = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env.items())
        argv = ["python3" if a == sys.executable else a for a in self.argv()]
        return ("#!/usr/bin/env bash\n# written by `cuda-agent train`; run it on the training machine\nset -euo pipefail\n"
                + env + " \\\n    ".join(shlex.quote(a) for a in argv) + "\n")


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


def _sets(pairs: dict[str, Any], extra: list[str]) -> list[str]:
    for s in extra:
        if "=" not in s:
            raise CudaAgentError(f"--set {s!r}: give KEY=VALUE (a verl config key, e.g. trainer.total_training_steps=20)")
    given = {s.split("=", 1)[0].lstrip("+") for s in extra}
    return [f"{k}={_fmt(v)}" for k, v in pairs.items() if k not in given] + list(extra)


def ppo_recipe(stage: str, model: str, train_files: str, out_dir: Path, val_files: str | None = None,
               nnodes: int = 1, gpus_per_node: int = 8, eval_config: dict[str, Any] | None = None,
               critic_model: str | None = None, critic_warmup: int | None = None,
               sets: list[str] | None = None) -> Recipe:
    """PPO with a learned critic for `stage` (single-turn or agentic) on the prompt rows in
    `train_files` (`cuda-agent train prompts`)."""
    if stage not in STAGES:
        raise CudaAgentError(f"--stage {stage!r}: one of {', '.join(STAGES)}")
    out_dir = Path(out_dir).resolve()
    fields = {"device": "cuda", **(eval_config or {})}
    pairs: dict[str, Any] = {
        **PAPER,
        "data.train_files": train_files, "data.val_files": val_files or train_files,
        "actor_rollout_ref.model.path": model, "critic.model.path": critic_model or model,
        "actor_rollout_ref.rollout.name": "vllm",
        "trainer.nnodes": nnodes, "trainer.n_gpus_per_node": gpus_per_node,
        "trainer.project_name": "cuda-agent", "trainer.experiment_name": stage,
        "trainer.default_local_dir": str(out_dir / "checkpoints"),
        "trainer.logger": "[console]",
    }
    files: dict[str, str] = {}
    if stage == "single-turn":
        pairs.update({
            "data.max_prompt_length": SINGLE_TURN["prompt"], "data.max_response_length": SINGLE_TURN["response"],
            "actor_rollout_ref.rollout.agent.default_agent_loop": "single_turn_agent",
            "reward.custom_reward_function.path": "pkg://cuda_agent.rl.reward",
            "reward.custom_reward_function.name": "acompute_score",
        })
    else:
        loop = [{"name": "cuda_agent", "_target_": "cuda_agent.rl.verl_agent.CudaAgentLoop",
                 "device": fields["device"], "eval_config": fields,
                 "trajectory_dir": str(out_dir / "trajectories")}]
        files["agent_loop.yaml"] = json.dumps(loop, indent=1) + "\n"  # JSON is YAML
        pairs.update({
            "data.max_prompt_length": AGENTIC_PROMPT_TOKENS,
            "data.max_response_length": CONTEXT_TOKENS - AGENTIC_PROMPT_TOKENS,
            "actor_rollout_ref.rollout.multi_turn.enable": True,
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 150,
            "actor_rollout_ref.rollout.multi_turn.max_parallel_calls": 8,  # ours; run in order (verl_agent)
            "actor_rollout_ref.rollout.multi_turn.max_tool_response_length": 30_000,  # the sandbox's output limit
            "actor_rollout_ref.rollout.multi_turn.format": "hermes",
            "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(out_dir / "agent_loop.yaml"),
            "actor_rollout_ref.rollout.agent.default_agent_loop": "cuda_agent",
            "trainer.total_training_steps": 150,
            "trainer.critic_warmup": CRITIC_WARMUP_STEPS if critic_warmup is None else critic_warmup,
        })
    env = {"CUDA_AGENT_EVAL_CONFIG": json.dumps(fields)}
    if nnodes > 1:  # verl's driver joins the Ray cluster already started on the machines (`ray start`)
        env["RAY_ADDRESS"] = "auto"
    return Recipe(stage=stage, module="verl.trainer.main_ppo", config_name="ppo_trainer",
                  overrides=_sets(pairs, sets or []), env=env, files=files)


def rft_recipe(model: str, train_files: str, out_dir: Path, val_files: str | None = None, nnodes: int = 1,
               gpus_per_node: int = 8, sets: list[str] | None = None) -> Recipe:
    """Rejection fine-tuning of the actor on the RFT data (`cuda-agent train rft`), with verl's SFT
    trainer and our dataset class for its JSON columns."""
    out_dir = Path(out_dir).resolve()
    pairs: dict[str, Any] = {
        "data.train_files": train_files, "data.val_files": val_files,
        "data.custom_cls.path": "pkg://cuda_agent.rl.verl_sft", "data.custom_cls.name": "JsonMultiTurnSFTDataset",
        "data.messages_key": "messages", "data.tools_key": "tools",
        "data.max_length": CONTEXT_TOKENS, "data.max_token_len_per_gpu": CONTEXT_TOKENS,
        "model.path": model,
        "trainer.nnodes": nnodes, "trainer.n_gpus_per_node": gpus_per_node,
        "trainer.project_name": "cuda-agent", "trainer.experiment_name": "rft",
        "trainer.default_local_dir": str(out_dir / "checkpoints"), "trainer.logger": "[console]",
    }
    return Recipe(stage="rft", module="verl.trainer.sft_trainer", config_name="sft_trainer_engine",
                  overrides=_sets(pairs, sets or []), torchrun=(nnodes, gpus_per_node))


def resolve(recipe: Recipe) -> str:
    """The whole config verl will run with, as YAML: verl's defaults with the recipe's overrides,
    composed as the trainer composes them. CudaAgentError when verl is missing or rejects a key."""
    try:
        import verl.trainer
        from hydra import compose, initialize_config_dir
        from hydra.errors import HydraException
        from omegaconf import OmegaConf
    except ImportError:
        raise CudaAgentError("resolving a recipe needs verl: pip install 'cuda-agent[verl]'") from None
    config_dir = str(Path(verl.trainer.__file__).parent / "config")
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(config_name=recipe.config_name, overrides=recipe.overrides)
    except HydraException as exc:
        raise CudaAgentError(f"verl rejected the {recipe.stage} recipe: {exc}") from None
    try:
        return OmegaConf.to_yaml(cfg, resolve=True)
    except Exception:  # a mandatory value left to the user (???): shown unresolved
        return OmegaConf.to_yaml(cfg)


def write(recipe: Recipe, out_dir: Path) -> dict[str, Path]:
    """Write the resolved config, the launch script and the recipe's files into `out_dir`."""
    config = resolve(recipe)  # first: a recipe verl rejects leaves no files behind
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, content in recipe.files.items():
        (out_dir / name).write_text(content)
        written[name] = out_dir / name
    written["config"] = out_dir / f"{recipe.stage}.config.yaml"
    written["config"].write_text(config)
    written["launch"] = out_dir / f"{recipe.stage}.launch.sh"
    written["launch"].write_text(recipe.script())
    written["launch"].chmod(0o755)
    return written
