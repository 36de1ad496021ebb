"""`transformers` layers written out as plain torch code (source `transformers`): activations, RMS and layer
norms, gated MLPs, GPT-2's Conv1D, rotary embeddings, Llama attention, BERT's self-output and ViT's patch
embeddings.

transformers itself is never imported: a layer's class, from `_HF_DEFS`, goes into the task as a
definition (`Instance.defs`), without dropout.
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import (ANY, HEADS_START, MAX_MACS, ND, SEQ_START, SRC_HF, MakeFn, module_call,
                                             numel, out_features, register, start_fixed)

_HF_DEFS: dict[str, str] = {
    "LlamaRMSNorm": '''
class LlamaRMSNorm(nn.Module):
    """transformers.models.llama.modeling_llama.LlamaRMSNorm"""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
''',
    "T5LayerNorm": '''
class T5LayerNorm(nn.Module):
    """transformers.models.t5.modeling_t5.T5LayerNorm (RMS norm: no mean, no bias)"""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states
''',
    "GemmaRMSNorm": '''
class GemmaRMSNorm(nn.Module):
    """transformers.models.gemma.modeling_gemma.GemmaRMSNorm (scales by 1 + weight)"""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)
''',
    "ConvNextLayerNorm": '''
class ConvNextLayerNorm(nn.Module):
    """transformers.models.convnext.modeling_convnext.ConvNextLayerNorm in its channels_first format"""

    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps

    def forward(self, x):
        input_dtype = x.dtype
        x = x.float()
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        x = x.to(dtype=input_dtype)
        x = self.weight[:, None, None] * x + self.bias[:, None, None]
        return x
''',
    "NewGELUActivation": '''
class NewGELUActivation(nn.Module):
    """transformers.activations.NewGELUActivation (the GPT-2 / BERT tanh GELU)"""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))
''',
    "GELUTanh": '''
class GELUTanh(nn.Module):
    """transformers.activations.GELUTanh (gelu_pytorch_tanh)"""

    def forward(self, input):
        return F.gelu(input, approximate="tanh")
''',
    "FastGELUActivation": '''
class FastGELUActivation(nn.Module):
    """transformers.activations.FastGELUActivation"""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input)))
''',
    "QuickGELUActivation": '''
class QuickGELUActivation(nn.Module):
    """transformers.activations.QuickGELUActivation"""

    def forward(self, input):
        return input * torch.sigmoid(1.702 * input)
''',
    "ClippedGELUActivation": '''
class ClippedGELUActivation(nn.Module):
    """transformers.activations.ClippedGELUActivation"""

    def __init__(self, min, max):
        super().__init__()
        self.min = min
        self.max = max

    def forward(self, x):
        return torch.clip(F.gelu(x), self.min, self.max)
''',
    "AccurateGELUActivation": '''
class AccurateGELUActivation(nn.Module):
    """transformers.activations.AccurateGELUActivation"""

    def __init__(self):
        super().__init__()
        self.precomputed_constant = math.sqrt(2 / math.pi)

    def forward(self, input):
        return 0.5 * input * (1 + torch.tanh(self.precomputed_constant * (input + 0.044715 * torch.pow(input, 3))))
''',
    "LaplaceActivation": '''
class LaplaceActivation(nn.Module):
    """transformers.activations.LaplaceActivation"""

    def forward(self, input, mu=0.707107, sigma=0.282095):
        input = (input - mu).div(sigma * math.sqrt(2.0))
        return 0.5 * (1.0 + torch.erf(input))
''',
    "ReLUSquaredActivation": '''
class ReLUSquaredActivation(nn.Module):
    """transformers.activations.ReLUSquaredActivation"""

    def forward(self, input):
        relu_applied = F.relu(input)
        squared = torch.square(relu_applied)
        return squared
''',
    "LlamaMLP": '''
class LlamaMLP(nn.Module):
    """transformers.models.llama.modeling_llama.LlamaMLP (SiLU-gated)"""

    def __init__(self, hidden_size, intermediate_size, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
''',
    "GemmaMLP": '''
class GemmaMLP(nn.Module):
    """transformers.models.gemma.modeling_gemma.GemmaMLP (tanh-GELU-gated)"""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))
''',
    "Conv1D": '''
class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D (GPT-2's transposed linear; reshape where the original uses view)"""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return x.reshape(size_out)
''',
    "GPT2MLP": '''
class GPT2MLP(nn.Module):
    """transformers.models.gpt2.modeling_gpt2.GPT2MLP (without dropout)"""

    def __init__(self, intermediate_size, embed_dim):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        return hidden_states
