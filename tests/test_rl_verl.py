"""The verl agent-loop plugin (rl/verl_agent.py) running whole episodes on the CPU backend: verl's
own ToolAgentLoop machinery (its chat-template token handling and its hermes tool-call parser) with a
scripted rollout server in place of vLLM and a byte-level tokenizer made here, so no model is
downloaded. Needs verl (`pip install 'cuda-agent[verl]'`); skipped without it."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

verl = pytest.importorskip("verl")
pytest.importorskip("verl.experimental.agent_loop.tool_agent_loop")

from omegaconf import OmegaConf  # noqa: E402  (verl's dependency)

from conftest import sandbox_unavailable  # noqa: E402
from cuda_agent.rl import reward as reward_mod  # noqa: E402
from cuda_agent.rl.data import prompt_rows  # noqa: E402
from cuda_agent.rl.rft import RFTFilter  # noqa: E402
from cuda_agent.agent.trajectory import read_trajectory  # noqa: E402
from cuda_agent.tasks import load_task  # noqa: E402

DATA = Path(__file__).parent / "data"
TASK = DATA / "relu_bias_task.py"
RIGHT = (DATA / "relu_bias_model_new.py").read_text()
WRONG = RIGHT.replace("torch.relu(x + self.bias)", "torch.relu(x - self.bias)")

# A chat template in the style of ChatML with hermes tool calls, written for these tests.
TEMPLATE = (
    "{%- if tools -%}<|im_start|>system\n"
    "{%- if messages[0].role == 'system' %}{{ messages[0].content }}\n{% endif -%}"
    "# Tools\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>"
    "{%- set rest = messages[1:] if messages[0].role == 'system' else messages -%}"
    "{%- else -%}{%- set rest = messages -%}{%- endif -%}"
    "{%- for m in rest -%}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    "{%- for c in (m.tool_calls or []) -%}<tool_call>{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments | tojson if c.function.arguments is mapping else c.function.arguments }}}</tool_call>"
    "{%- endfor -%}<|im_end|>{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")


@pytest.fixture(scope="module")
def tokenizer():
    """Every byte one token, plus ChatML's and hermes' special tokens: any text round-trips."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>", "<tool_call>", "</tool_call>"])
    fast.chat_template = TEMPLATE
    return fast


class ScriptedRollout:
    """verl's LLM server client, scripted: each generate() answers the next step, a (text, calls)
    pair, in hermes format; `prompts` keeps each request's prompt, decoded."""

    def __init__(self, tokenizer, steps, fail_at: int | None = None):
        self.tok, self.steps, self.fail_at = tokenizer, list(steps), fail_at
        self.prompts: list[str] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tok.decode(prompt_ids))
        if self.fail_at is not None and len(self.prompts) == self.fail_at:
            raise RuntimeError("the rollout server went away")
        text, calls = self.steps.pop(0) if self.steps else ("Done.", [])
        text += "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls)
        return TokenOutput(token_ids=self.tok.encode(text + "<|im_end|>", add_special_tokens=False))


def _config(response_length: int = 60_000):
    from verl.trainer.config import __file__ as config_init

    cfg = OmegaConf.load(Path(config_init).parent / "_generated_ppo_trainer.yaml")
    r = cfg.actor_rollout_ref.rollout
    r.prompt_length, r.response_length = 40_000, response_length
    r.multi_turn.max_assistant_turns, r.multi_turn.max_tool_response_length = 10, 20_000
    r.multi_turn.format, r.multi_turn.max_parallel_calls = "hermes", 4
    return cfg


def _loop(tokenizer, server, tmp_path, **kw):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from cuda_agent.rl.verl_agent import CudaAgentLoop

    cfg = _config(**kw)
    return CudaAgentLoop(
        trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tokenizer, processor=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data), tools=ToolListWrap([]),
        device="cpu", work_dir=str(tmp_path / "work"), trajectory_dir=str(tmp_path / "trajectories"),
        unsandboxed=sandbox_unavailable() is not None,
        eval_config={"device": "cpu", "cache_dir": os.environ["CUDA_AGENT_CACHE"], "policy": "kernelbench",
                     "timing": False})


