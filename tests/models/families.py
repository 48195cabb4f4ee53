"""The real-model suite's models: small random configs of transformers families
and torch.nn staples, each with PyTorch's and the library's defaults (attention
implementation, norms, activations), and the inputs a tangent goes on.

Nothing is downloaded: every model is built from a config. A `Family` builds its
model and its inputs for a dtype; the differentiable inputs (embeddings, pixels,
audio) are the ones tangents go on, the others (masks, ids) stay plain.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

# transformers is the `models` extra: without it only the torch.nn staples run.
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
if HAS_TRANSFORMERS:  # its notices about the tiny configs are not the suite's
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", module="transformers")

BATCH, SEQ = 2, 7
WIDTH, HEADS, LAYERS, FFN = 32, 4, 2, 64
VOCAB = 99


@dataclass(frozen=True)
class Family:
    """One model of the suite."""

    name: str
    group: str  # decoder, encoder, encoder-decoder, vision, audio, ssm, long, torch.nn
    # in float32, train mode, seeded by the caller; HF families take config changes
    build: Callable[..., nn.Module]
    # dtype -> (differentiable inputs by keyword, plain inputs by keyword)
    inputs: Callable[[torch.dtype], tuple[dict, dict]]
    float64: bool = True  # the model runs in float64
    # Config changes that make a float64 model computing the same function, for
    # finite differences where the defaults do not run in float64 (MoE's grouped
    # matmul runs in single precision only: its experts one by one instead).
    float64_overrides: dict | None = None
    modes: tuple[str, ...] = ("eval", "train")
    output: str | None = None  # the output field checked (default: the first tensor)
    # What tangents go on (an output that reaches the inputs only through discrete
    # codes, as a quantizer's, has no tangent with respect to them).
    on: tuple[str, ...] = ("inputs", "parameters")

    @property
    def needs_transformers(self) -> bool:
        return self.group != "torch.nn"

    @property
    def has_finite_differences(self) -> bool:
        return self.float64 or self.float64_overrides is not None


def _hf(model_type: str, **config) -> Callable[..., nn.Module]:
    def build(**overrides) -> nn.Module:
        from transformers import AutoConfig, AutoModel

        cfg = AutoConfig.for_model(model_type, **config, **overrides)
        return AutoModel.from_config(cfg)

    return build


def _hf_family(name: str, group: str, inputs, **config) -> Family:
    """The transformers model of type `name` built from `config`, with its inputs."""
    return Family(name, group, _hf(name, **config), inputs)


def _moe_family(name: str, **experts) -> Family:
    """A mixture-of-experts decoder of LM's sizes, two experts a token; in float64
    only with its experts run one by one."""
    return Family(
        name,
        "decoder",
        _hf(name, **LM, num_key_value_heads=2, num_experts_per_tok=2, **experts),
        _text(),
        float64=False,
        float64_overrides=EAGER_EXPERTS,
    )


def _text(width: int = WIDTH, seq: int = SEQ, mask: bool = True):
    """inputs_embeds (differentiable) and an attention mask with padding."""

    def inputs(dtype):
        embeds = torch.randn(BATCH, seq, width, dtype=dtype)
        plain = {}
        if mask:
            attention = torch.ones(BATCH, seq, dtype=torch.long)
            attention[1, -2:] = 0  # the second sequence is padded
            plain["attention_mask"] = attention
        return {"inputs_embeds": embeds}, plain

    return inputs


def _seq2seq(width: int = WIDTH):
    def inputs(dtype):
        return {
            "inputs_embeds": torch.randn(BATCH, SEQ, width, dtype=dtype),
            "decoder_inputs_embeds": torch.randn(BATCH, SEQ - 2, width, dtype=dtype),
        }, {}

    return inputs


def _pixels(size: int, channels: int = 3):
    def inputs(dtype):
        return {
            "pixel_values": torch.randn(BATCH, channels, size, size, dtype=dtype)
        }, {}

    return inputs


EAGER_EXPERTS = {"experts_implementation": "eager"}
LM = {
    "hidden_size": WIDTH,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS,
    "intermediate_size": FFN,
    "vocab_size": VOCAB,
}
ENCODER = {**LM, "max_position_embeddings": 64}
# Vision and audio encoders: LM's sizes without a vocabulary.
NO_VOCAB = {k: v for k, v in LM.items() if k != "vocab_size"}
BART = {
    "d_model": WIDTH,
    "encoder_layers": LAYERS,
    "decoder_layers": LAYERS,
    "encoder_attention_heads": HEADS,
    "decoder_attention_heads": HEADS,
    "encoder_ffn_dim": FFN,
    "decoder_ffn_dim": FFN,
    "vocab_size": VOCAB,
    "max_position_embeddings": 64,
}
# BART's sizes with Whisper's mel-bin inputs and special tokens.
WHISPER = {
    **BART,
    "num_mel_bins": 8,
    "max_source_positions": 8,
    "max_target_positions": 16,
    "pad_token_id": 1,
    "bos_token_id": 2,
    "eos_token_id": 2,
    "decoder_start_token_id": 3,
    "begin_suppress_tokens": None,
    "suppress_tokens": None,
}
# Two stages of one block each: ConvNeXt's, ResNet's and DETR's ResNet backbone.
STAGES = {"hidden_sizes": [8, 16], "depths": [1, 1]}
RESNET = {"embedding_size": 8, **STAGES}
SWIN = {
    "image_size": 32,
    "patch_size": 4,
    "embed_dim": 16,
    "depths": [1, 1],
    "num_heads": [2, 2],
    "window_size": 4,
}
MOBILEVIT = {
    "image_size": 64,
    "hidden_sizes": [32, 48, 64],
    "neck_hidden_sizes": [16, 16, 24, 48, 64, 80, 96],
    "num_attention_heads": 2,
    "initializer_range": 0.3,
}


def _whisper_inputs(dtype):
    # input_features: (batch, mel bins, 2 * max_source_positions)
    return {"input_features": torch.randn(BATCH, 8, 16, dtype=dtype)}, {
        "decoder_input_ids": torch.tensor([[1, 5, 7], [1, 3, 2]])
    }


def _audio(length: int, channels: int | None = None):
    def inputs(dtype):
        shape = (BATCH, length) if channels is None else (BATCH, channels, length)
        return {"input_values": torch.randn(*shape, dtype=dtype)}, {}

    return inputs


class _Recurrent(nn.Module):
    """nn.LSTM / nn.GRU with defaults, batch_first, two layers."""

    def __init__(self, kind: type) -> None:
        super().__init__()
        self.rnn = kind(WIDTH, WIDTH, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x)[0]


def _plain_input(dtype):
    return {"x": torch.randn(BATCH, SEQ, WIDTH, dtype=dtype)}, {}


def _transformer_inputs(dtype):
    return {
        "src": torch.randn(BATCH, SEQ, WIDTH, dtype=dtype),
        "tgt": torch.randn(BATCH, SEQ - 2, WIDTH, dtype=dtype),
    }, {}


def _torch_transformer() -> nn.Module:
    return nn.Transformer(WIDTH, HEADS, LAYERS, LAYERS, FFN, batch_first=True)


FAMILIES: tuple[Family, ...] = (
    # decoder LMs
    _hf_family(
        "gpt2",
        "decoder",
        _text(),
        n_embd=WIDTH,
        n_layer=LAYERS,
        n_head=HEADS,
        vocab_size=VOCAB,
        n_positions=64,
    ),
    _hf_family("llama", "decoder", _text(), **LM, num_key_value_heads=2),
    _hf_family("mistral", "decoder", _text(), **LM, num_key_value_heads=2),
    _hf_family("gemma", "decoder", _text(), **LM, num_key_value_heads=2, head_dim=8),
    _hf_family("qwen2", "decoder", _text(), **LM, num_key_value_heads=2),
    _hf_family("phi", "decoder", _text(), **LM),
    _hf_family(
        "bloom",
        "decoder",
        _text(),
        hidden_size=WIDTH,
        n_layer=LAYERS,
        n_head=HEADS,
        vocab_size=VOCAB,
    ),
    _hf_family(
        "falcon",
        "decoder",
        _text(),
        hidden_size=WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        vocab_size=VOCAB,
    ),
    _moe_family("mixtral", num_local_experts=4),
    _moe_family(
        "qwen2_moe",
        num_experts=4,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=32,
    ),
    # encoders
    _hf_family("bert", "encoder", _text(), **ENCODER),
    _hf_family("roberta", "encoder", _text(), **ENCODER),
    _hf_family("deberta-v2", "encoder", _text(), **ENCODER),
    _hf_family("albert", "encoder", _text(width=16), **ENCODER, embedding_size=16),
    _hf_family("electra", "encoder", _text(width=16), **ENCODER, embedding_size=16),
    # encoder-decoders
    _hf_family(
        "t5",
        "encoder-decoder",
        _seq2seq(),
        d_model=WIDTH,
        d_kv=8,
        d_ff=FFN,
        num_layers=LAYERS,
        num_heads=HEADS,
        vocab_size=VOCAB,
    ),
    _hf_family("bart", "encoder-decoder", _seq2seq(), **BART),
    _hf_family("whisper", "encoder-decoder", _whisper_inputs, **WHISPER),
    # vision
    _hf_family("vit", "vision", _pixels(16), **NO_VOCAB, image_size=16, patch_size=4),
    _hf_family("swin", "vision", _pixels(32), **SWIN),
    _hf_family(
        "convnext", "vision", _pixels(32), image_size=32, **STAGES, num_stages=2
    ),
    _hf_family("resnet", "vision", _pixels(32), **RESNET, layer_type="bottleneck"),
    _hf_family("mobilevit", "vision", _pixels(64), **MOBILEVIT),
    # DETR's default backbone is timm's, and timm needs torchvision, whose
    # registry wheel does not load beside the CPU torch: transformers' own ResNet.
    _hf_family(
        "detr",
        "vision",
        _pixels(32),
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        backbone_config={
            "model_type": "resnet",
            **RESNET,
            "layer_type": "basic",
            "out_features": ["stage2"],
        },
        d_model=WIDTH,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        num_queries=4,
    ),
    # audio
    _hf_family(
        "wav2vec2",
        "audio",
        _audio(400),
        **NO_VOCAB,
        conv_dim=(8, 8),
        conv_kernel=(10, 3),
        conv_stride=(5, 2),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2,
    ),
    Family(
        "encodec",
        "audio",
        _hf(
            "encodec",
            hidden_size=16,
            num_filters=4,
            num_residual_layers=1,
            upsampling_ratios=[4, 2],
            codebook_size=16,
            codebook_dim=16,
        ),
        _audio(64, channels=1),
        output="audio_values",
        on=("parameters",),
    ),
    # state-space and recurrent
    _hf_family(
        "mamba",
        "ssm",
        _text(mask=False),
        hidden_size=WIDTH,
        num_hidden_layers=LAYERS,
        vocab_size=VOCAB,
        state_size=4,
        expand=2,
        conv_kernel=4,
    ),
    _hf_family(
        "rwkv",
        "ssm",
        _text(mask=False),
        hidden_size=WIDTH,
        num_hidden_layers=LAYERS,
        vocab_size=VOCAB,
        attention_hidden_size=WIDTH,
        intermediate_size=FFN,
        context_length=64,
    ),
    # long context
    _hf_family("longformer", "long", _text(seq=8), **ENCODER, attention_window=4),
    _hf_family(
        "big_bird",
        "long",
        _text(seq=16),
        **ENCODER,
        attention_type="block_sparse",
        block_size=2,
        num_random_blocks=1,
    ),
    # torch.nn staples
    Family("nn.LSTM", "torch.nn", lambda: _Recurrent(nn.LSTM), _plain_input),
    Family("nn.GRU", "torch.nn", lambda: _Recurrent(nn.GRU), _plain_input),
    Family("nn.Transformer", "torch.nn", _torch_transformer, _transformer_inputs),
    Family("nn.MultiheadAttention", "torch.nn", _Attention, _plain_input),
)

BY_NAME = {f.name: f for f in FAMILIES}