''',
    "T5DenseGatedActDense": '''
class T5DenseGatedActDense(nn.Module):
    """transformers.models.t5.modeling_t5.T5DenseGatedActDense (gelu_new gate, without dropout)"""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.wi_0 = nn.Linear(d_model, d_ff, bias=False)
        self.wi_1 = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_gelu = self.act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        return self.wo(hidden_states)
''',
    "rotate_half": '''
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
''',
    "RotaryPositionEmbedding": '''
class RotaryPositionEmbedding(nn.Module):
    """LlamaRotaryEmbedding's cos/sin tables applied as transformers' apply_rotary_pos_emb does"""

    def __init__(self, head_dim, max_positions, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        cos = self.cos[:seq_len]
        sin = self.sin[:seq_len]
        return (x * cos) + (rotate_half(x) * sin)
''',
    "LlamaAttention": '''
class LlamaAttention(nn.Module):
    """transformers.models.llama.modeling_llama.LlamaAttention (RoPE, grouped KV heads, causal SDPA)"""

    def __init__(self, hidden_size, num_heads, num_key_value_heads, max_positions, rope_theta=10000.0):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.rotary = RotaryPositionEmbedding(self.head_dim, max_positions, rope_theta)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        q = self.rotary(q)
        k = self.rotary(k)
        k = k.repeat_interleave(self.num_key_value_groups, dim=1)
        v = v.repeat_interleave(self.num_key_value_groups, dim=1)
        attn_output = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)
''',
    "BertSelfOutput": '''