def _row():
    return prompt_rows([load_task(TASK)], agent_name="cuda_agent")[0]


def _run(loop, row):
    return loop.run({"temperature": 1.0}, raw_prompt=row["prompt"], extra_info=row["extra_info"],
                    data_source=row["data_source"])


def _episodes(tokenizer, servers, tmp_path):
    """Run one episode per server, concurrently, in a fresh event loop (verl's agent loops keep the
    loop they were made in, so they are made inside it)."""
    async def main():
        loops = [_loop(tokenizer, s, tmp_path) for s in servers]
        return await asyncio.gather(*(_run(lp, _row()) for lp in loops))

    return asyncio.run(main())


@pytest.fixture(autouse=True)
def _close_evaluators(monkeypatch, cache_dir):
    """The session's build cache (conftest.py): each rollout's workspace holds the same starter
    kernels, built once for the whole run, as on a training host."""
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache_dir))
    yield
    reward_mod.close_shared_evaluators()


def test_an_episode_ends_with_the_verdict_on_the_last_policy_token(tokenizer, tmp_path):
    from cuda_agent.rl.verl_agent import open_environments

    steps = [("Reading the task.", [("Read", {"file_path": "model.py"})]),
             ("", [("Teleport", {"to": "mars"})]),
             ("Writing ModelNew.", [("Write", {"file_path": "model_new.py", "content": RIGHT})]),
             ("Verifying.", [("Bash", {"command": "python3 -m utils.verification --device cpu --policy kernelbench"})]),
             ("ModelNew is correct.", [])]
    server = ScriptedRollout(tokenizer, steps)
    (out,) = _episodes(tokenizer, [server], tmp_path)

    # the tools ran in the trajectory's workspace, through verl's parsing of the model's calls
    assert "class Model(nn.Module)" in server.prompts[1]  # the Read's result reached the model
    assert "no tool" in server.prompts[2].lower() or "unknown function" in server.prompts[2].lower()
    assert "verification: " in server.prompts[4] and "correct" in server.prompts[4]
    assert len(server.prompts) == 5
    # the reward: the final evaluation's, on a token the policy generated
    assert out.reward_score == 1.0
    assert out.response_mask[-1] == 1 and 0 in out.response_mask  # tool outputs are in the response, masked
    scores = out.as_dict()["rm_scores"]
    assert scores[-1] == 1.0 and scores[:-1].abs().sum() == 0
    assert tokenizer.decode(out.response_ids[-len("<|im_end|>") - 30:]).endswith("ModelNew is correct.<|im_end|>")
    info = out.extra_fields["reward_extra_info"]
    assert info["correct"] is True and info["invalid_tool_calls"] == 1 and info["infra_error"] is False
    # released: no environment open, the workspace gone
    assert open_environments() == 0 and not any((tmp_path / "work").iterdir())
    # the trajectory, in the agent's format: what RFT reads
    (path,) = (tmp_path / "trajectories").rglob("trajectory.jsonl")
    traj = read_trajectory(path)
    assert traj.finished and traj.reward == 1 and traj.invalid_tool_calls == 1
    assert [m["role"] for m in traj.messages] == ["system", "user"] + ["assistant", "tool"] * 4 + ["assistant"]
    assert RFTFilter().reasons(traj) == ["invalid_tool_calls"]
    assert RFTFilter(max_invalid_tool_calls=1).reasons(traj) == []
    assert [t["function"]["name"] for t in traj.tools][:3] == ["Bash", "BashOutput", "KillBash"]


