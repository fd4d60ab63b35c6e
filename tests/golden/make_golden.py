"""Writes the golden files that tests/test_golden_models.cpp checks ember's models against:
PyTorch's own nn.TransformerEncoderLayer and nn.Transformer (batch_first, pre-LN and post-LN),
in float64, with dropout 0, on fixed inputs with padding. Each file holds the weights under
ember's parameter names, the inputs, the logits, the loss and every parameter's gradient, plus
the model's sizes in the safetensors metadata. Two more hold the pre-LN classifier as PyTorch
saves it in bfloat16 and in float16 (BF16 and F16 weights, the float32 weights they were rounded
from, the logits of the rounded model). The files are committed; the test needs no
PyTorch. Run once, from anywhere, after changing what is generated:

    /usr/bin/python3 tests/golden/make_golden.py
"""
import json
import math
import struct
from pathlib import Path

import torch
from torch import nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
PAD = 0  # the padding token id in every input, as ember's padding_idx and pad_id default

# Tiny sizes keep each file at a few tens of KB.
SIZES = {"vocab": 11, "d_model": 8, "num_heads": 2, "d_ff": 16, "num_layers": 2, "max_len": 8}


# --- safetensors writing (the format is simple enough to write without its package) ----------

DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64", torch.bfloat16: "BF16", torch.float16: "F16"}


def raw_bytes(tensor):
    """The tensor's elements as little-endian bytes; numpy has no bfloat16, so 16-bit tensors are
    read through their bit patterns."""
    tensor = tensor.detach().contiguous().cpu()
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.view(torch.int16)
    return tensor.numpy().tobytes()


