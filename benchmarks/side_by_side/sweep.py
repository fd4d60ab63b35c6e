"""The scaling sweep: the classifier's step time against sequence length and d_model in both
libraries, written to results/sweep.csv and drawn by plot_sweep."""
import os
import subprocess
from statistics import median

from processes import HERE, ember_command, run_json, torch_command
from torch_config import torch_env


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


def write_sweep(rows, build):
    directory = os.path.join(HERE, "..", "results")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "sweep.csv")
    with open(path, "w") as f:
        f.write("axis,value,ember_ms,pytorch_ms\n")
        for axis, value, ember_ms, torch_ms in rows:
            f.write(f"{axis},{value},{ember_ms:.3f},{torch_ms:.3f}\n")
    subprocess.run([os.path.join(build, "benchmarks", "plot_sweep"), path], check=True)