def test_concurrent_trajectories_keep_their_own_workspaces(tokenizer, tmp_path):
    def steps(src):  # one turn of two calls: the Read must see the Write (verl starts both at once)
        return [("", [("Write", {"file_path": "model_new.py", "content": src}), ("Read", {"file_path": "model_new.py"})]),
                ("Done.", [])]

    servers = [ScriptedRollout(tokenizer, steps(RIGHT)), ScriptedRollout(tokenizer, steps(WRONG))]
    right, wrong = _episodes(tokenizer, servers, tmp_path)
    assert right.reward_score == 1.0 and wrong.reward_score == -1.0
    # the Read's numbered lines (not the Write's arguments, also in the prompt) show each one's own file
    read_line = "\t        return torch.relu(x {} self.bias)"
    assert read_line.format("+") in servers[0].prompts[-1] and read_line.format("-") in servers[1].prompts[-1]


def test_a_failing_rollout_still_releases_the_environment(tokenizer, tmp_path):
    from cuda_agent.rl.verl_agent import open_environments

    server = ScriptedRollout(tokenizer, [("", [("Bash", {"command": "sleep 600", "run_in_background": True})])],
                             fail_at=2)
    with pytest.raises(RuntimeError, match="went away"):
        _episodes(tokenizer, [server], tmp_path)
    assert open_environments() == 0 and not any((tmp_path / "work").iterdir())

    async def no_task():
        return await _loop(tokenizer, server, tmp_path).run({}, raw_prompt=[], extra_info={})

    with pytest.raises(ValueError, match="no task_source"):
        asyncio.run(no_task())


def test_trailing_observation_tokens_are_cut_so_the_reward_lands_on_a_policy_token():
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

    from cuda_agent.rl.verl_agent import reward_on_last_policy_token

    out = AgentLoopOutput(prompt_ids=[1, 2], response_ids=[5, 6, 7, 8, 9], response_mask=[1, 1, 0, 1, 0],
                          response_logprobs=[-0.1, -0.2, 0.0, -0.3, 0.0], metrics=AgentLoopMetrics())
    out = reward_on_last_policy_token(out, 2.0)
    assert out.response_ids == [5, 6, 7, 8] and out.response_mask == [1, 1, 0, 1]
    assert out.response_logprobs == [-0.1, -0.2, 0.0, -0.3]
    d = out.as_dict()
    assert d["rm_scores"].tolist() == [0.0, 0.0, 0.0, 2.0] and d["response_mask"][-1] == 1


# --- the recipes, resolved against verl's own config ------------------------------------------------

def _train(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "cuda_agent", "train", *args], capture_output=True, text=True)


def test_ppo_dry_runs_print_complete_configs_with_the_paper_s_hyperparameters(tmp_path):
    import yaml
    from verl.utils.import_utils import load_extern_object

    p = _train("ppo", "--stage", "agentic", "--model", "Qwen/Qwen3-8B", "--data", str(tmp_path / "a.parquet"),
               "--out", str(tmp_path / "runs"), "--eval-config", '{"device": "cuda", "timing_budget_s": 2.0}',
               "--dry-run")
    assert p.returncode == 0, p.stderr
    cfg = yaml.safe_load(p.stdout)
    actor, rollout = cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]
    assert (cfg["algorithm"]["adv_estimator"], cfg["algorithm"]["gamma"], cfg["algorithm"]["lam"]) == ("gae", 1.0, 0.95)
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"], actor["optim"]["lr"]) == (0.2, 0.28, 3e-6)
    assert cfg["critic"]["optim"]["lr"] == 6e-6 and cfg["data"]["train_batch_size"] == 1024
    assert rollout["prompt_length"] + rollout["response_length"] == 131072  # resolved interpolations
    assert rollout["multi_turn"]["enable"] and rollout["multi_turn"]["max_assistant_turns"] == 150
    assert rollout["agent"]["default_agent_loop"] == "cuda_agent"
    assert cfg["trainer"]["total_training_steps"] == 150 and cfg["trainer"]["critic_warmup"] == 10
    (loop,) = yaml.safe_load(Path(rollout["agent"]["agent_loop_config_path"]).read_text())
    assert loop["_target_"] == "cuda_agent.rl.verl_agent.CudaAgentLoop" and loop["eval_config"]["timing_budget_s"] == 2.0
    launch = (tmp_path / "runs" / "agentic" / "agentic.launch.sh").read_text()
    assert "python3 -m verl.trainer.main_ppo" in launch.replace(" \\\n    ", " ") and "CUDA_AGENT_EVAL_CONFIG" in launch

    p = _train("ppo", "--stage", "single-turn", "--model", "m", "--data", "d.parquet", "--out", str(tmp_path / "runs"),
               "--set", "trainer.total_training_steps=20", "--nnodes", "2", "--gpus-per-node", "4", "--dry-run")
    assert p.returncode == 0, p.stderr
    cfg = yaml.safe_load(p.stdout)
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (2, 4)
    assert "export RAY_ADDRESS=auto" in (tmp_path / "runs" / "single-turn" / "single-turn.launch.sh").read_text()
    fn = cfg["reward"]["custom_reward_function"]
    assert load_extern_object(fn["path"], fn["name"]) is reward_mod.acompute_score  # verl's loader finds it
    assert cfg["trainer"]["total_training_steps"] == 20 and cfg["algorithm"]["lam"] == 0.95

    p = _train("ppo", "--stage", "agentic", "--model", "m", "--data", "d", "--out", str(tmp_path), "--dry-run",
               "--set", "trainer.no_such_key=1")
    assert p.returncode == 2 and "verl rejected the agentic recipe" in p.stderr
    assert not (tmp_path / "agentic").exists()  # nothing written for a rejected recipe


