"""Writes the BERT golden files that tests/test_bert.cpp checks ember's nn::Bert* against.

The reference is BERT written out here from its published definition (Devlin et al., 2019, and
the layout of Hugging Face's modeling_bert, whose parameter names and config.json keys real
checkpoints use), in float64 with PyTorch's own ops and dropout off: embeddings (word, position,
token type, LayerNorm), post-LN encoder layers (self-attention with an additive padding mask,
the output dense and LayerNorm, the intermediate dense with the configured activation, the
output dense and LayerNorm), the tanh pooler, the masked-LM head (transform dense, activation,
LayerNorm, decoder tied to the word embeddings plus a bias) and the classification head.

Two checkpoint folders are written as a user downloads them (config.json + model.safetensors):
    bert_tiny_mlm/   a BertForMaskedLM checkpoint: "bert." prefix, no pooler, LayerNorm weights
                     under the old "gamma"/"beta" names, the tied decoder weight left out, as in
                     bert-base-uncased's file;
    bert_tiny_cls/   a BertForSequenceClassification checkpoint, every parameter under its name.
and bert_tiny_golden.safetensors holds the inputs, the masked-LM logits, the classification
logits and loss, and the gradient of that loss for every parameter of the classifier.

    /usr/bin/python3 tests/golden/make_bert_golden.py
"""
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from make_golden import save_safetensors

HERE = Path(__file__).resolve().parent
CONFIG = {
    "architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": 40, "hidden_size": 16,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 12,
    "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
    "position_embedding_type": "absolute",
}
NUM_LABELS = 3


def parameter_shapes(config, num_labels):
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    shapes = {
        "bert.embeddings.word_embeddings.weight": [v, h],
        "bert.embeddings.position_embeddings.weight": [config["max_position_embeddings"], h],
        "bert.embeddings.token_type_embeddings.weight": [config["type_vocab_size"], h],
        "bert.embeddings.LayerNorm.weight": [h], "bert.embeddings.LayerNorm.bias": [h],
    }
    for layer in range(config["num_hidden_layers"]):
        p = f"bert.encoder.layer.{layer}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = [h, h], [h]
        shapes[p + "attention.output.LayerNorm.weight"] = shapes[p + "attention.output.LayerNorm.bias"] = [h]
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = [i, h], [i]
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = [h, i], [h]
        shapes[p + "output.LayerNorm.weight"] = shapes[p + "output.LayerNorm.bias"] = [h]
    shapes["bert.pooler.dense.weight"], shapes["bert.pooler.dense.bias"] = [h, h], [h]
    shapes["cls.predictions.transform.dense.weight"], shapes["cls.predictions.transform.dense.bias"] = [h, h], [h]
    shapes["cls.predictions.transform.LayerNorm.weight"] = [h]
    shapes["cls.predictions.transform.LayerNorm.bias"] = [h]
    shapes["cls.predictions.bias"] = [v]
    shapes["classifier.weight"], shapes["classifier.bias"] = [num_labels, h], [num_labels]
    return shapes


def random_parameters(config, num_labels):
    """Values of the size a trained model has (LayerNorm weights near 1), so that every part of
    the network moves the outputs."""
    generator = torch.Generator().manual_seed(2019)
    params = {}
    for name, shape in parameter_shapes(config, num_labels).items():
        value = torch.randn(shape, generator=generator, dtype=torch.float64)
        if "LayerNorm.weight" in name:
            value = 1.0 + 0.1 * value
        elif name.endswith("bias"):
            value = 0.1 * value
        else:
            value = value / math.sqrt(shape[-1])
        params[name] = value.requires_grad_(True)
    return params


def activation(name, x):
    if name == "gelu":
        return F.gelu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu(x)
    raise ValueError(name)


def layer_norm(x, p, prefix, eps):
    return F.layer_norm(x, x.shape[-1:], p[prefix + ".weight"], p[prefix + ".bias"], eps)


def linear(x, p, prefix):
    return F.linear(x, p[prefix + ".weight"], p[prefix + ".bias"])


