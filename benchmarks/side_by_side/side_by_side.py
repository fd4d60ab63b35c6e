"""ember against PyTorch on the same training steps, the same machine, in one run.

    python3 benchmarks/side_by_side/side_by_side.py              # CPU: table, sweep, RESULTS.md
    python3 benchmarks/side_by_side/side_by_side.py --quick      # fewer rounds, no sweep, no file
    python3 benchmarks/side_by_side/side_by_side.py --device cuda   # GPU: batch 32 and 128, RESULTS-cuda.md

For each reference workload it first finds PyTorch's best thread setting, then runs ember's
train_step and PyTorch's torch_workloads.py alternately, several rounds, each in a fresh
process (so each has its own peak memory), and takes the median step time over all rounds.
A profiled ember run gives the time and GFLOP/s of the matrix products inside the step, set
beside the machine's sgemm ceiling: the best one of the run, and one measured right before and
after each profiled step (this machine's speed drifts by half within minutes). The scaling
sweep times both libraries against sequence length and model width and draws them. Everything
it prints goes into RESULTS.md.

On a GPU the thread search, the sgemm ceiling and the sweep are left out; each workload runs
at batch 32 and 128, without TF32 and with it (--tf32), against PyTorch eager and, without
TF32, PyTorch compiled and compiled with CUDA graphs; ember replays its step as a CUDA graph
(--no-ember-graphs: op by op). The report gives the allocators' peak device memory, the model
FLOP utilisation against the GPU's peak, and ember's cudaMalloc calls, host waits and cuBLAS
calls per warm step.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKLOADS = ["classifier", "encoder-decoder"]


def run_json(command, env=None):
    """Runs a benchmark process and returns the JSON object it prints last."""
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def device_flags(args):
    return ["--device", args.device] + (["--allow-tf32"] if args.allow_tf32 else [])


def train_step_has(args, flag):
    """Whether ember's train_step takes `flag` (its --help lists it)."""
    done = subprocess.run([os.path.join(args.build, "benchmarks", "train_step"), "--help"], capture_output=True,
                          text=True)
    return flag in done.stdout


def ember_command(args, workload, extra=(), graphs=True):
    # On a GPU ember replays its step as a CUDA graph when its build can: as PyTorch's compiled
    # mode with CUDA graphs does, and as a user training on fixed shapes would. Not while
    # profiling: a replayed graph has no per-op times.
    graphs = ["--cuda-graphs"] if graphs and args.device != "cpu" and args.ember_graphs else []
    return [os.path.join(args.build, "benchmarks", "train_step"), "--workload", workload,
            *device_flags(args), *graphs, *map(str, extra)]


def torch_command(args, workload, config, extra=()):
    threads, _ = config
    return [args.python, os.path.join(HERE, "torch_workloads.py"), "--workload", workload,
            *device_flags(args), "--threads", str(threads), *map(str, extra)]


# Debian installs OpenBLAS in two builds, each in its own directory; PyTorch loads the one the
# system's alternatives name unless LD_LIBRARY_PATH points at the other. The pthread build
# keeps its own threads whatever torch.set_num_threads says; the OpenMP one follows it.
BLAS_DIRECTORIES = {"pthread": "/usr/lib/x86_64-linux-gnu/openblas-pthread",
                    "openmp": "/usr/lib/x86_64-linux-gnu/openblas-openmp"}


def torch_env(config):
    _, blas = config
    env = dict(os.environ)
    if blas in BLAS_DIRECTORIES:
        env["LD_LIBRARY_PATH"] = BLAS_DIRECTORIES[blas] + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def torch_configs(args):
    """(torch threads, OpenBLAS build) pairs to try: every thread count with every build present."""
    if args.device != "cpu":
        return [(1, "system")]  # on a GPU, CPU threads and BLAS builds do not matter
    builds = [name for name, path in BLAS_DIRECTORIES.items() if os.path.isdir(path)] or ["system"]
    return [(threads, blas) for threads in args.torch_threads for blas in builds]