def test_rft_data_reads_through_verl_s_sft_dataset(tokenizer, tmp_path):
    """The RFT file, made from a trajectory of the plugin, through the dataset class the RFT recipe
    names: verl tokenizes it turn by turn and trains on the assistant's tokens only."""
    import yaml
    from verl.utils.import_utils import load_extern_object

    steps = [("", [("Write", {"file_path": "model_new.py", "content": RIGHT})]), ("Done.", [])]
    _episodes(tokenizer, [ScriptedRollout(tokenizer, steps)], tmp_path)
    out = tmp_path / "rft.parquet"
    p = _train("rft", "--trajectories", str(tmp_path / "trajectories"), "--out", str(out), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["kept"] == 1, p.stderr + p.stdout

    p = _train("sft", "--model", "m", "--data", str(out), "--out", str(tmp_path / "runs"), "--gpus-per-node", "2",
               "--dry-run")
    assert p.returncode == 0, p.stderr
    data_cfg = yaml.safe_load(p.stdout)["data"]
    cls = load_extern_object(data_cfg["custom_cls"]["path"], data_cfg["custom_cls"]["name"])
    ds = cls(parquet_files=str(out), tokenizer=tokenizer, config={**data_cfg, "max_length": 40_000})
    item = ds[0]
    text = tokenizer.decode(item["input_ids"][item["loss_mask"] == 1])
    assert "model_new.py" in text and "Done." in text  # the assistant's tool call and answer are trained
    context = tokenizer.decode(item["input_ids"][item["loss_mask"] == 0])
    assert "class Model(nn.Module)" in context and '"name": "Bash"' in context  # prompt and tool schemas, not trained
    assert '"file_path": null' not in context  # each schema as it is, no other tool's parameters
    assert "torchrun --nnodes=1 --nproc_per_node=2 -m verl.trainer.sft_trainer" in \
        (tmp_path / "runs" / "rft" / "rft.launch.sh").read_text().replace(" \\\n    ", " ")

    # the critic's warm-up targets for the same trajectory, tokenized the same way
    tokenizer.save_pretrained(tmp_path / "tok")
    p = _train("values", "--data", str(out), "--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "v.parquet"))
    assert p.returncode == 0, p.stderr
    import pyarrow.parquet as pq

    (row,) = pq.read_table(tmp_path / "v.parquet").to_pylist()
    assert row["input_ids"] == item["input_ids"].tolist() and row["policy_mask"] == item["loss_mask"].tolist()
    policy = [t for t, m in zip(row["value_targets"], row["policy_mask"]) if m]
    assert policy == pytest.approx([row["reward"] * 0.95 ** k for k in range(len(policy) - 1, -1, -1)])
    assert all(t is None for t, m in zip(row["value_targets"], row["policy_mask"]) if not m)
