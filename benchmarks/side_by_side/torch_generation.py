"""PyTorch's half of the generation benchmark: GPT-2 continues a prompt greedily, one token at a
time with a KV cache (each step reads only the new token, and every block appends its keys and
values to what it kept), and each token is timed. Reads the checkpoint ember's generate_tokens
wrote (--save-weights), so that both libraries run the same weights and must choose the same
tokens. Prints one JSON object on stdout.

    python3 benchmarks/side_by_side/torch_generation.py --weights /tmp/gpt2_random --prompt-ids 1,2,3
"""
import argparse
import json
import math
import resource
import struct
import time
from pathlib import Path
from statistics import median

import torch
from torch.nn import functional as F


def load_safetensors(path):
    """The tensors of a safetensors file: an 8-byte little-endian header length, the JSON header,
    then each tensor's bytes."""
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64}
    data = Path(path).read_bytes()
    (header_length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_length])
    body = bytearray(data[8 + header_length:])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = torch.frombuffer(body[begin:end], dtype=dtypes[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def layer_norm(x, p, prefix, eps):
    return F.layer_norm(x, x.shape[-1:], p[prefix + ".weight"], p[prefix + ".bias"], eps)


def conv1d(x, p, prefix):
    """GPT-2's projection, x W + b with W stored [in, out], as one fused addmm."""
    return torch.addmm(p[prefix + ".bias"], x.reshape(-1, x.shape[-1]), p[prefix + ".weight"]).view(
        *x.shape[:-1], -1)


def forward(p, config, ids, cache):
    """ids [1, T] after the cache's positions -> the last position's logits; extends the cache."""
    heads, width, eps = config["n_head"], config["n_embd"], config["layer_norm_epsilon"]
    past = cache[0][0].shape[2] if cache else 0
    length = ids.shape[1]
    h = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][past:past + length]
    for layer in range(config["n_layer"]):
        pre = f"transformer.h.{layer}."
        q, k, v = (t.view(1, length, heads, -1).transpose(1, 2)
                   for t in conv1d(layer_norm(h, p, pre + "ln_1", eps), p, pre + "attn.c_attn").split(width, dim=-1))
        if len(cache) > layer:
            k = torch.cat([cache[layer][0], k], dim=2)
            v = torch.cat([cache[layer][1], v], dim=2)
            cache[layer] = (k, v)
        else:
            cache.append((k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if length > 1:  # the prompt: causal within it
            future = torch.ones(length, past + length, dtype=torch.bool).triu(past + 1)
            scores = scores.masked_fill(future, float("-inf"))
        attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(1, length, width)
        h = h + conv1d(attended, p, pre + "attn.c_proj")
        inner = F.gelu(conv1d(layer_norm(h, p, pre + "ln_2", eps), p, pre + "mlp.c_fc"), approximate="tanh")
        h = h + conv1d(inner, p, pre + "mlp.c_proj")
    last = layer_norm(h[:, -1], p, "transformer.ln_f", eps)
    return last @ p["transformer.wte.weight"].T


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", required=True, help="a checkpoint folder in Hugging Face's layout")
    parser.add_argument("--prompt-ids", required=True, help="the prompt's token ids, separated by commas")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = Path(args.weights)
    config = json.loads((folder / "config.json").read_text())
    p = {name: tensor.float() for name, tensor in load_safetensors(folder / "model.safetensors").items()}
    prompt = [int(i) for i in args.prompt_ids.split(",")]

    generated, token_ms, cache = [], [], []
    with torch.inference_mode():
        start = time.perf_counter()
        next_id = int(forward(p, config, torch.tensor([prompt]), cache).argmax())
        prompt_ms = 1e3 * (time.perf_counter() - start)
        generated.append(next_id)
        for _ in range(args.new_tokens - 1):
            start = time.perf_counter()
            next_id = int(forward(p, config, torch.tensor([[next_id]]), cache).argmax())
            token_ms.append(1e3 * (time.perf_counter() - start))
            generated.append(next_id)
    print(json.dumps({
        "library": "pytorch", "version": torch.__version__, "threads": args.threads,
        "n_layer": config["n_layer"], "n_head": config["n_head"], "n_embd": config["n_embd"],
        "prompt_tokens": len(prompt), "prompt_ms": prompt_ms, "token_ms": token_ms,
        "median_token_ms": median(token_ms) if token_ms else 0.0, "generated": generated,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


if __name__ == "__main__":
    main()
