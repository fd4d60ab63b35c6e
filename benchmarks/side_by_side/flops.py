"""Matrix-product FLOPs of one training step, counted from the shapes (2mnk per product; the
backward pass does two products for each forward one; both libraries do these products), and the
GPUs' peak rates they are set against."""


def linear_flops(tokens, d_in, d_out):
    return 2 * tokens * d_in * d_out


def attention_flops(batch, q_len, k_len, d_model):
    return 2 * 2 * batch * q_len * k_len * d_model  # Q K^T and weights @ V


def step_matmul_flops(workload, batch, seq_len, d_model, vocab, layers=0):
    d_ff = 4 * d_model
    if workload == "gpt":
        # Attention is counted whole, as for the other workloads, though half of it is masked.
        seq_len, vocab, layers = seq_len or 128, vocab or 50257, layers or 4
        tokens = batch * seq_len
        block = (linear_flops(tokens, d_model, 4 * d_model) + linear_flops(tokens, d_model, d_ff)
                 + linear_flops(tokens, d_ff, d_model) + attention_flops(batch, seq_len, seq_len, d_model))
        forward = layers * block + linear_flops(tokens, d_model, vocab)
    elif workload == "classifier":
        seq_len, tokens = seq_len or 128, batch * (seq_len or 128)
        layer = (linear_flops(tokens, d_model, 4 * d_model) + linear_flops(tokens, d_model, d_ff)
                 + linear_flops(tokens, d_ff, d_model) + attention_flops(batch, seq_len, seq_len, d_model))
        forward = 4 * layer + linear_flops(batch, d_model, 4)
    else:
        seq_len = seq_len or 64
        vocab = vocab or 8000
        tokens = batch * seq_len
        feed_forward = linear_flops(tokens, d_model, d_ff) + linear_flops(tokens, d_ff, d_model)
        self_attention = linear_flops(tokens, d_model, 4 * d_model) + attention_flops(batch, seq_len, seq_len, d_model)
        cross_attention = (linear_flops(tokens, d_model, 2 * d_model) + linear_flops(tokens, d_model, 2 * d_model)
                           + attention_flops(batch, seq_len, seq_len, d_model))
        forward = (3 * (self_attention + feed_forward) + 3 * (self_attention + cross_attention + feed_forward)
                   + linear_flops(tokens, d_model, vocab))
    return 3 * forward


# Dense peak throughput of the GPUs these benchmarks run on, in TFLOP/s (NVIDIA's datasheets:
# the FP32 CUDA-core rate, and TF32 tensor cores without sparsity), for the model FLOP
# utilisation. The first name found in the GPU's name is used; --peak-tflops overrides.
GPU_PEAK_TFLOPS = [("H100 PCIe", {"fp32": 51.2, "tf32": 378.0}),
                   ("H100", {"fp32": 66.9, "tf32": 494.7}),
                   ("H200", {"fp32": 66.9, "tf32": 494.7})]


def gpu_peak_tflops(args, gpu_name):
    if args.peak_tflops:
        return args.peak_tflops
    for name, peaks in GPU_PEAK_TFLOPS:
        if name in gpu_name:
            return peaks["tf32" if args.allow_tf32 else "fp32"]
    return None