def save_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, tensor in tensors.items():
        data = raw_bytes(tensor)
        header[name] = {"dtype": DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for blob in blobs:
            out.write(blob)


# --- PyTorch's names to ember's -----------------------------------------------------------------

# Each function below maps a PyTorch module's parameters to ember's names; `get` picks what is
# stored of each parameter: its value (value_of) or its gradient (gradient_of).

def value_of(parameter):
    return parameter.detach()


def gradient_of(parameter):
    return parameter.grad


def attention_weights(get, prefix, attention):
    """nn.MultiheadAttention packs the query, key and value projections into one in_proj_weight
    [3 d_model, d_model]; ember keeps them as q_proj, k_proj and v_proj."""
    q, k, v = get(attention.in_proj_weight).chunk(3)
    qb, kb, vb = get(attention.in_proj_bias).chunk(3)
    return {f"{prefix}.q_proj.weight": q, f"{prefix}.q_proj.bias": qb,
            f"{prefix}.k_proj.weight": k, f"{prefix}.k_proj.bias": kb,
            f"{prefix}.v_proj.weight": v, f"{prefix}.v_proj.bias": vb,
            f"{prefix}.out_proj.weight": get(attention.out_proj.weight),
            f"{prefix}.out_proj.bias": get(attention.out_proj.bias)}


def linear_weights(get, prefix, linear):
    return {f"{prefix}.weight": get(linear.weight), f"{prefix}.bias": get(linear.bias)}


norm_weights = linear_weights  # a LayerNorm's parameters are also weight and bias


def feed_forward_weights(get, prefix, layer):
    return {**linear_weights(get, f"{prefix}.linear1", layer.linear1),
            **linear_weights(get, f"{prefix}.linear2", layer.linear2)}


def encoder_layer_weights(get, prefix, layer):
    return {**attention_weights(get, f"{prefix}.self_attn", layer.self_attn),
            **feed_forward_weights(get, f"{prefix}.feed_forward", layer),
            **norm_weights(get, f"{prefix}.norm1", layer.norm1), **norm_weights(get, f"{prefix}.norm2", layer.norm2)}


def decoder_layer_weights(get, prefix, layer):
    return {**attention_weights(get, f"{prefix}.self_attn", layer.self_attn),
            **attention_weights(get, f"{prefix}.cross_attn", layer.multihead_attn),
            **feed_forward_weights(get, f"{prefix}.feed_forward", layer),
            **norm_weights(get, f"{prefix}.norm1", layer.norm1), **norm_weights(get, f"{prefix}.norm2", layer.norm2),
            **norm_weights(get, f"{prefix}.norm3", layer.norm3)}


def stack_weights(get, prefix, stack, layer_weights):
    named = {}
    for i, layer in enumerate(stack.layers):
        named.update(layer_weights(get, f"{prefix}.layers.{i}", layer))
    if stack.norm is not None:
        named.update(norm_weights(get, f"{prefix}.norm", stack.norm))
    return named


# --- the models, as the PyTorch tutorials write them --------------------------------------------

class Classifier(nn.Module):
    """ember's TransformerClassifier: token + learned position embeddings, their LayerNorm, an
    encoder stack (with a final LayerNorm when pre-LN), the first token's state (Cls) or the mean
    over real tokens (Mean), and a linear head."""

    def __init__(self, norm_first, activation, pooling, num_classes):
        super().__init__()
        d = SIZES["d_model"]
        self.pooling = pooling
        self.tokens = nn.Embedding(SIZES["vocab"], d, padding_idx=PAD)
        self.positions = nn.Embedding(SIZES["max_len"], d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, SIZES["num_heads"], SIZES["d_ff"], 0.0, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, SIZES["num_layers"], norm=nn.LayerNorm(d) if norm_first else None,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d, num_classes)

    def forward(self, ids):
        padding = ids == PAD
        x = self.norm(self.tokens(ids) + self.positions(torch.arange(ids.shape[1])))
        x = self.encoder(x, src_key_padding_mask=padding)
        if self.pooling == "cls":
            pooled = x[:, 0]
        else:
            keep = (~padding).to(x.dtype).unsqueeze(-1)
            pooled = (x * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled)

    def ember_weights(self, get):
        return {"token_embedding.weight": get(self.tokens.weight), "position_embedding.weight": get(self.positions.weight),
                **norm_weights(get, "embedding_norm", self.norm),
                **stack_weights(get, "encoder", self.encoder, encoder_layer_weights),
                **linear_weights(get, "classifier", self.head)}


def sinusoids(length, d_model):
    """The sinusoidal table as ember's SinusoidalPositionalEncoding holds it: computed in float64
    and stored in float32, the default dtype, as the PyTorch tutorial's buffer is; a model
    converted to float64 afterwards (ember's Module::to, PyTorch's .double()) converts the
    rounded values."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table.float().double()


class EncoderDecoder(nn.Module):
    """ember's Transformer: separate source and target embeddings scaled by sqrt(d_model) plus
    sinusoidal positions, nn.Transformer (final LayerNorms on both stacks), and an untied output
    projection. Padded source and target tokens are masked; the target is causal."""

    def __init__(self, norm_first, activation):
        super().__init__()
        d = SIZES["d_model"]
        self.source_embedding = nn.Embedding(SIZES["vocab"], d, padding_idx=PAD)
        self.target_embedding = nn.Embedding(SIZES["vocab"], d, padding_idx=PAD)
        self.transformer = nn.Transformer(d, SIZES["num_heads"], SIZES["num_layers"], SIZES["num_layers"],
                                          SIZES["d_ff"], 0.0, activation=activation, batch_first=True,
                                          norm_first=norm_first)
        self.output = nn.Linear(d, SIZES["vocab"])

    def embed(self, embedding, ids):
        return embedding(ids) * math.sqrt(SIZES["d_model"]) + sinusoids(ids.shape[1], SIZES["d_model"])

    def forward(self, source, target):
        length = target.shape[1]
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)  # true = may not attend
        hidden = self.transformer(self.embed(self.source_embedding, source), self.embed(self.target_embedding, target),
                                  tgt_mask=causal, src_key_padding_mask=source == PAD,
                                  tgt_key_padding_mask=target == PAD, memory_key_padding_mask=source == PAD)
        return self.output(hidden)

    def ember_weights(self, get):
        return {"source_embedding.embedding.weight": get(self.source_embedding.weight),
                "target_embedding.embedding.weight": get(self.target_embedding.weight),
                **stack_weights(get, "encoder", self.transformer.encoder, encoder_layer_weights),
                **stack_weights(get, "decoder", self.transformer.decoder, decoder_layer_weights),
                **linear_weights(get, "output_projection", self.output)}


# --- weights, inputs, and the file --------------------------------------------------------------

def randomize(model):
    """Every parameter drawn afresh, so that no bias is zero and no LayerNorm the identity: a
    gradient mapped to the wrong parameter cannot hide behind a symmetry."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if isinstance(model.get_submodule(name.rsplit(".", 1)[0]), nn.LayerNorm) and name.endswith("weight"):
                parameter.copy_(1.0 + 0.2 * torch.randn_like(parameter))
            else:
                parameter.copy_(0.5 * torch.randn_like(parameter))
        for module in model.modules():
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()


def token_ids(rows, length, real_lengths, first=None):
    """[rows, length] ids in [1, vocab), padded with PAD after each row's real length."""
    ids = torch.randint(1, SIZES["vocab"], (rows, length))
    if first is not None:
        ids[:, 0] = first
    for row, real in enumerate(real_lengths):
        ids[row, real:] = PAD
    return ids


def write_model(name, model, inputs, logits, loss, metadata):
    weights = model.ember_weights(value_of)
    tensors = dict(weights)
    tensors.update({f"input.{key}": value for key, value in inputs.items()})
    tensors["output.logits"] = logits.detach()
    tensors["output.loss"] = loss.detach().reshape(1)
    tensors.update({f"grad.{key}": value for key, value in model.ember_weights(gradient_of).items()})
    metadata = {key: str(value) for key, value in {**SIZES, **metadata}.items()}
    metadata["generated_by"] = f"tests/golden/make_golden.py with torch {torch.__version__}"
    save_safetensors(HERE / f"{name}.safetensors", tensors, metadata)
    print(f"{name}: {len(weights)} parameter tensors, loss {loss.item():.15f}")


def classifier(name, norm_first, activation, pooling):
    num_classes = 3
    model = Classifier(norm_first, activation, pooling, num_classes).double()
    randomize(model)
    model.train()  # dropout is 0; training mode keeps PyTorch off its inference fast path
    ids = token_ids(4, 6, [6, 4, 2, 5], first=1)  # row 0 unpadded, the others padded
    labels = torch.tensor([0, 2, 1, 2])
    logits = model(ids)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    write_model(name, model, {"ids": ids, "labels": labels}, logits, loss,
                {"model": "classifier", "num_classes": num_classes, "norm_first": int(norm_first),
                 "activation": activation, "pooling": pooling, "final_norm": int(norm_first)})


def encoder_decoder(name, norm_first, activation):
    model = EncoderDecoder(norm_first, activation).double()
    randomize(model)
    model.train()
    source = token_ids(3, 7, [7, 5, 3])
    target = token_ids(3, 6, [6, 4, 2], first=1)  # BOS first, then padded after each real length
    labels = token_ids(3, 6, [6, 4, 2])  # padded positions are ignored by the loss
    logits = model(source, target)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=PAD,
                           label_smoothing=0.1)
    loss.backward()
    write_model(name, model, {"source": source, "target": target, "labels": labels}, logits, loss,
                {"model": "encoder_decoder", "norm_first": int(norm_first), "activation": activation,
                 "ignore_index": PAD, "label_smoothing": 0.1})


