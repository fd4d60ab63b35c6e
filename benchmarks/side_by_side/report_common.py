"""What the CPU and GPU reports share: a bar's verdict and the table of ember's profiled step."""


def precision_line(args):
    """What the step's arithmetic was, in both libraries (--precision)."""
    if args.precision == "fp32":
        return "- precision: float32 throughout (--precision fp32)"
    dtype = {"bf16": "bfloat16", "fp16": "float16 with loss scaling"}[args.precision]
    return (f"- precision: forward pass and loss under autocast to {dtype} in both libraries (--precision "
            f"{args.precision}); parameters, gradients and AdamW in float32")


def verdict(ok):
    return "met" if ok else "**not met**"


def profile_section(say, s, steps, title_suffix):
    """The profiled step's per-op table; returns the matmul row, if any."""
    step_ms = s["profiled_step_ms"]
    kernels_ms = sum(op["ms"] for op in s["profile"])
    say(f"### {s['workload']}{title_suffix}")
    say("")
    say(f"Each op's kernel time per step while profiling ({steps} steps, median step {step_ms:.1f} ms):")
    say("")
    say("| op | calls/step | ms/step | share of step |")
    say("|---|---:|---:|---:|")
    for op in s["profile"][:12]:
        say(f"| {op['op']} | {op['calls']} | {op['ms']:.2f} | {100 * op['ms'] / step_ms:.0f}% |")
    outside = max(0.0, step_ms - kernels_ms)
    say(f"| (outside the kernels: autograd bookkeeping, allocation, shape checks) | | {outside:.2f} | "
        f"{100 * outside / step_ms:.0f}% |")
    say("")
    return next((op for op in s["profile"] if op["op"] == "matmul"), None)
