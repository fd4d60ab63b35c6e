"""The GPU report, RESULTS-cuda.md: step times against PyTorch eager and compiled, with and
without TF32, MFU, where ember's step goes, the warm-step checks and the bars; written from a
run's measurements or from runs saved earlier (--save, --report-from)."""
import json

from flops import gpu_peak_tflops
from processes import results_path
from report_common import precision_line, profile_section, verdict


# The GPU bars, as ms/step PyTorch measured on an H100 (float32 without TF32, PyTorch 2.11),
# for reference beside this run's own PyTorch figures, which the verdicts use.
H100_COMPILED_GRAPHS_MS = {("classifier", 32): 4.9, ("classifier", 128): 12.6,
                           ("encoder-decoder", 32): 10.2, ("encoder-decoder", 128): 21.8}


def gpu_bars(s):
    """The bars of one workload and batch: [(text, met)]."""
    ember_ms = s["ember"]["median_ms"]
    eager_ms = s["pytorch"]["median_ms"]
    speedup = eager_ms / ember_ms
    bars = []
    if s["allow_tf32"]:
        bars.append((f"{speedup:.2f}x PyTorch eager with TF32 (bar 2x)", speedup >= 2.0))
    else:
        graphs = s.get("torch_modes", {}).get("compile-graphs", {}).get("median_ms")
        measured = [ms for ms in (eager_ms, graphs) if ms]
        best = min(measured)
        if s["batch"] <= 32:
            bars.append((f"{speedup:.2f}x PyTorch eager (bar 2x)", speedup >= 2.0))
        reference = H100_COMPILED_GRAPHS_MS.get((s["workload"], s["batch"]))
        bars.append((f"{ember_ms:.2f} ms against PyTorch's best here, {best:.2f} ms"
                     + (f" (H100 reference: compiled with CUDA graphs {reference} ms)" if reference else ""),
                     ember_ms <= best))
    r = s["ember"]
    bars.append((f"peak device memory {r['peak_device_mb']:.0f} MB against {s['pytorch']['peak_device_mb']:.0f} MB",
                 r["peak_device_mb"] <= s["pytorch"]["peak_device_mb"]))
    quiet = r.get("cuda_malloc_per_step", 1) == 0 and r.get("host_waits_per_step", 2) <= 1
    bars.append(("no cudaMalloc and no host wait but the loss's in a warm step", quiet))
    return bars


