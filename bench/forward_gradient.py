"""Benchmark: the forward-gradient step, one JVP with tangents on every parameter
(`torch.func.functional_call` + `make_dual`), of a small language model (GPT-2)
and a small vision transformer (ViT), built by transformers at its defaults.

dualgen runs them as built (scaled_dot_product_attention on its fused CPU kernel);
native forward AD and `torch.func.jvp` have no rule for that kernel, so they run
with attention by its definition (the MATH backend), the workaround a user of
native would need. One process, interleaved rounds, medians; float32, 2 threads.

    python bench/forward_gradient.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext

import allocator
import torch
import torch.autograd.forward_ad as native_ad
from torch.nn.attention import SDPBackend, sdpa_kernel

import dualgen.forward_ad as dual_ad


def language_model():
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "gpt2", n_embd=256, n_layer=4, n_head=4, vocab_size=1000, n_positions=256
    )
    tokens = torch.randint(0, 1000, (4, 128))
    return AutoModelForCausalLM.from_config(config), {
        "input_ids": tokens,
        "labels": tokens,
    }


def vision_model():
    from transformers import AutoConfig, AutoModelForImageClassification

    config = AutoConfig.for_model(
        "vit",
        hidden_size=192,
        num_hidden_layers=4,
        num_attention_heads=3,
        intermediate_size=768,
        image_size=64,
        patch_size=8,
        num_labels=10,
    )
    inputs = {
        "pixel_values": torch.randn(8, 3, 64, 64),
        "labels": torch.randint(0, 10, (8,)),
    }
    return AutoModelForImageClassification.from_config(config), inputs


def step_functions(model, inputs) -> dict:
    model.eval()
    params = {k: p.detach() for k, p in model.named_parameters()}
    direction = {k: torch.randn_like(p) for k, p in params.items()}

    def loss(ps):
        return torch.func.functional_call(model, ps, (), inputs).loss

    def forward_ad(api):
        with api.dual_level():
            duals = {k: api.make_dual(p, direction[k]) for k, p in params.items()}
            return api.unpack_dual(loss(duals)).tangent

    math = lambda: sdpa_kernel([SDPBackend.MATH])
    return {
        "dualgen": (lambda: forward_ad(dual_ad), nullcontext),
        "native": (lambda: forward_ad(native_ad), math),
        "func.jvp": (lambda: torch.func.jvp(loss, (params,), (direction,))[1], math),
    }


def check_agreement(functions: dict) -> None:
    """The three give the same directional derivative (float32 rounding apart):
    a time of a wrong answer means nothing."""
    values = {}
    for name, (fn, context) in functions.items():
        with context():
            values[name] = fn().item()
    reference = values["native"]
    for name, value in values.items():
        if abs(value - reference) > 1e-3 * max(abs(reference), 1e-3):
            raise SystemExit(f"{name} gives {value}, native {reference}")


def measure(functions: dict, rounds: int) -> dict[str, float]:
    for fn, context in functions.values():  # warm up
        with context():
            fn()
    samples = {name: [] for name in functions}
    for _ in range(rounds):
        for name, (fn, context) in functions.items():
            with context():
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args, heap = allocator.parse_args(parser)
    torch.set_num_threads(2)
    torch.manual_seed(0)
    print(
        "| model (tangents on every parameter) | native (math attention) | func.jvp (math attention) | dualgen | dualgen / native | dualgen / func.jvp |"
    )
    print("|---|---|---|---|---|---|")
    for label, build in (
        ("GPT-2, 4 layers, width 256, 4 x 128 tokens", language_model),
        ("ViT, 4 layers, width 192, 8 images 64 x 64", vision_model),
    ):
        functions = step_functions(*build())
        check_agreement(functions)
        times = measure(functions, args.rounds)
        ours = times["dualgen"]
        print(
            f"| {label} | {times['native'] * 1e3:.1f} ms | {times['func.jvp'] * 1e3:.1f} ms "
            f"| {ours * 1e3:.1f} ms | {ours / times['native']:.2f}x "
            f"| {ours / times['func.jvp']:.2f}x |"
        )
    print(
        f"\ntorch {torch.__version__}, 2 threads, float32, median of {args.rounds} rounds, {heap}"
    )


if __name__ == "__main__":
    main()
