"""Recurrent layers (family `recurrent`): RNN, LSTM and GRU (batch-first, dropout 0, the output sequence
only) and their cells (one step, the hidden state only).
"""

from __future__ import annotations

from cuda_agent.synth.catalogue.base import SRC_NN, MakeFn, module_call, register, start_fixed

_RNN_START = start_fixed((64, 128), (128, 64), (256, 32), (32, 256))


def _rnn(cls: str) -> MakeFn:
    def make(rng, shape):
        _, length, f = shape
        if f > 2048 or length > 1024:
            return None
        hdim = rng.choice((32, 64, 128, 256))
        layers = rng.choice((1, 1, 2))
        bi = rng.random() < 0.3
        kw = f", num_layers={layers}" if layers > 1 else ""
        kw += ", bidirectional=True" if bi else ""
        out = (shape[0], length, hdim * (2 if bi else 1))
        return module_call(f"nn.{cls}({f}, {hdim}{kw}, batch_first=True)", "self.{name}({x})[0]", out=out)(shape)
    return make


def _rnn_cell(cls: str) -> MakeFn:
    def make(rng, shape):
        f = shape[1]
        if f > 4096:
            return None
        hdim = rng.choice((64, 128, 256, 512))
        call = "self.{name}({x})[0]" if cls == "LSTMCell" else "self.{name}({x})"
        return module_call(f"nn.{cls}({f}, {hdim})", call, out=(shape[0], hdim))(shape)
    return make


for _cls in ("RNN", "LSTM", "GRU"):
    register(f"torch.nn.{_cls}", SRC_NN, "recurrent", (3,), _rnn(_cls), _RNN_START)
for _cls in ("RNNCell", "LSTMCell", "GRUCell"):
    register(f"torch.nn.{_cls}", SRC_NN, "recurrent", (2,), _rnn_cell(_cls))