def config_name(config):
    threads, blas = config
    return f"{threads} thread{'s' if threads > 1 else ''}" + ("" if blas == "system" else f", {blas} OpenBLAS")


def median(values):
    return statistics.median(values)


# --- FLOPs ------------------------------------------------------------------------------------
# Matrix-product FLOPs of one training step, counted from the shapes (2mnk per product; the
# backward pass does two products for each forward one). Both libraries do these products.

def linear_flops(tokens, d_in, d_out):
    return 2 * tokens * d_in * d_out


def attention_flops(batch, q_len, k_len, d_model):
    return 2 * 2 * batch * q_len * k_len * d_model  # Q K^T and weights @ V


def step_matmul_flops(workload, batch, seq_len, d_model, vocab):
    d_ff = 4 * d_model
    if workload == "classifier":
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


# --- the measurements ---------------------------------------------------------------------------

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


def best_torch_config(args, workload, batch):
    """PyTorch at its best: times a few steps in each configuration, returns the fastest."""
    timings = {}
    configs = torch_configs(args)
    if len(configs) == 1:
        return configs[0], {}
    for config in configs:
        result = run_json(torch_command(args, workload, config, ["--batch", batch, "--steps", 4, "--warmup", 2]),
                          torch_env(config))
        timings[config] = median(result["step_ms"])
    best = min(timings, key=timings.get)
    return best, timings


