"""PyTorch's half of the side-by-side benchmark: the reference workloads written as the PyTorch
tutorials write them (nn.TransformerEncoderLayer and nn.Transformer, batch_first, norm_first) and
GPT-2 as nanoGPT writes it, timed the way train_step times ember's, printing one JSON object on
stdout.

    python3 benchmarks/side_by_side/torch_workloads.py --workload classifier --threads 1
    python3 benchmarks/side_by_side/torch_workloads.py --workload gpt --batch 16 --threads 2
"""
import argparse
import json
import math
import resource
import time

import torch
from torch import nn
from torch.nn import functional as F


class Classifier(nn.Module):
    """Token + learned position embeddings, LayerNorm, dropout; a pre-LN GELU encoder; the
    first token's state, dropout and a linear head."""

    def __init__(self, vocab, seq_len, d_model, heads, layers, classes=4, dropout=0.1):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(seq_len, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.dropout(self.norm(self.tokens(ids) + self.positions(positions)))
        x = self.encoder(x)
        return self.head(self.dropout(x[:, 0]))


class EncoderDecoder(nn.Module):
    """One embedding for source and target, scaled by sqrt(d_model), plus sinusoidal positions
    and dropout; nn.Transformer (pre-LN, ReLU, final LayerNorms); an untied output projection."""

    def __init__(self, vocab, seq_len, d_model, heads, layers=3, dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab, d_model)
        position = torch.arange(seq_len).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(seq_len, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("sinusoids", table)
        self.dropout = nn.Dropout(dropout)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, 4 * d_model, dropout,
                                          activation="relu", batch_first=True, norm_first=True)
        self.output = nn.Linear(d_model, vocab)

    def embed(self, ids):
        x = self.embedding(ids) * math.sqrt(self.d_model) + self.sinusoids[: ids.shape[1]]
        return self.dropout(x)

    def forward(self, source, target, causal_mask):
        hidden = self.transformer(self.embed(source), self.embed(target), tgt_mask=causal_mask)
        return self.output(hidden)


class GPTBlock(nn.Module):
    """Pre-LN: x + dropout(proj(causal attention(qkv(ln_1(x))))), then x + dropout(MLP(ln_2(x)))
    with a tanh GELU."""

    def __init__(self, d_model, heads, dropout):
        super().__init__()
        self.heads, self.dropout_p = heads, dropout
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc, self.fc_proj = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def attention(self, x):
        batch, length, width = x.shape
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).split(width, dim=-1))
        dropout_p = self.dropout_p if self.training else 0.0
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2: its fused kernels
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        else:  # PyTorch 1.x, as Debian ships it: the same op written out
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            weights = F.dropout(torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1), dropout_p)
            out = weights @ v
        return self.proj(out.transpose(1, 2).reshape(batch, length, width))

    def forward(self, x):
        x = x + self.dropout(self.attention(self.ln_1(x)))
        return x + self.dropout(self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh")))


class GPT(nn.Module):
    """GPT-2: token + learned position embeddings and dropout, pre-LN blocks, a final LayerNorm,
    and the output layer tied to the token embedding."""

    def __init__(self, vocab, seq_len, d_model, heads, layers, dropout=0.1):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(seq_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        # GPT-2's initialisation, as nn::GPT2Model's: the tables N(0, 0.02), not nn.Embedding's
        # N(0, 1), which through the tied output layer would make the first logits huge.
        nn.init.normal_(self.tokens.weight, std=0.02)
        nn.init.normal_(self.positions.weight, std=0.02)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.dropout(self.tokens(ids) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.tokens.weight.T


# How PyTorch runs the model: eager (op by op), compiled (torch.compile fuses the memory-bound
# chains into generated kernels), or compiled with CUDA graphs (mode "reduce-overhead": the
# compiled forward and backward are also captured and replayed). ember's GPU bars are set
# against all three, so the GPU report times all three.
MODES = {"eager": None, "compile": "default", "compile-graphs": "reduce-overhead"}


def compiled(model, mode):
    """The model as `mode` runs it. Compiled, its forward (and through AOTAutograd its backward)
    is generated code; the optimizer step stays PyTorch's default AdamW in every mode."""
    return model if MODES[mode] is None else torch.compile(model, mode=MODES[mode])


# --precision: the autocast dtype of the forward pass and the loss (None: float32 throughout),
# as ember's train_step --precision. fp16 also scales the loss with a GradScaler.
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_for(device, precision):
    """The autocast context of a step. A PyTorch that cannot autocast to the dtype on this device
    refuses, or only warns and computes in float32: that would time another computation than
    ember's, so either is an error here."""
    dtype = AUTOCAST_DTYPES[precision]
    try:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            on = torch.is_autocast_cpu_enabled() if device.type == "cpu" else torch.is_autocast_enabled()
    except RuntimeError:  # PyTorch 1.13 on the CPU: "AutocastCPU only support Bfloat16"
        on = False
    if dtype is not None and not on:
        raise SystemExit(f"error: --precision {precision}: PyTorch {torch.__version__} cannot autocast to {dtype} "
                         f"on {device.type}")
    return lambda: torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def grad_scaler(device, enabled):
    """torch.amp.GradScaler (PyTorch 2.3 and later), else the CUDA one older versions have."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device.type, enabled=enabled)
    if enabled and device.type != "cuda":
        raise SystemExit(f"error: --precision fp16: PyTorch {torch.__version__} has no GradScaler for {device.type}")
    return torch.cuda.amp.GradScaler(enabled=enabled)


def make_step(workload, batch, seq_len, d_model, heads, vocab, device, mode="eager", precision="fp32", layers=0):
    """The model, its AdamW, one fixed batch, and a function running one training step."""
    if workload == "classifier":
        seq_len = seq_len or 128
        vocab = vocab or 8192
        model = Classifier(vocab, seq_len, d_model, heads, layers=layers or 4).to(device)
        net = compiled(model, mode)
        ids = torch.randint(4, vocab, (batch, seq_len), device=device)
        labels = torch.randint(0, 4, (batch,), device=device)
        loss_fn = nn.CrossEntropyLoss()
        tokens = ids.numel()

        def forward():
            return loss_fn(net(ids), labels)
    elif workload == "encoder-decoder":
        seq_len = seq_len or 64
        vocab = vocab or 8000
        model = EncoderDecoder(vocab, seq_len, d_model, heads, layers=layers or 3).to(device)
        net = compiled(model, mode)
        source = torch.randint(4, vocab, (batch, seq_len), device=device)
        target_in = torch.randint(4, vocab, (batch, seq_len), device=device)
        target_out = torch.randint(4, vocab, (batch * seq_len,), device=device)
        causal_mask = nn.Transformer.generate_square_subsequent_mask(seq_len).to(device)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        tokens = source.numel() + target_in.numel()

        def forward():
            logits = net(source, target_in, causal_mask)
            return loss_fn(logits.reshape(-1, logits.shape[-1]), target_out)
    elif workload == "gpt":
        seq_len = seq_len or 128
        vocab = vocab or 50257
        model = GPT(vocab, seq_len, d_model, heads, layers=layers or 4).to(device)
        net = compiled(model, mode)
        window = torch.randint(4, vocab, (batch, seq_len + 1), device=device)
        inputs, targets = window[:, :-1].contiguous(), window[:, 1:].contiguous()
        tokens = inputs.numel()

        def forward():
            logits = net(inputs)
            return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    else:
        raise SystemExit(f"error: unknown workload '{workload}' (classifier, encoder-decoder, gpt)")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = autocast_for(device, precision)
    scaler = grad_scaler(device, enabled=precision == "fp16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = forward()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.item()  # waits for the step, on any device

    return model, step, tokens


def loaded_blas():
    """The OpenBLAS build this process loaded (pthread or openmp), from its memory maps."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "openblas" in line:
                return line.split()[-1]
    return "unknown"


def thread_count():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="classifier")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=0)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=0)
    parser.add_argument("--layers", type=int, default=0, help="blocks (0: the workload's own)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--allow-tf32", action="store_true", help="let CUDA float32 matmuls use TF32 tensor cores")
    parser.add_argument("--mode", default="eager", choices=list(MODES), help="eager, compiled, or compiled with CUDA graphs")
    parser.add_argument("--precision", default="fp32", choices=list(AUTOCAST_DTYPES),
                        help="float32, or autocast to bfloat16 or float16 (float16 with a GradScaler)")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        # The same TF32 setting as ember's run (off by default: float32 on both sides).
        torch.backends.cuda.matmul.allow_tf32 = args.allow_tf32
        torch.backends.cudnn.allow_tf32 = args.allow_tf32
        torch.cuda.reset_peak_memory_stats()
    model, step, tokens = make_step(args.workload, args.batch, args.seq_len, args.d_model, args.heads,
                                    args.vocab, device, args.mode, args.precision, args.layers)
    for _ in range(args.warmup):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF)
    step_ms = []
    step_faults = []
    loss = 0.0
    for _ in range(args.steps):
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        loss = step()
        step_ms.append(1e3 * (time.perf_counter() - start))
        step_faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
    after = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "library": "pytorch",
        "version": torch.__version__,
        "workload": args.workload,
        "device": str(device),
        "precision": args.precision,
        "batch": args.batch,
        "tokens_per_step": tokens,
        "parameters": sum(p.numel() for p in model.parameters()),
        "step_ms": step_ms,
        "loss": loss,
        "peak_rss_mb": after.ru_maxrss / 1024.0,
        "minor_faults_per_step": (after.ru_minflt - before.ru_minflt) / args.steps,
        "minor_faults_steps": step_faults,
        "threads": thread_count(),
        "torch_threads": args.threads,
        "mode": args.mode,
        "blas": loaded_blas(),
    }
    if device.type == "cuda":
        result["peak_device_mb"] = torch.cuda.max_memory_allocated() / 2**20
        result["gpu"] = torch.cuda.get_device_name(device)
        result["allow_tf32"] = args.allow_tf32
    print(json.dumps(result))


if __name__ == "__main__":
    main()
