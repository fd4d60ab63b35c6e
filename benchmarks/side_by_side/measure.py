"""The measurement of one workload at one batch size: rounds of fresh ember and PyTorch processes
(a round the hypervisor slowed is run again), a profiled ember run, and on a GPU PyTorch's
compiled modes."""
import json
import subprocess
from statistics import median

from flops import step_matmul_flops
from machine import cpu_times, steal_share
from processes import ember_command, run_json, torch_command, workload_sizes
from torch_config import best_torch_config, config_name, torch_env


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
    sizes = workload_sizes(args, workload)
    flops = step_matmul_flops(workload, batch, sizes.get("seq_len", 0), sizes.get("d_model", 256), 0,
                              sizes.get("layers", 0))
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
    summary["precision"] = args.precision
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