def cpu_times():
    """The machine's CPU time counters (/proc/stat, in clock ticks): user ... steal."""
    try:
        with open("/proc/stat") as f:
            return [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return None


def steal_share(before, after):
    """The share of the CPU time between two cpu_times() that the hypervisor gave to other
    machines: on a shared virtual machine, the part of the slow-downs that no run can control."""
    if before is None or after is None:
        return None
    deltas = [b - a for a, b in zip(before, after)]
    return deltas[7] / sum(deltas) if sum(deltas) > 0 else None


def compare(args, workload, batch):
    times_before = cpu_times()
    config, search = best_torch_config(args, workload, batch)
    if search:
        print(f"{workload}: PyTorch configurations tried (median ms/step): "
              + "; ".join(f"{config_name(c)}: {ms:.0f}" for c, ms in search.items()) + f" -> {config_name(config)}",
              flush=True)
    runs = {"ember": [], "pytorch": []}
    steps = ["--batch", batch, "--steps", args.steps, "--warmup", args.warmup]
    # A round (one run of each library) during which the hypervisor took more than --max-steal of
    # the machine's CPU time is run again, up to --retries times per workload: such a round times
    # the neighbours' load, not the libraries. What was set aside is reported.
    discarded = []
    while len(runs["ember"]) < args.rounds:
        round_before = cpu_times()
        ember_run = run_json(ember_command(args, workload, steps))
        torch_run = run_json(torch_command(args, workload, config, steps), torch_env(config))
        round_steal = steal_share(round_before, cpu_times()) or 0.0
        outcome = "kept"
        if round_steal > args.max_steal and len(discarded) < args.retries:
            discarded.append({"steal": round_steal, "ember_ms": median(ember_run["step_ms"]),
                              "pytorch_ms": median(torch_run["step_ms"])})
            outcome = "set aside, run again"
        else:
            runs["ember"].append(ember_run)
            runs["pytorch"].append(torch_run)
        print(f"  {workload} batch {batch} round {len(runs['ember'])}/{args.rounds}: ember "
              f"{median(ember_run['step_ms']):.1f} ms, PyTorch {median(torch_run['step_ms']):.1f} ms, "
              f"steal {100 * round_steal:.0f}%: {outcome}", flush=True)
    flops = step_matmul_flops(workload, batch, 0, 256, 0)
    summary = {"workload": workload, "batch": batch, "torch_config": config_name(config), "torch_config_key": config,
               "torch_search": {config_name(c): ms for c, ms in search.items()},
               "matmul_gflop_per_step": flops / 1e9}
    profile = run_json(ember_command(args, workload, steps + ["--profile"], graphs=False))
    summary["profile"] = profile["profile"]
    summary["profiled_step_ms"] = profile["profiled_step_ms"]
    summary["matmul_steps"] = profile.get("matmul_steps", [])
    # The profiled run goes op by op, so it counts the cuBLAS calls a step makes from the host.
    summary["cublas_calls_op_by_op"] = profile.get("cublas_calls_per_step")
    for library, results in runs.items():
        all_steps = [ms for result in results for ms in result["step_ms"]]
        ms = median(all_steps)
        summary[library] = {
            "median_ms": ms,
            "min_ms": min(all_steps),
            "max_ms": max(all_steps),
            "steps": len(all_steps),
            "tokens_per_s": results[0]["tokens_per_step"] / (ms / 1e3),
            "peak_rss_mb": max(result["peak_rss_mb"] for result in results),
            "gflops": flops / (ms / 1e3) / 1e9,
            "parameters": results[0]["parameters"],
            "minor_faults_per_step": median([result["minor_faults_per_step"] for result in results]),
            "faults_median": median([f for result in results for f in result["minor_faults_steps"]]),
            "faults_max": max(f for result in results for f in result["minor_faults_steps"]),
            "fresh_cpu_blocks": sum(sum(result.get("fresh_cpu_blocks_steps", [])) for result in results),
            "threads": results[0]["threads"],
            "loss": results[-1]["loss"],
        }
        if args.device != "cpu":
            summary[library]["peak_device_mb"] = max(result["peak_device_mb"] for result in results)
            for key in ("cuda_malloc_per_step", "host_waits_per_step", "gpu"):
                if key in results[0]:
                    summary[library][key] = max(result[key] for result in results) if key != "gpu" else results[0][key]
    summary["steal"] = steal_share(times_before, cpu_times())
    summary["discarded_rounds"] = discarded
    summary["allow_tf32"] = args.allow_tf32
    if args.device != "cpu":
        summary["torch_modes"] = torch_compiled_modes(args, workload, config, steps)
    return summary


def torch_compiled_modes(args, workload, config, steps):
    """PyTorch compiled, and compiled with CUDA graphs: one run each (compiling takes a minute),
    median ms/step and peak device memory, or the error that stopped the mode (no Triton, ...).
    Only without TF32: the TF32 bars are set against eager PyTorch."""
    modes = {}
    if args.allow_tf32:
        return modes
    for mode in args.torch_modes:
        command = torch_command(args, workload, config, list(steps) + ["--mode", mode])
        done = subprocess.run(command, capture_output=True, text=True, env=torch_env(config))
        if done.returncode != 0:
            modes[mode] = {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
            print(f"  PyTorch {mode}: failed: {modes[mode]['error']}", flush=True)
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        modes[mode] = {"median_ms": median(result["step_ms"]), "peak_device_mb": result.get("peak_device_mb")}
        print(f"  PyTorch {mode}: {modes[mode]['median_ms']:.2f} ms", flush=True)
    return modes


def sweep(args, sweep_config):
    """Step time of the classifier against sequence length and against d_model, both libraries
    (PyTorch in the configuration that was fastest on the classifier)."""
    points = [("seq_len", n, ["--seq-len", n]) for n in (64, 128, 256, 512, 1024)]
    points += [("d_model", d, ["--d-model", d]) for d in (128, 256, 512, 1024)]
    rows = []
    for axis, value, flags in points:
        steps = ["--steps", 3, "--warmup", 1]
        ember_ms = median(run_json(ember_command(args, "classifier", flags + steps))["step_ms"])
        torch_ms = median(run_json(torch_command(args, "classifier", sweep_config, flags + steps),
                                   torch_env(sweep_config))["step_ms"])
        rows.append((axis, value, ember_ms, torch_ms))
        print(f"  sweep {axis} {value}: ember {ember_ms:.0f} ms, PyTorch {torch_ms:.0f} ms", flush=True)
    return rows


def machine(args):
    def first_line(path, prefix):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(prefix):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "unknown"

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    memory_kb = int(first_line("/proc/meminfo", "MemTotal").split()[0])
    return {
        "cpu": first_line("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kb / 2**20, 1),
        "os": platform.platform(),
        "torch": torch_version,
        "ember_commit": commit.stdout.strip() + (" (with local changes)" if dirty.stdout.strip() else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": open("/proc/loadavg").read().split()[0],
        "cpu_times_start": cpu_times(),
    }


# --- the report ---------------------------------------------------------------------------------

def verdict(ok):
    return "met" if ok else "**not met**"


def report(args, info, ceiling, summaries, sweep_rows):
    lines = []
    say = lines.append
    say("# Benchmark results")
    say("")
    say("Written by `python3 benchmarks/side_by_side/side_by_side.py` (do not edit by hand).")
    say("")
    say(f"- machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; {info['os']}")
    say(f"- ember {info['ember_commit']}; PyTorch {info['torch']}; {info['date']}; load average before: "
        f"{info['load_before']}")
    say(f"- each workload: {args.rounds} round{'s' if args.rounds > 1 else ''}, each a fresh ember process then a fresh PyTorch process, "
        f"{args.warmup} warm-up and {args.steps} timed steps each; the median is over all timed steps")
    sizes = ", ".join("n={}: {:.0f}".format(size["n"], size["gflops"]) for size in ceiling["sizes"])
    others = ", ".join(f"{m['sgemm_gflops']:.0f}" for m in ceiling["measurements"])
    say(f"- sgemm ceiling (cblas_sgemm alone, square sizes, best of each): {ceiling['sgemm_gflops']:.0f} GFLOP/s "
        f"({sizes}); the best of {len(ceiling['measurements'])} measurements spread through the run ({others}), "
        "since a shared machine's speed drifts")
    steal = steal_share(info["cpu_times_start"], cpu_times())
    if steal is not None:
        say(f"- CPU time the hypervisor gave to other machines (steal, /proc/stat) while this ran: {100 * steal:.0f}%; "
            "per workload: " + ", ".join(f"{s['workload']} {100 * s['steal']:.0f}%" for s in summaries
                                        if s.get("steal") is not None))
    set_aside = [(s["workload"], r) for s in summaries for r in s.get("discarded_rounds", [])]
    say(f"- rounds during which steal exceeded {100 * args.max_steal:.0f}% were run again (at most {args.retries} per "
        "workload); set aside: " + ("; ".join(f"{w} (steal {100 * r['steal']:.0f}%: ember {r['ember_ms']:.0f} ms, "
                                             f"PyTorch {r['pytorch_ms']:.0f} ms)" for w, r in set_aside)
                                   if set_aside else "none"))
    say("")
    say("## Training step (forward + loss + backward + AdamW)")
    say("")
    say("| workload | library | parameters | median ms/step (min-max) | tokens/s | matmul GFLOP/s | peak RSS MB | ember speed-up |")
    say("|---|---|---:|---:|---:|---:|---:|---:|")
    for s in summaries:
        speedup = s["pytorch"]["median_ms"] / s["ember"]["median_ms"]
        for library in ("ember", "pytorch"):
            r = s[library]
            name = "ember" if library == "ember" else f"PyTorch ({s['torch_config']})"
            say(f"| {s['workload']} | {name} | {r['parameters']:,} | {r['median_ms']:.1f} ({r['min_ms']:.0f}-{r['max_ms']:.0f}) | "
                f"{r['tokens_per_s']:,.0f} | {r['gflops']:.1f} | {r['peak_rss_mb']:.0f} | "
                f"{f'{speedup:.2f}x' if library == 'ember' else ''} |")
    say("")
    say("matmul GFLOP/s: the step's matrix-product FLOPs (counted from the shapes: "
        + ", ".join(f"{s['workload']} {s['matmul_gflop_per_step']:.1f} GFLOP" for s in summaries)
        + ") divided by the whole step's time.")
    say("")
    say("PyTorch's configurations tried (`torch.set_num_threads` and the OpenBLAS build it loads; median ms/step "
        "of a short run, the fastest is used above):")
    say("")
    for s in summaries:
        say(f"- {s['workload']}: " + "; ".join(f"{name}: {ms:.0f}" for name, ms in s["torch_search"].items()))
    say("")
    say("## Where ember's step goes")
    say("")
    for s in summaries:
        matmul = profile_section(say, s, args.steps, "")
        if matmul:
            rate = matmul["gflop"] / (matmul["ms"] / 1e3)
            # The attention kernels' products run inside them, beside their softmax, mask and
            # dropout: counted with matmul, their time makes the rate over all products a lower bound.
            fused = [op for op in s["profile"] if op["op"] in ("attention", "attention_backward")]
            products_gflop = matmul["gflop"] + sum(op["gflop"] for op in fused)
            products_ms = matmul["ms"] + sum(op["ms"] for op in fused)
            products_rate = products_gflop / (products_ms / 1e3)
            s["matmul_of_best"] = products_rate / ceiling["sgemm_gflops"]
            say(f"matmul inside the step: {matmul['gflop']:.1f} GFLOP in {matmul['ms']:.1f} ms = {rate:.0f} GFLOP/s.")
            if fused:
                say(f"With the products inside the fused attention kernels ({products_gflop - matmul['gflop']:.1f} GFLOP; "
                    "their time includes the softmax, mask and dropout they run beside them, so this is a lower "
                    f"bound): {products_gflop:.1f} GFLOP in {products_ms:.1f} ms = {products_rate:.0f} GFLOP/s.")
            say(f"All products: {100 * s['matmul_of_best']:.0f}% of the run's best sgemm ceiling "
                f"({ceiling['sgemm_gflops']:.0f} GFLOP/s).")
            # Each step against the faster of the two ceilings around it.
            steps = s["matmul_steps"]
            ceilings = [max(step["ceiling_before"], step["ceiling_after"]) for step in steps]
            step_rates = [step.get("products_gflops", step["matmul_gflops"]) for step in steps]
            paired = [r / c for r, c in zip(step_rates, ceilings)]
            if paired:
                s["matmul_efficiency"] = statistics.median(paired)
                s["matmul_only_efficiency"] = statistics.median(
                    step["matmul_gflops"] / c for step, c in zip(steps, ceilings))
                say("")
                say("Each profiled step ran between two short sgemm ceilings (n=1024 and 2048, about a quarter of a "
                    "second each), so that its product rate is set beside the machine's at the same moment; the "
                    "faster of the two ceilings counts. Step by step, GFLOP/s of all products against that ceiling: "
                    + ", ".join(f"{r:.0f}/{c:.0f}" for r, c in zip(step_rates, ceilings))
                    + f"; median {100 * s['matmul_efficiency']:.0f}% (matmul alone: "
                    f"{100 * s['matmul_only_efficiency']:.0f}%).")
            else:
                s["matmul_efficiency"] = s["matmul_of_best"]
            if s["matmul_efficiency"] > 1.0:
                say("That is above the ceiling, so the ceiling was measured while the machine ran slower than during "
                    "the step: this run cannot tell whether the bar is met.")
            say("")
    say("## Warm-step checks")
    say("")
    say("| workload | library | minor page faults in a step: median (most, mean) | threads in the process |")
    say("|---|---|---:|---:|")
    for s in summaries:
        for library in ("ember", "pytorch"):
            r = s[library]
            say(f"| {s['workload']} | {library} | {r['faults_median']:.0f} ({r['faults_max']:.0f}, "
                f"{r['minor_faults_per_step']:.1f}) | {r['threads']} |")
    say("")
    say("A step that takes memory from the OS faults its pages in, so page faults per warm step count "
        "fresh memory (a 4 KiB page each). Each timed step is counted on its own (getrusage before and after "
        "it): the median is the steady state, the most is a step's worst, and the mean is over all of them. "
        "The thread count is the process's, from /proc/self/status, "
        f"against {info['cores']} cores.")
    say("")
    say("ember's CPU allocator counts the blocks of 16 KiB and more that its cache could not serve "
        "(`ember::cpu_allocator_stats()`): "
        + "; ".join(f"{s['workload']}: {s['ember']['fresh_cpu_blocks']} in {s['ember']['steps']} timed steps"
                    for s in summaries)
        + ". `perf record -e page-faults` puts the faults left in ember's warm steps in malloc's heap: "
        "mostly the job table that OpenBLAS's threaded cblas_sgemm allocates on every call, whose pages the heap "
        "sometimes has to map in again.")
    say("")
    if sweep_rows:
        say("## Scaling (classifier, batch 32)")
        say("")
        say("| varied | value | ember ms/step | PyTorch ms/step | ember speed-up |")
        say("|---|---:|---:|---:|---:|")
        for axis, value, ember_ms, torch_ms in sweep_rows:
            say(f"| {axis} | {value} | {ember_ms:.0f} | {torch_ms:.0f} | {torch_ms / ember_ms:.2f}x |")
        say("")
        say("Plots: [step time against sequence length](results/sweep_seq_len.svg), "
            "[step time against d_model](results/sweep_d_model.svg); data: [results/sweep.csv](results/sweep.csv).")
        say("")
    say("## Bars (CPU)")
    say("")
    for s in summaries:
        speedup = s["pytorch"]["median_ms"] / s["ember"]["median_ms"]
        efficiency = s.get("matmul_efficiency", 0)
        matmul_verdict = "**not established** (above the measured ceiling)" if efficiency > 1.0 else verdict(efficiency >= 0.8)
        say(f"- {s['workload']}: ember {speedup:.2f}x PyTorch's best (bar 1.5x, aim 1.8x): {verdict(speedup >= 1.5)}; "
            f"matrix products at {100 * efficiency:.0f}% of the sgemm ceiling measured beside each step "
            f"(matmul alone {100 * s.get('matmul_only_efficiency', 0):.0f}%), "
            f"{100 * s.get('matmul_of_best', 0):.0f}% of the run's best (bar 80%): "
            f"{matmul_verdict}; peak RSS {s['ember']['peak_rss_mb']:.0f} MB against "
            f"{s['pytorch']['peak_rss_mb']:.0f} MB: {verdict(s['ember']['peak_rss_mb'] <= s['pytorch']['peak_rss_mb'])}")
    say("")
    return "\n".join(lines)


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
    say(f"- ember's steps {'replayed as CUDA graphs (--cuda-graphs)' if args.ember_graphs else 'run op by op'}")
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


def write_sweep(rows, build):
    directory = os.path.join(HERE, "..", "results")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "sweep.csv")
    with open(path, "w") as f:
        f.write("axis,value,ember_ms,pytorch_ms\n")
        for axis, value, ember_ms, torch_ms in rows:
            f.write(f"{axis},{value},{ember_ms:.3f},{torch_ms:.3f}\n")
    subprocess.run([os.path.join(build, "benchmarks", "plot_sweep"), path], check=True)


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
    text = report_gpu(args, runs[0]["info"], summaries)
    print(text)
    with open(os.path.join(HERE, "..", f"RESULTS-{args.device.split(':')[0]}.md"), "w") as f:
        f.write(text + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="ember's build directory")
    parser.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-steal", type=float, default=0.10,
                        help="run a round again when the hypervisor took more than this share of CPU time during it")
    parser.add_argument("--retries", type=int, default=3, help="rounds run again at most, per workload")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--torch-threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--workloads", nargs="+", default=WORKLOADS, choices=WORKLOADS)
    parser.add_argument("--quick", action="store_true", help="1 round, no sweep, RESULTS.md left alone")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--batches", type=int, nargs="+", help="batch sizes (default: 32 on the CPU, 32 and 128 on a GPU)")
    parser.add_argument("--tf32", choices=["off", "on", "both"], default="both",
                        help="on a GPU: float32 products without TF32, with TF32 tensor cores (both libraries), or both")
    parser.add_argument("--torch-modes", nargs="*", default=["compile", "compile-graphs"],
                        help="PyTorch's compiled modes also timed on a GPU, without TF32")
    parser.add_argument("--no-ember-graphs", dest="ember_graphs", action="store_false",
                        help="on a GPU, time ember's step op by op instead of replayed as a CUDA graph")
    parser.add_argument("--peak-tflops", type=float, help="the GPU's peak for MFU, if its name is not known")
    parser.add_argument("--save", metavar="JSON", help="on a GPU: also write the measurements to this file")
    parser.add_argument("--report-from", metavar="JSON", nargs="+",
                        help="on a GPU: write RESULTS-cuda.md from files saved by earlier runs (--save), measuring "
                             "nothing: a GPU machine that allows 10 minutes a command runs each TF32 setting apart")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.no_sweep = 1, True
    on_gpu = args.device != "cpu"
    batches = args.batches or ([32, 128] if on_gpu else [32])

    args.allow_tf32 = False
    if args.report_from:
        write_gpu_report_from(args)
        return
    if on_gpu and args.ember_graphs and not train_step_has(args, "--cuda-graphs"):
        print("train_step has no --cuda-graphs: ember's steps run op by op", flush=True)
        args.ember_graphs = False
    info = machine(args)
    if on_gpu:
        summaries = []
        for allow_tf32 in {"off": [False], "on": [True], "both": [False, True]}[args.tf32]:
            args.allow_tf32 = allow_tf32
            summaries += [compare(args, workload, batch) for workload in args.workloads for batch in batches]
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"info": info, "ember_graphs": args.ember_graphs, "summaries": summaries}, f)
        text = report_gpu(args, info, summaries)
        print(text)
        if not args.quick:
            with open(os.path.join(HERE, "..", f"RESULTS-{args.device.split(':')[0]}.md"), "w") as f:
                f.write(text + "\n")
        return
    # The ceiling is measured before and after each workload and after the sweep, and the best
    # is kept: one measurement taken while a neighbour slowed the machine would make the
    # step's matmuls look more efficient than they are.
    measurements = []

    def measure_ceiling():
        measurements.append(run_json([os.path.join(args.build, "benchmarks", "train_step"), "--sgemm-ceiling"]))
        print(f"sgemm ceiling: {measurements[-1]['sgemm_gflops']:.0f} GFLOP/s", flush=True)

    measure_ceiling()
    summaries = []
    for workload in args.workloads:
        for batch in batches:
            summaries.append(compare(args, workload, batch))
        measure_ceiling()
    classifier = next((s for s in summaries if s["workload"] == "classifier"), None)
    sweep_config = classifier["torch_config_key"] if classifier else torch_configs(args)[0]
    sweep_rows = [] if args.no_sweep else sweep(args, sweep_config)
    if sweep_rows:
        measure_ceiling()
    ceiling = dict(max(measurements, key=lambda m: m["sgemm_gflops"]), measurements=measurements)
    text = report(args, info, ceiling, summaries, sweep_rows)
    print(text)
    if not args.quick:
        if sweep_rows:
            write_sweep(sweep_rows, args.build)
        with open(os.path.join(HERE, "..", "RESULTS.md"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