def bert_encoder(p, config, ids, token_types, attention_mask):
    eps, heads = config["layer_norm_eps"], config["num_attention_heads"]
    batch, length = ids.shape
    positions = torch.arange(length)
    # The word table skips its padding row in the backward pass, as nn.Embedding(padding_idx) does.
    words = F.embedding(ids, p["bert.embeddings.word_embeddings.weight"], padding_idx=config["pad_token_id"])
    x = (words + p["bert.embeddings.token_type_embeddings.weight"][token_types]
         + p["bert.embeddings.position_embeddings.weight"][positions])
    x = layer_norm(x, p, "bert.embeddings.LayerNorm", eps)
    # Padding: a large negative number added to the scores of masked keys, as the reference does.
    additive = (1.0 - attention_mask.to(torch.float64))[:, None, None, :] * torch.finfo(torch.float64).min
    head_dim = config["hidden_size"] // heads
    for layer in range(config["num_hidden_layers"]):
        pre = f"bert.encoder.layer.{layer}."

        def split(t):
            return t.view(batch, length, heads, head_dim).transpose(1, 2)

        q, k, v = (split(linear(x, p, pre + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + additive
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, length, -1)
        x = layer_norm(linear(context, p, pre + "attention.output.dense") + x, p, pre + "attention.output.LayerNorm", eps)
        inner = activation(config["hidden_act"], linear(x, p, pre + "intermediate.dense"))
        x = layer_norm(linear(inner, p, pre + "output.dense") + x, p, pre + "output.LayerNorm", eps)
    return x


def mlm_logits(p, config, states):
    t = activation(config["hidden_act"], linear(states, p, "cls.predictions.transform.dense"))
    t = layer_norm(t, p, "cls.predictions.transform.LayerNorm", config["layer_norm_eps"])
    return t @ p["bert.embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]


def classifier_logits(p, states):
    pooled = torch.tanh(linear(states[:, 0], p, "bert.pooler.dense"))
    return linear(pooled, p, "classifier")


def write_checkpoint(folder, config, tensors):
    folder.mkdir(exist_ok=True)
    with open(folder / "config.json", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    save_safetensors(folder / "model.safetensors", tensors, {"format": "pt"})


def main():
    torch.manual_seed(0)
    p = random_parameters(CONFIG, NUM_LABELS)
    # Two sequences: [CLS] ... [SEP] with a second segment, and a shorter one padded at the end.
    ids = torch.tensor([[2, 11, 23, 5, 3, 17, 8, 3], [2, 31, 9, 14, 3, 0, 0, 0]])
    token_types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]])
    attention_mask = (ids != 0).to(torch.int64)
    labels = torch.tensor([2, 0])

    states = bert_encoder(p, CONFIG, ids, token_types, attention_mask)
    masked_lm = mlm_logits(p, CONFIG, states)
    logits = classifier_logits(p, states)
    loss = F.cross_entropy(logits, labels)
    classifier_names = [n for n in p if not n.startswith("cls.")]
    gradients = torch.autograd.grad(loss, [p[n] for n in classifier_names])

    mlm_config = dict(CONFIG)
    mlm_tensors = {}
    for name, value in p.items():
        if name.startswith("bert.pooler") or name.startswith("classifier"):
            continue
        name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        mlm_tensors[name] = value.detach()
    write_checkpoint(HERE / "bert_tiny_mlm", mlm_config, mlm_tensors)

    cls_config = dict(CONFIG, architectures=["BertForSequenceClassification"],
                      id2label={str(i): f"LABEL_{i}" for i in range(NUM_LABELS)},
                      label2id={f"LABEL_{i}": i for i in range(NUM_LABELS)})
    write_checkpoint(HERE / "bert_tiny_cls", cls_config, {n: p[n].detach() for n in classifier_names})

    golden = {"input_ids": ids, "token_type_ids": token_types, "attention_mask": attention_mask, "labels": labels,
              "mlm_logits": masked_lm.detach(), "cls_logits": logits.detach(), "cls_loss": loss.detach().reshape(1)}
    for name, gradient in zip(classifier_names, gradients):
        golden["grad." + name] = gradient
    save_safetensors(HERE / "bert_tiny_golden.safetensors", golden, {"num_labels": str(NUM_LABELS)})
    print(f"wrote bert_tiny_mlm/, bert_tiny_cls/ and bert_tiny_golden.safetensors ({len(gradients)} gradients)")


if __name__ == "__main__":
    main()
