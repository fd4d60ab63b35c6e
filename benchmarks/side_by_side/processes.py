"""The two halves of the side-by-side benchmark as processes: ember's train_step and PyTorch's
torch_workloads.py, each started fresh for every run (so each has its own peak memory), each
printing one JSON object."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def results_path(args, name):
    """benchmarks/RESULTS.md and RESULTS-cuda.md hold float32 runs; another precision's go beside
    them (RESULTS-bf16.md, RESULTS-cuda-fp16.md)."""
    suffix = "" if args.precision == "fp32" else f"-{args.precision}"
    return os.path.join(HERE, "..", f"{name}{suffix}.md")


def run_json(command, env=None):
    """Runs a benchmark process and returns the JSON object it prints last."""
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def device_flags(args):
    """The flags both halves take alike: the device, TF32, and the precision (autocast)."""
    return (["--device", args.device] + (["--allow-tf32"] if args.allow_tf32 else [])
            + (["--precision", args.precision] if args.precision != "fp32" else []))


def train_step_has(args, flag):
    """Whether ember's train_step takes `flag` (its --help lists it)."""
    done = subprocess.run([os.path.join(args.build, "benchmarks", "train_step"), "--help"], capture_output=True,
                          text=True)
    return flag in done.stdout


def workload_sizes(args, workload):
    """The sizes a workload runs at besides the batch, as flags both binaries take: their own
    defaults, except GPT-2 on a GPU, which runs at GPT-2 small's (the 124M preset: 12 blocks of
    width 768, 12 heads, context 1024)."""
    if workload == "gpt" and args.device != "cpu":
        return {"seq_len": 1024, "d_model": 768, "heads": 12, "layers": 12}
    return {}


def size_flags(args, workload):
    return [item for key, value in workload_sizes(args, workload).items()
            for item in ("--" + key.replace("_", "-"), str(value))]


def ember_command(args, workload, extra=(), graphs=True):
    # On a GPU ember replays its step as a CUDA graph when its build can: as PyTorch's compiled
    # mode with CUDA graphs does, and as a user training on fixed shapes would. Not while
    # profiling: a replayed graph has no per-op times.
    graphs = ["--cuda-graphs"] if graphs and args.device != "cpu" and args.ember_graphs else []
    return [os.path.join(args.build, "benchmarks", "train_step"), "--workload", workload,
            *device_flags(args), *size_flags(args, workload), *graphs, *map(str, extra)]


def torch_command(args, workload, config, extra=()):
    threads, _ = config
    return [args.python, os.path.join(HERE, "torch_workloads.py"), "--workload", workload,
            *device_flags(args), *size_flags(args, workload), "--threads", str(threads), *map(str, extra)]
