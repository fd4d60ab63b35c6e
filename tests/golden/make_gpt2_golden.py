"""Writes the GPT-2 golden files that tests/test_gpt2.cpp checks ember's nn::GPT2* against.

The reference is GPT-2 written out here from its published definition (Radford et al., 2019, in
the layout of Hugging Face's modeling_gpt2, whose parameter names and config.json keys real
checkpoints use), in float64 with PyTorch's own ops and dropout off: token and learned position
embeddings; pre-LN blocks whose attention projects queries, keys and values with one Conv1D
(x W + b, W stored [in, out]), attends causally and projects back with a second, and whose MLP is
Conv1D, tanh GELU, Conv1D; a final LayerNorm; and logits from the token table itself.

Two checkpoint folders are written as a user finds them (config.json + model.safetensors):
    gpt2_tiny_hub/  the key form of the `gpt2` checkpoint on the hub, saved from the base model:
                    no "transformer." prefix, no lm_head.weight, and the causal-mask buffers of
                    older files (h.<i>.attn.bias, a lower-triangular [1, 1, n, n]; and
                    h.<i>.attn.masked_bias, a scalar);
    gpt2_tiny_lm/   a GPT2LMHeadModel's: "transformer." keys and lm_head.weight (the token table).
and gpt2_tiny_golden.safetensors holds the ids, the final states, the logits, the loss with
labels = ids (each position but the last predicting the next id), and the gradient of that loss
for every parameter under its GPT2LMHeadModel name ("grad.transformer.wte.weight" holds both the
embedding's and the tied output layer's share).

    /usr/bin/python3 tests/golden/make_gpt2_golden.py
"""
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from make_golden import save_safetensors

HERE = Path(__file__).resolve().parent
CONFIG = {
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 50, "n_positions": 16, "n_embd": 24,
    "n_layer": 2, "n_head": 4, "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1,
    "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
    "bos_token_id": 49, "eos_token_id": 49, "tie_word_embeddings": True,
}


def parameter_shapes(config):
    c, v, inner = config["n_embd"], config["vocab_size"], config["n_inner"] or 4 * config["n_embd"]
    shapes = {"transformer.wte.weight": [v, c], "transformer.wpe.weight": [config["n_positions"], c]}
    for layer in range(config["n_layer"]):
        p = f"transformer.h.{layer}."
        shapes[p + "ln_1.weight"] = shapes[p + "ln_1.bias"] = [c]
        shapes[p + "attn.c_attn.weight"], shapes[p + "attn.c_attn.bias"] = [c, 3 * c], [3 * c]
        shapes[p + "attn.c_proj.weight"], shapes[p + "attn.c_proj.bias"] = [c, c], [c]
        shapes[p + "ln_2.weight"] = shapes[p + "ln_2.bias"] = [c]
        shapes[p + "mlp.c_fc.weight"], shapes[p + "mlp.c_fc.bias"] = [c, inner], [inner]
        shapes[p + "mlp.c_proj.weight"], shapes[p + "mlp.c_proj.bias"] = [inner, c], [c]
    shapes["transformer.ln_f.weight"] = shapes["transformer.ln_f.bias"] = [c]
    return shapes


def random_parameters(config):
    """Values of the size a trained model has (LayerNorm weights near 1, small biases), so that
    every part of the network moves the outputs."""
    generator = torch.Generator().manual_seed(2019)
    params = {}
    for name, shape in parameter_shapes(config).items():
        value = torch.randn(shape, generator=generator, dtype=torch.float64)
        if ".ln_" in name and name.endswith("weight"):
            value = 1.0 + 0.1 * value
        elif name.endswith("bias"):
            value = 0.1 * value
        elif name.endswith("wte.weight") or name.endswith("wpe.weight"):
            value = 0.5 * value
        else:  # a Conv1D weight, [in, out]
            value = value / math.sqrt(shape[0])
        params[name] = value.requires_grad_(True)
    return params


def conv1d(x, p, prefix):
    """GPT-2's projection: x W + b with W stored [in, out]."""
    return x @ p[prefix + ".weight"] + p[prefix + ".bias"]


def layer_norm(x, p, prefix, eps):
    return F.layer_norm(x, x.shape[-1:], p[prefix + ".weight"], p[prefix + ".bias"], eps)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(d) + causal mask) v, the mask written out as GPT-2's -inf above the
    diagonal."""
    length, head_dim = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def gpt2_states(p, config, ids):
    eps, heads = config["layer_norm_epsilon"], config["n_head"]
    batch, length = ids.shape
    width = config["n_embd"]
    head_dim = width // heads
    h = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][torch.arange(length)]

    def split(t):
        return t.view(batch, length, heads, head_dim).transpose(1, 2)

    for layer in range(config["n_layer"]):
        pre = f"transformer.h.{layer}."
        q, k, v = conv1d(layer_norm(h, p, pre + "ln_1", eps), p, pre + "attn.c_attn").split(width, dim=-1)
        q, k, v = split(q), split(k), split(v)
        merged = causal_attention(q, k, v).transpose(1, 2).reshape(batch, length, width)
        h = h + conv1d(merged, p, pre + "attn.c_proj")
        inner = F.gelu(conv1d(layer_norm(h, p, pre + "ln_2", eps), p, pre + "mlp.c_fc"), approximate="tanh")
        h = h + conv1d(inner, p, pre + "mlp.c_proj")
    return layer_norm(h, p, "transformer.ln_f", eps)


def write_checkpoint(folder, config, tensors):
    folder.mkdir(exist_ok=True)
    with open(folder / "config.json", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    save_safetensors(folder / "model.safetensors", tensors, {"format": "pt"})


def main():
    p = random_parameters(CONFIG)
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 12), generator=generator)

    states = gpt2_states(p, CONFIG, ids)
    logits = states @ p["transformer.wte.weight"].T
    # Labels = ids, as Hugging Face computes it: position t's logits against id t + 1.
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, CONFIG["vocab_size"]), ids[:, 1:].reshape(-1))
    names = list(p)
    gradients = torch.autograd.grad(loss, [p[n] for n in names])

    n = CONFIG["n_positions"]
    hub = {name.removeprefix("transformer."): value.detach() for name, value in p.items()}
    for layer in range(CONFIG["n_layer"]):
        hub[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(n, n, dtype=torch.float64)).view(1, 1, n, n)
        hub[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4, dtype=torch.float64)
    write_checkpoint(HERE / "gpt2_tiny_hub", CONFIG, hub)
    lm = {name: value.detach() for name, value in p.items()}
    lm["lm_head.weight"] = p["transformer.wte.weight"].detach()
    write_checkpoint(HERE / "gpt2_tiny_lm", CONFIG, lm)

    golden = {"ids": ids, "states": states.detach(), "logits": logits.detach(), "loss": loss.detach().reshape(1)}
    for name, gradient in zip(names, gradients):
        golden["grad." + name] = gradient
    save_safetensors(HERE / "gpt2_tiny_golden.safetensors", golden, {"format": "pt"})
    print(f"wrote gpt2_tiny_hub/, gpt2_tiny_lm/ and gpt2_tiny_golden.safetensors ({len(gradients)} gradients)")


if __name__ == "__main__":
    main()