class BertSelfOutput(nn.Module):
    """transformers.models.bert.modeling_bert.BertSelfOutput (without dropout)"""

    def __init__(self, hidden_size, layer_norm_eps=1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states
''',
    "ViTPatchEmbeddings": '''
class ViTPatchEmbeddings(nn.Module):
    """transformers.models.vit.modeling_vit.ViTPatchEmbeddings"""

    def __init__(self, num_channels, hidden_size, patch_size):
        super().__init__()
        self.projection = nn.Conv2d(num_channels, hidden_size, kernel_size=patch_size, stride=patch_size)

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)
''',
}
_HF_DEFS = {k: v.strip() for k, v in _HF_DEFS.items()}


def _hf_defs(*names: str) -> tuple[str, ...]:
    return tuple(_HF_DEFS[n] for n in names)


def _hf_elementwise(cls: str, ctor_args: str = "") -> MakeFn:
    def make(rng, shape):
        return module_call(f"{cls}({ctor_args})", defs=_hf_defs(cls))(shape)
    return make


for _cls, _args_str in (("NewGELUActivation", ""), ("GELUTanh", ""), ("FastGELUActivation", ""),
                        ("QuickGELUActivation", ""), ("ClippedGELUActivation", "-10.0, 10.0"),
                        ("AccurateGELUActivation", ""), ("LaplaceActivation", ""), ("ReLUSquaredActivation", "")):
    register(f"transformers.activations.{_cls}", SRC_HF, "activation", ANY, _hf_elementwise(_cls, _args_str))


def _hf_rmsnorm(cls: str) -> MakeFn:
    def make(rng, shape):
        h = shape[-1]
        if h < 2 or h > 1 << 16:
            return None
        return module_call(f"{cls}({h}, eps={rng.choice(('1e-6', '1e-5'))})", defs=_hf_defs(cls))(shape)
    return make


register("transformers.models.llama.modeling_llama.LlamaRMSNorm", SRC_HF, "norm", ND, _hf_rmsnorm("LlamaRMSNorm"))
register("transformers.models.t5.modeling_t5.T5LayerNorm", SRC_HF, "norm", ND, _hf_rmsnorm("T5LayerNorm"))
register("transformers.models.gemma.modeling_gemma.GemmaRMSNorm", SRC_HF, "norm", ND, _hf_rmsnorm("GemmaRMSNorm"))
register("transformers.models.convnext.modeling_convnext.ConvNextLayerNorm", SRC_HF, "norm", (4,),
         lambda rng, shape: module_call(f"ConvNextLayerNorm({shape[1]})", defs=_hf_defs("ConvNextLayerNorm"))(shape)
         if 2 <= shape[1] <= 4096 else None)


def _hf_mlp(cls: str, defs: tuple[str, ...], order: str) -> MakeFn:
    """order: 'hi' when the constructor takes (hidden, intermediate), 'ih' for (intermediate, hidden)."""
    def make(rng, shape):
        h = shape[-1]
        rows = numel(shape[1:-1])
        inter = [i for i in (2 * h, 4 * h, 1024, 2048) if i <= 4 * 4096 and 3 * h * i <= 1 << 25
                 and 3 * rows * h * i <= MAX_MACS]
        if not inter or h > 4096:
            return None
        i = rng.choice(inter)
        args = f"{h}, {i}" if order == "hi" else f"{i}, {h}"
        return module_call(f"{cls}({args})", defs=_hf_defs(*defs))(shape)
    return make


_MLP_START = start_fixed((512,), (1024,), (64, 256), (128, 512))
register("transformers.models.llama.modeling_llama.LlamaMLP", SRC_HF, "mlp", ND,
         _hf_mlp("LlamaMLP", ("LlamaMLP",), "hi"), _MLP_START)
register("transformers.models.gemma.modeling_gemma.GemmaMLP", SRC_HF, "mlp", ND,
         _hf_mlp("GemmaMLP", ("GemmaMLP",), "hi"), _MLP_START)
register("transformers.models.gpt2.modeling_gpt2.GPT2MLP", SRC_HF, "mlp", ND,
         _hf_mlp("GPT2MLP", ("Conv1D", "NewGELUActivation", "GPT2MLP"), "ih"), _MLP_START)
register("transformers.models.t5.modeling_t5.T5DenseGatedActDense", SRC_HF, "mlp", ND,
         _hf_mlp("T5DenseGatedActDense", ("NewGELUActivation", "T5DenseGatedActDense"), "hi"), _MLP_START)


def _hf_conv1d(rng, shape):
    nx = shape[-1]
    nf = out_features(rng, nx, numel(shape[1:-1]))
    if nf is None:
        return None
    return module_call(f"Conv1D({nf}, {nx})", out=shape[:-1] + (nf,), defs=_hf_defs("Conv1D"))(shape)


register("transformers.pytorch_utils.Conv1D", SRC_HF, "linear", ND, _hf_conv1d)


def _hf_rotary(rng, shape):
    length, d = shape[-2], shape[-1]
    if d % 2 or d > 1024 or length > 1 << 16:
        return None
    return module_call(f"RotaryPositionEmbedding({d}, {length})",
                       defs=_hf_defs("rotate_half", "RotaryPositionEmbedding"))(shape)


register("transformers.models.llama.modeling_llama.apply_rotary_pos_emb", SRC_HF, "positional", (3, 4), _hf_rotary,
         HEADS_START)


def _hf_attention(rng, shape):
    _, length, h = shape
    heads = [n for n in (2, 4, 8, 16) if h % n == 0 and (h // n) % 2 == 0 and h // n >= 16]
    if not heads or h > 2048 or length > 2048:
        return None
    n = rng.choice(heads)
    kv = rng.choice([k for k in (1, 2, n) if n % k == 0])
    return module_call(f"LlamaAttention({h}, {n}, {kv}, {length})",
                       defs=_hf_defs("rotate_half", "RotaryPositionEmbedding", "LlamaAttention"))(shape)


register("transformers.models.llama.modeling_llama.LlamaAttention", SRC_HF, "attention", (3,), _hf_attention,
         SEQ_START)


def _hf_bert_self_output(rng, shape):
    h = shape[-1]
    if h < 2 or h > 4096 or numel(shape[1:-1]) * h * h > MAX_MACS:
        return None
    return module_call(f"BertSelfOutput({h})", "self.{name}({x}, {y0})", extra=(shape,),
                       defs=_hf_defs("BertSelfOutput"))(shape)


register("transformers.models.bert.modeling_bert.BertSelfOutput", SRC_HF, "norm", (3,), _hf_bert_self_output,
         SEQ_START)


def _hf_patch(rng, shape):
    _, c, hgt, wid = shape
    ps = [p for p in (2, 4, 8, 16) if hgt % p == 0 and wid % p == 0]
    if not ps or c > 512:
        return None
    p = rng.choice(ps)
    hidden = rng.choice((64, 128, 256, 512))
    out = (shape[0], (hgt // p) * (wid // p), hidden)
    return module_call(f"ViTPatchEmbeddings({c}, {hidden}, {p})", out=out, defs=_hf_defs("ViTPatchEmbeddings"))(shape)


register("transformers.models.vit.modeling_vit.ViTPatchEmbeddings", SRC_HF, "conv", (4,), _hf_patch,
         start_fixed((3, 64, 64), (3, 32, 32), (8, 32, 32)))