def report_gpu(args, info, summaries):
    lines = []
    say = lines.append
    gpu = summaries[0]["pytorch"].get("gpu", "unknown GPU")
    say("# Benchmark results on the GPU")
    say("")
    say(f"Written by `python3 benchmarks/side_by_side/side_by_side.py --device {args.device}"
        f"{f' --tf32 {args.tf32}' if args.tf32 != 'both' else ''}` (do not edit by hand).")
    say("")
    say(f"- GPU: {gpu}; host: {info['cpu']}, {info['cores']} cores; {info['os']}")
    say(f"- ember {info['ember_commit']}; PyTorch {info['torch']}; {info['date']}")
    say(f"- each workload and batch: {args.rounds} rounds, each a fresh ember process then a fresh PyTorch (eager) "
        f"process, {args.warmup} warm-up and {args.steps} timed steps each; PyTorch compiled "
        f"({', '.join(args.torch_modes)}) one run each, without TF32 only; a step ends when its loss is read back "
        "(item()), so the time is the GPU's")
    say(f"- ember's steps {'replayed as CUDA graphs (--cuda-graphs)' if args.ember_graphs else 'run op by op'}"
        f"{' (not in fp16: the loss scaler decides on the host whether to step)' if args.precision == 'fp16' else ''}")
    say(precision_line(args))
    say("")
    for allow_tf32 in sorted({s["allow_tf32"] for s in summaries}):
        group = [s for s in summaries if s["allow_tf32"] == allow_tf32]
        args.allow_tf32 = allow_tf32
        peak = gpu_peak_tflops(args, gpu)
        precision = "TF32 tensor cores allowed (both libraries)" if allow_tf32 else "float32 without TF32 (both libraries)"
        say(f"## Training step (forward + loss + backward + AdamW), {precision}")
        say("")
        say(f"MFU against {f'{peak:.1f} TFLOP/s' if peak else 'an unknown peak (pass --peak-tflops)'}.")
        say("")
        say("| workload | batch | ember ms/step (min-max) | MFU | PyTorch eager | compiled | compiled + CUDA graphs "
            "| ember vs eager | peak MB ember / PyTorch |")
        say("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s in group:
            e, t = s["ember"], s["pytorch"]
            mfu = f"{100 * e['gflops'] / 1e3 / peak:.1f}%" if peak else "-"
            modes = s.get("torch_modes", {})

            def mode_ms(mode):
                m = modes.get(mode)
                if m is None:
                    return "-"
                return f"{m['median_ms']:.2f}" if "median_ms" in m else "failed"
            say(f"| {s['workload']} | {s['batch']} | {e['median_ms']:.2f} ({e['min_ms']:.2f}-{e['max_ms']:.2f}) | "
                f"{mfu} | {t['median_ms']:.2f} | {mode_ms('compile')} | {mode_ms('compile-graphs')} | "
                f"{t['median_ms'] / e['median_ms']:.2f}x | {e['peak_device_mb']:.0f} / {t['peak_device_mb']:.0f} |")
        say("")
        for s in group:
            errors = {mode: m["error"] for mode, m in s.get("torch_modes", {}).items() if "error" in m}
            for mode, error in errors.items():
                say(f"- PyTorch {mode} failed on {s['workload']} batch {s['batch']}: `{error}`")
                say("")
        say("MFU: the step's matrix-product FLOPs (counted from the shapes) per second, over the GPU's peak. "
            "Peak device memory: ember's caching allocator peak and PyTorch's torch.cuda.max_memory_allocated(), "
            "both the most held by live tensors at once.")
        say("")
    say("## Where ember's step goes (without TF32, op by op)")
    say("")
    say("While profiling, every GPU kernel is waited for before and after it runs, so the times are the GPU's "
        "but a profiled step is slower than the steps timed above, and it is not replayed as a graph.")
    say("")
    args.allow_tf32 = False
    peak = gpu_peak_tflops(args, gpu)
    for s in (s for s in summaries if not s["allow_tf32"]):
        matmul = profile_section(say, s, args.steps, f", batch {s['batch']}")
        if matmul and peak:
            rate = matmul["gflop"] / (matmul["ms"] / 1e3) / 1e3
            say(f"matmul inside the step: {matmul['gflop']:.1f} GFLOP in {matmul['ms']:.2f} ms = {rate:.1f} TFLOP/s, "
                f"{100 * rate / peak:.0f}% of the GPU's peak.")
            say("")
    say("## Warm-step checks (ember)")
    say("")
    say("| workload | batch | TF32 | cudaMalloc per step | host waits per step | cuBLAS calls per step "
        "(timed / op by op) |")
    say("|---|---:|---|---:|---:|---:|")
    for s in summaries:
        r = s["ember"]
        op_by_op = s.get("cublas_calls_op_by_op")
        say(f"| {s['workload']} | {s['batch']} | {'on' if s['allow_tf32'] else 'off'} | "
            f"{r.get('cuda_malloc_per_step', float('nan')):g} | {r.get('host_waits_per_step', float('nan')):g} | "
            f"{r.get('cublas_calls_per_step', float('nan')):g} / {op_by_op if op_by_op is not None else '-'} |")
    say("")
    say("Counted by the caching allocator, `ember::cuda::host_synchronizations()` and `ember::cuda::cublas_calls()`. "
        "One wait per step is expected: the item() that reads the loss. A replayed graph makes no cuBLAS call from "
        "the host (its products are recorded in the graph), so the op-by-op count, from the profiled run, is the "
        "step's number of products; it must not grow with the batch.")
    say("")
    say("## Bars (GPU)")
    say("")
    for s in summaries:
        bars = "; ".join(f"{text}: {verdict(ok)}" for text, ok in gpu_bars(s))
        say(f"- {s['workload']}, batch {s['batch']}, TF32 {'on' if s['allow_tf32'] else 'off'}: {bars}")
    say("")
    return "\n".join(lines)


def write_gpu_report_from(args):
    """RESULTS-cuda.md from the measurements of earlier runs (--save), in the order given."""
    runs = []
    for path in args.report_from:
        with open(path) as f:
            runs.append(json.load(f))
    summaries = [s for run in runs for s in run["summaries"]]
    args.device = args.device if args.device != "cpu" else "cuda"
    args.ember_graphs = all(run["ember_graphs"] for run in runs)
    settings = {s["allow_tf32"] for s in summaries}
    args.tf32 = "both" if len(settings) == 2 else ("on" if True in settings else "off")
    args.precision = summaries[0].get("precision", "fp32")
    text = report_gpu(args, runs[0]["info"], summaries)
    print(text)
    with open(results_path(args, f"RESULTS-{args.device.split(':')[0]}"), "w") as f:
        f.write(text + "\n")