def classifier_16_bit(name, dtype):
    """The pre-LN classifier as PyTorch saves it in a 16-bit dtype: its weights rounded from
    float32 by PyTorch and stored as BF16 or F16, beside the float32 weights they came from
    (under "float32.") and the logits PyTorch computes in float64 from the rounded weights."""
    num_classes = 3
    model = Classifier(True, "gelu", "cls", num_classes).double()
    randomize(model)
    model.train()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.float())  # float32 values, as a trained float32 model holds
    float32_weights = {key: value.float() for key, value in model.ember_weights(value_of).items()}
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.float().to(dtype).double())
    ids = token_ids(4, 6, [6, 4, 2, 5], first=1)
    logits = model(ids)
    tensors = {key: value.to(dtype) for key, value in float32_weights.items()}
    tensors.update({f"float32.{key}": value for key, value in float32_weights.items()})
    tensors["input.ids"] = ids
    tensors["output.logits"] = logits.detach()
    metadata = {key: str(value) for key, value in SIZES.items()}
    metadata.update({"model": "classifier", "num_classes": str(num_classes), "norm_first": "1", "activation": "gelu",
                     "pooling": "cls", "final_norm": "1", "dtype": DTYPES[dtype],
                     "generated_by": f"tests/golden/make_golden.py with torch {torch.__version__}"})
    save_safetensors(HERE / f"{name}.safetensors", tensors, metadata)
    print(f"{name}: {len(float32_weights)} parameter tensors in {dtype}")


def main():
    torch.manual_seed(17)
    classifier("classifier_pre_ln", norm_first=True, activation="gelu", pooling="cls")
    classifier("classifier_post_ln", norm_first=False, activation="relu", pooling="mean")
    encoder_decoder("encoder_decoder_pre_ln", norm_first=True, activation="relu")
    encoder_decoder("encoder_decoder_post_ln", norm_first=False, activation="gelu")
    classifier_16_bit("classifier_pre_ln_bf16", torch.bfloat16)
    classifier_16_bit("classifier_pre_ln_f16", torch.float16)


if __name__ == "__main__":
    main()
