"""Forward-gradient training of a small language model with dualgen.

A forward gradient (Baydin et al., 2022) replaces backpropagation by one JVP: draw
a random direction v over all parameters, compute the directional derivative
d = <grad L, v> in the same pass as the loss (forward mode), and step along d * v,
an unbiased estimate of the gradient. The JVP runs through the model as
transformers builds it by default (scaled_dot_product_attention on its fused
CPU kernel), where native forward AD has no rule.

    python -m examples.forward_gradient.train [--steps 30]
"""

from __future__ import annotations

import argparse

import torch
from transformers import AutoConfig, AutoModelForCausalLM

import dualgen.forward_ad as fwAD


def small_lm(vocab: int = 64) -> torch.nn.Module:
    config = AutoConfig.for_model(
        "gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=vocab, n_positions=64
    )
    return AutoModelForCausalLM.from_config(config)


def loss_and_derivative(model, params: dict, direction: dict, tokens) -> tuple:
    """The loss and its derivative along `direction`, in one forward pass."""
    with fwAD.dual_level():
        duals = {k: fwAD.make_dual(p, direction[k]) for k, p in params.items()}
        out = torch.func.functional_call(model, duals, (tokens,), {"labels": tokens})
        loss, derivative = fwAD.unpack_dual(out.loss)
    return loss.item(), derivative.item()


def train(steps: int, lr: float = 1e-3, seed: int = 0) -> list[float]:
    torch.manual_seed(seed)
    model = small_lm()
    params = {k: p.detach() for k, p in model.named_parameters()}
    tokens = torch.randint(0, 64, (4, 32))  # one fixed batch: the loss must fall
    losses = []
    for _ in range(steps):
        direction = {k: torch.randn_like(p) for k, p in params.items()}
        loss, derivative = loss_and_derivative(model, params, direction, tokens)
        # The forward gradient, derivative * direction, estimates the gradient.
        params = {k: p - lr * derivative * direction[k] for k, p in params.items()}
        losses.append(loss)
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    losses = train(args.steps)
    print(
        f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {args.steps} forward-gradient steps"
    )


if __name__ == "__main__":
    main()
