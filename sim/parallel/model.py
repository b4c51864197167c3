"""A transformer described by its shape: what one token costs it in
parameters and FLOPs, and what one layer keeps for its backward pass.

The shape is the one the published runs give (layers, hidden size, heads,
key/value heads, the MLP's width and kind, sequence length, vocabulary,
experts), or a parameter count alone, from which `from_params` makes a GPT
shape of about that many parameters (hidden size 128 x layers, heads of 128,
an MLP 4 x wide, as GPT-3 175B's 96 layers of 12,288 are).

FLOPs count matrix multiplications only, as Megatron-LM's papers and the MFU
of every run checked here count them: forward 2 x (the layer's weights) per
token plus 4 x seq x hidden for the attention scores and their product with
the values (the whole sequence, causal or not), and the output layer's
2 x hidden x vocabulary; backward twice the forward. For GPT-3's shape this
is Megatron-LM's 72 B s l h^2 (1 + s/6h + V/12lh) exactly (Narayanan et al.,
SC21, appendix).

Activation bytes per token and layer (16-bit, stored for the backward pass)
follow Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (2022), section 4: 34 h + 5 a s for GPT's layer, split
here by part so that other MLPs and grouped key/value heads count right:
attention 7 h + 4 kv (its input, Q, K and V, the projection's input, a
dropout mask), the scores 5 a s (softmax in and out, its dropout mask; not
with flash attention, which recomputes them), the MLP 3 h + 4 f with GeLU
(input, the activation's input and output, a mask) or 2 h + 6 f with SwiGLU,
the two layer norms' inputs 4 h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional

MLPS = {"gelu": 2, "swiglu": 3}           # weight matrices in one MLP (or expert)
BYTES = 2                                  # 16-bit weights and activations


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int = 0                # the MLP's width (0: 4 x hidden)
    kv_heads: int = 0           # key/value heads (0: as many as heads)
    mlp: str = "gelu"           # gelu | swiglu
    experts: int = 1            # experts per MoE layer (1: dense)
    top_k: int = 1              # experts a token visits
    tied: bool = True           # the output layer shares the embedding's weights
    flash: bool = False         # attention scores recomputed, never stored (flash attention)

    def __post_init__(self):
        if not self.ffn:
            object.__setattr__(self, "ffn", 4 * self.hidden)
        if not self.kv_heads:
            object.__setattr__(self, "kv_heads", self.heads)

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * (self.hidden // self.heads)

    @property
    def attention_params(self) -> int:
        h = self.hidden
        return 2 * h * h + 2 * h * self.kv_dim            # Q, O and K, V

    @property
    def expert_params(self) -> int:
        return MLPS[self.mlp] * self.hidden * self.ffn

    @property
    def layer_params(self) -> int:
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self.attention_params + self.experts * self.expert_params + router + \
            4 * self.hidden

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params

    def layer_flops(self, tokens: float) -> float:
        """One layer's forward FLOPs for `tokens` tokens of full sequences."""
        router = self.hidden * self.experts if self.experts > 1 else 0
        weights = self.attention_params + self.top_k * self.expert_params + router
        return tokens * (2 * weights + 4 * self.seq * self.hidden)

    def attention_core_flops(self, tokens: float) -> float:
        """The scores and their product with the values: what selective
        recomputation runs again in the backward pass."""
        return tokens * 4 * self.seq * self.hidden

    def logits_flops(self, tokens: float) -> float:
        return tokens * 2 * self.hidden * self.vocab

    def flops_per_token(self) -> float:
        """Model FLOPs per trained token, forward and backward (what MFU counts)."""
        return 3 * (self.layers * self.layer_flops(1) + self.logits_flops(1))

    def activation_bytes(self, scores: bool) -> Dict[str, float]:
        """Bytes one token keeps per layer for its backward pass, by part;
        `scores`: the attention scores are stored (no flash attention, no
        recomputation of them)."""
        h, f = self.hidden, self.ffn
        mlp = 3 * h + 4 * f if self.mlp == "gelu" else 2 * h + 6 * f
        parts = {"attention": 7 * h + 4 * self.kv_dim, "mlp": mlp * self.top_k,
                 "norms": 4 * h}
        if scores and not self.flash:
            parts["scores"] = 5 * self.heads * self.seq
        return parts


def from_params(params: float, layers: Optional[int] = None, seq: int = 4096,
                vocab: int = 51200, name: Optional[str] = None) -> Model:
    """A GPT shape of about `params` parameters: 12 l h^2 in the layers,
    hidden about 128 x layers unless `layers` is given (a multiple of 1,024,
    so that its heads of 128 split over TP 8), heads of 128."""
    if params < 1e6:
        raise ValueError(f"a model of {params:g} parameters is too small to shape as a "
                         "transformer (at least 1e6)")
    if layers is None:
        layers = max(2, round((params / (12 * 128 ** 2)) ** (1 / 3)))
    width = math.sqrt(params / (12 * layers))
    step = 1024 if width >= 1024 else 128          # heads a multiple of 8, for TP up to 8
    hidden = max(128, step * round(width / step))
    return Model(name or f"a GPT shaped for {params:.3g} parameters", layers, hidden,
                 hidden // 128, seq, vocab)


# The published models the checks use (bench/training_bench.py), as their
# papers give them. GPT: Narayanan et al. (SC21) Table 1 and Korthikanti et
# al. (2022) Table 3: vocabulary 51,200, sequence 2,048. Llama 3 405B: "The
# Llama 3 Herd of Models" (2024) Table 3: 126 layers, 16,384 wide, FFN
# 53,248, 128 heads, 8 key/value heads, vocabulary 128,000, 8,192 tokens.
MODELS = {m.name: m for m in (
    Model("gpt-22b", 48, 6144, 64, 2048, 51200),
    Model("gpt-145b", 80, 12288, 96, 2048, 51200),
    Model("gpt-175b", 96, 12288, 96, 2048, 51200),
    Model("gpt-310b", 96, 16384, 128, 2048, 51200),
    Model("gpt-530b", 105, 20480, 128, 2048, 51200),
    Model("gpt-1t", 128, 25600, 160, 2048, 51200),
    Model("llama3-70b", 80, 8192, 64, 8192, 128000, ffn=28672, kv_heads=8, mlp="swiglu",
          tied=False, flash=True),
    Model("llama3-405b", 126, 16384, 128, 8192, 128000, ffn=53248, kv_heads=8,
          mlp="swiglu", tied=False, flash=True),
    # a mixture of experts: Mixtral 8x7B's shape (Jiang et al., 2024)
    Model("mixtral-8x7b", 32, 4096, 32, 4096, 32000, ffn=14336, kv_heads=8, mlp="swiglu",
          experts=8, top_k=2, tied=False, flash=True),
)}


def model(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"no model called {name!r}; there are: {', '.join(MODELS)}") from None

