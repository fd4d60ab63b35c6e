"""PyTorch at its best on the CPU: the torch thread counts and OpenBLAS builds to try, and the short
timed runs that pick the fastest of them."""
import os
from statistics import median

from processes import run_json, torch_command


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
