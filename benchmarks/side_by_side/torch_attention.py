"""PyTorch's fused attention (torch.nn.functional.scaled_dot_product_attention, "SDPA") at the
sizes bench_cuda_attention times ember's, on the same GPU and in the same check, so that the two
are compared in one run rather than against figures from elsewhere.

    python3 benchmarks/side_by_side/torch_attention.py --out sdpa-attention.json

The cases (attention_cases below, the same as bench_cuda_attention.cpp's):
- bfloat16 and float16, batch 16, 16 heads: head dim 64 at lengths 1,024 and 4,096, head dim 128
  at 2,048; causal and not; on SDPA's flash backend (FlashAttention-2, forced) and on its default
  choice;
- float32, batch 32, 4 heads, head dim 64 (heads split off a [batch, length, 256] projection as
  views, as ember's benchmark and MultiHeadAttention do): lengths 128 (the classifier's) and
  1,024 to 4,096; causal and not; on SDPA's default choice (the flash backend takes no float32).
Each is timed forward alone and forward + backward, by CUDA events around each iteration after a
warm-up; the median is kept.

FLOPs are counted as FlashAttention-2's benchmarks count them, and as bench_cuda_attention does:
forward 4 B H L S E (q k^T and weights v), backward 2.5 times the forward (the recomputed scores
included), so forward + backward 3.5 times; halved when causal. The JSON lists one entry per case
and backend: dtype, batch, heads, length, head_dim, causal, pass ("forward" or
"forward_backward"), backend ("flash" or "default"), median_ms, tflops; or an "error" for a
backend that refused the case.

Needs PyTorch 2.3 or later (torch.nn.attention.sdpa_kernel) and a CUDA GPU; torch is imported
only when the measurements run, so the case list and the FLOP counts can be read without it.
"""
import argparse
import json
import statistics
import sys

BF16_BATCH, BF16_HEADS = 16, 16
BF16_SHAPES = [(1024, 64), (4096, 64), (2048, 128)]  # (length, head dim)
SIXTEEN_BIT = ("bfloat16", "float16")
FLOAT32_BATCH, FLOAT32_HEADS, FLOAT32_HEAD_DIM = 32, 4, 64
FLOAT32_LENGTHS = [128, 1024, 2048, 4096]
PASSES = ("forward", "forward_backward")


def attention_flops(batch, heads, length, head_dim, causal, pass_name):
    forward = 4.0 * batch * heads * length * length * head_dim
    if causal:
        forward /= 2
    return forward if pass_name == "forward" else 3.5 * forward


def attention_cases():
    """(dtype, batch, heads, length, head_dim, causal, backends) for every case, in order."""
    cases = []
    for dtype in SIXTEEN_BIT:
        for length, head_dim in BF16_SHAPES:
            for causal in (False, True):
                cases.append((dtype, BF16_BATCH, BF16_HEADS, length, head_dim, causal, ("flash", "default")))
    for length in FLOAT32_LENGTHS:
        for causal in (False, True):
            cases.append(("float32", FLOAT32_BATCH, FLOAT32_HEADS, length, FLOAT32_HEAD_DIM, causal, ("default",)))
    return cases


def measure(torch, run, iterations, warmup):
    """Median milliseconds of run() over `iterations` calls, each between two CUDA events."""
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def operands(torch, dtype, batch, heads, length, head_dim, requires_grad):
    """q, k, v as bench_cuda_attention makes them: 16-bit [B, H, L, E] contiguous; float32 heads
    split off a [B, L, H E] projection as views."""
    device = "cuda"
    if dtype in SIXTEEN_BIT:
        shape = (batch, heads, length, head_dim)
        return [torch.randn(shape, device=device, dtype=getattr(torch, dtype), requires_grad=requires_grad)
                for _ in range(3)]
    return [torch.randn((batch, length, heads * head_dim), device=device, requires_grad=requires_grad)
            for _ in range(3)]


def as_heads(x, heads, head_dim, dtype):
    if dtype in SIXTEEN_BIT:
        return x
    return x.view(x.shape[0], x.shape[1], heads, head_dim).transpose(1, 2)


def run_case(torch, case, backend, pass_name, iterations, warmup):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    dtype, batch, heads, length, head_dim, causal, _ = case
    backward = pass_name == "forward_backward"
    q, k, v = operands(torch, dtype, batch, heads, length, head_dim, backward)
    grad = torch.randn((batch, heads, length, head_dim), device="cuda", dtype=getattr(torch, dtype))

    def step():
        out = F.scaled_dot_product_attention(as_heads(q, heads, head_dim, dtype), as_heads(k, heads, head_dim, dtype),
                                             as_heads(v, heads, head_dim, dtype), is_causal=causal)
        if backward:
            out.backward(grad)
            for t in (q, k, v):
                t.grad = None

    if backend == "flash":
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            ms = measure(torch, step, iterations, warmup)
    else:
        ms = measure(torch, step, iterations, warmup)
    return ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where the JSON goes")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_attention.py: no CUDA device")
    results = []
    for case in attention_cases():
        dtype, batch, heads, length, head_dim, causal, backends = case
        for backend in backends:
            for pass_name in PASSES:
                entry = {"dtype": dtype, "batch": batch, "heads": heads, "length": length, "head_dim": head_dim,
                         "causal": causal, "pass": pass_name, "backend": backend}
                try:
                    ms = run_case(torch, case, backend, pass_name, args.iterations, args.warmup)
                    entry["median_ms"] = ms
                    entry["tflops"] = attention_flops(batch, heads, length, head_dim, causal, pass_name) / ms / 1e9
                except RuntimeError as error:  # a backend that cannot take the case says so
                    entry["error"] = str(error).splitlines()[0] if str(error) else type(error).__name__
                results.append(entry)
                print(json.dumps(entry), flush=True)
                # Written after every case: a stage cut off by its time limit keeps what it measured.
                with open(args.out, "w", encoding="utf-8") as f:
                    json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                               "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
