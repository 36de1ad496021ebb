"""The LLM composer against a scripted OpenAI-compatible server (the real client over real HTTP): the
operators it asks for, the prompt, the code it takes from the reply, and each reason an attempt fails."""

from __future__ import annotations

import pytest

from cuda_agent.agent.llm import ChatClient
from cuda_agent.agent.scripted import ScriptedServer, ScriptStep
from cuda_agent.synth.catalogue import CATALOGUE
from cuda_agent.synth.compose import DEFAULT_MIX, Draft, attempt_rng, draw_count, sample_ops
from cuda_agent.synth.llm_compose import LlmFailure, build_prompt, compose_llm, extract_task
from cuda_agent.tasks.loaders import validate_task_source

TASK = '''\
import torch
import torch.nn as nn

batch_size = 4
in_features = 8
out_features = 6


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''

POOL = [CATALOGUE["torch.nn.Linear"], CATALOGUE["torch.tanh"], CATALOGUE["torch.nn.functional.relu"]]


def _reply(code: str, before: str = "Here is the task.", after: str = "It fuses both.") -> str:
    return f"{before}\n\n```python\n{code}```\n\n{after}"


def _client(server: ScriptedServer, **kw) -> ChatClient:
    return ChatClient(server.base_url, "scripted", api_key_env=None, **kw)


def _expected_ops(seed: int, attempt: int, mix=None, pool=None) -> tuple[str, ...]:
    rng = attempt_rng(seed, attempt)
    return tuple(op.name for op in sample_ops(rng, draw_count(rng, mix or DEFAULT_MIX), pool))


def test_good_reply_gives_a_runnable_draft_of_the_sampled_operators():
    with ScriptedServer([ScriptStep(content=_reply(TASK))]) as server:
        draft = compose_llm(_client(server), seed=7, attempt=3, pool=POOL)
    assert isinstance(draft, Draft), draft
    assert (draft.composer, draft.seed, draft.attempt) == ("llm", 7, 3)
    assert draft.ops == _expected_ops(7, 3, pool=POOL)
    assert draft.families == tuple(CATALOGUE[o].family for o in draft.ops)
    assert draft.source == TASK and draft.batch_scalable
    validate_task_source(draft.source, "draft.py")
    import torch

    ns: dict = {}
    exec(compile(draft.source, "draft.py", "exec"), ns)  # noqa: S102 (our own scripted task)
    out = ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())
    assert out.shape == (4, 6) and out.dtype == torch.float32

    # a plain completion: the prompt went out without tools
    (request,) = server.requests
    assert "tools" not in request or not request["tools"]
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert all(f"`{name}`" in request["messages"][1]["content"] for name in draft.ops)


def test_operators_depend_on_seed_and_attempt_only():
    a = [_expected_ops(11, i) for i in range(30)]
    assert a == [_expected_ops(11, i) for i in reversed(range(30))][::-1]
    assert len(set(a)) > 1
    steps = [ScriptStep(content=_reply(TASK)) for _ in range(3)]
    with ScriptedServer(steps) as server:
        client = _client(server)
        first = compose_llm(client, seed=11, attempt=5)
        compose_llm(client, seed=11, attempt=6)
        again = compose_llm(client, seed=11, attempt=5)
    assert isinstance(first, Draft) and isinstance(again, Draft)
    assert first.ops == again.ops == a[5]
    assert server.requests[0]["messages"] == server.requests[2]["messages"]


def test_a_reply_without_code_is_no_code():
    steps = [ScriptStep(content="I would fuse a Linear with a tanh, sized for the GPU."),
             ScriptStep(content="```bash\npip install torch\n```")]
    with ScriptedServer(steps) as server:
        client = _client(server)
        prose = compose_llm(client, seed=1, attempt=0, pool=POOL)
        shell = compose_llm(client, seed=1, attempt=1, pool=POOL)
    assert isinstance(prose, LlmFailure) and prose.reason == "no_code"
    assert prose.attempt == 0 and prose.ops == _expected_ops(1, 0, pool=POOL)
    assert "```python" in prose.message
    assert isinstance(shell, LlmFailure) and shell.reason == "no_code" and "bash" in shell.message


def test_code_without_get_inputs_is_invalid_source_with_the_validators_message():
    broken = TASK.replace("def get_inputs():\n    return [torch.randn(batch_size, in_features)]\n", "")
    with ScriptedServer([ScriptStep(content=_reply(broken))]) as server:
        result = compose_llm(_client(server), seed=2, attempt=4, pool=POOL)
    assert isinstance(result, LlmFailure) and result.reason == "invalid_source"
    assert "defines no function `get_inputs()`" in result.message
    assert result.ops == _expected_ops(2, 4, pool=POOL)


def test_without_one_batch_size_line_the_draft_is_not_batch_scalable():
    no_line = TASK.replace("batch_size = 4\n", "").replace("batch_size", "4")
    two_lines = TASK.replace("batch_size = 4\n", "batch_size = 4\nbatch_size = 8\n")
    steps = [ScriptStep(content=_reply(no_line)), ScriptStep(content=_reply(two_lines))]
    with ScriptedServer(steps) as server:
        client = _client(server)
        drafts = [compose_llm(client, seed=3, attempt=i, pool=POOL) for i in range(2)]
    for d in drafts:
        assert isinstance(d, Draft) and d.batch_scalable is False


def test_a_failed_request_is_an_llm_error():
    with ScriptedServer([ScriptStep(status=500)]) as server:
        result = compose_llm(_client(server, max_retries=0), seed=4, attempt=0, pool=POOL)
    assert isinstance(result, LlmFailure) and result.reason == "llm_error"
    assert result.ops == _expected_ops(4, 0, pool=POOL) and "500" in result.message


def test_prompt_names_every_sampled_operator():
    for attempt in range(40):
        rng = attempt_rng(5, attempt)
        chosen = sample_ops(rng, draw_count(rng, {3: 0.5, 5: 0.5}))
        system, user = build_prompt(chosen, len(chosen), "cuda")
        assert system["role"] == "system" and user["role"] == "user"
        for op in chosen:
            assert f"`{op.name}` ({op.family})" in user["content"]
        assert "H200" in system["content"] and "batch_size = N" in system["content"]
    cpu = build_prompt(POOL[:2], 2, "cpu")[0]["content"]
    assert "CPU core" in cpu and "H200" not in cpu
    with pytest.raises(ValueError, match="device"):
        build_prompt(POOL[:2], 2, "tpu")
    with pytest.raises(ValueError, match="n_ops"):
        build_prompt(POOL[:2], 3, "cuda")


def test_extract_task_picks_the_module_among_several_fences():
    model_small = "class Model:\n    pass\n"
    text = ("Install first:\n```bash\npip install torch\n```\n"
            f"A helper:\n```python\ndef f():\n    return 1\n```\nThe task:\n```python\n{TASK}```\n"
            f"A variant:\n```\n{model_small}```\nDone.")
    assert extract_task(text) == TASK
    # untagged and py-tagged blocks count; the last of equally long modules wins
    assert extract_task("```py\nclass Model:\n    a = 1\n```\n```\nclass Model:\n    b = 2\n```") == \
        "class Model:\n    b = 2\n"
    # no module with a Model: the last python block (the validator then says what is missing)
    assert extract_task("```python\nx = 1\n```\n```python\ny = 2\n```") == "y = 2\n"
    # CRLF line endings and an indented fence
    assert extract_task("  ```python\r\n  class Model:\r\n      pass\r\n  ```\r\n") == "class Model:\n    pass\n"
    with pytest.raises(ValueError, match="no closed ```python code block"):
        extract_task("no code here")
    with pytest.raises(ValueError, match="no closed"):
        extract_task("```python\nclass Model:\n    pass\n")  # cut before the closing fence
    with pytest.raises(ValueError, match="json"):
        extract_task('```json\n{"a": 1}\n```')


def test_chat_still_sends_tools_when_given_positionally():
    tool = {"type": "function", "function": {"name": "Read", "description": "read a file",
                                             "parameters": {"type": "object", "properties": {}}}}
    with ScriptedServer([ScriptStep(content="a"), ScriptStep(content="b")]) as server:
        client = _client(server)
        client.chat([{"role": "user", "content": "hi"}], [tool])
        client.chat([{"role": "user", "content": "hi"}], [])
    assert server.requests[0]["tools"] == [tool]
    assert "tools" not in server.requests[1]
