"""ember against PyTorch on the same training steps, the same machine, in one run.

    python3 benchmarks/side_by_side/side_by_side.py              # CPU: table, sweep, RESULTS.md
    python3 benchmarks/side_by_side/side_by_side.py --quick      # fewer rounds, no sweep, no file
    python3 benchmarks/side_by_side/side_by_side.py --device cuda   # GPU: batch 32 and 128, RESULTS-cuda.md
    python3 benchmarks/side_by_side/side_by_side.py --device cuda --precision bf16   # autocast: RESULTS-cuda-bf16.md

For each reference workload it first finds PyTorch's best thread setting, then runs ember's
train_step and PyTorch's torch_workloads.py alternately, several rounds, each in a fresh
process (so each has its own peak memory), and takes the median step time over all rounds.
A profiled ember run gives the time and GFLOP/s of the matrix products inside the step, set
beside the machine's product ceiling (cblas_sgemm's, or under --precision bf16 on a CPU with
AVX512-BF16 ember's bf16 gemm's): the best one of the run, and one measured right before and
after each profiled step (this machine's speed drifts by half within minutes). The scaling
sweep times both libraries against sequence length and model width and draws them. Everything
it prints goes into RESULTS.md.

On a GPU the thread search, the product ceiling and the sweep are left out; each workload runs
at batch 32 and 128, without TF32 and with it (--tf32), against PyTorch eager and, without
TF32, PyTorch compiled and compiled with CUDA graphs; ember replays its step as a CUDA graph
(--no-ember-graphs: op by op). The report gives the allocators' peak device memory, the model
FLOP utilisation against the GPU's peak, and ember's cudaMalloc calls, host waits and cuBLAS
calls per warm step.
"""
import argparse
import json
import os

from machine import machine
from measure import compare
from processes import ROOT, results_path, run_json, train_step_has
from report_cpu import report
from report_gpu import report_gpu, write_gpu_report_from
from sweep import sweep, write_sweep
from torch_config import torch_configs

WORKLOADS = ["classifier", "encoder-decoder", "gpt"]
# GPT-2's step is dominated by its 50,257-way output layer: a batch of 16 keeps a CPU step near a
# second, and on a GPU it is the batch GPT-2 small is measured at.
GPT_BATCH = 16


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
    parser.add_argument("--batches", type=int, nargs="+", help="batch sizes (default: 32 on the CPU, 32 and 128 on a GPU; 16 for gpt)")
    parser.add_argument("--tf32", choices=["off", "on", "both"], default="both",
                        help="on a GPU: float32 products without TF32, with TF32 tensor cores (both libraries), or both")
    parser.add_argument("--torch-modes", nargs="*", default=["compile", "compile-graphs"],
                        help="PyTorch's compiled modes also timed on a GPU, without TF32")
    parser.add_argument("--no-ember-graphs", dest="ember_graphs", action="store_false",
                        help="on a GPU, time ember's step op by op instead of replayed as a CUDA graph")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                        help="both libraries: float32, or the forward pass and loss under autocast to bfloat16 "
                             "or float16 (float16 with loss scaling; ember then replays no CUDA graph)")
    parser.add_argument("--peak-tflops", type=float, help="the GPU's peak for MFU, if its name is not known")
    parser.add_argument("--save", metavar="JSON", help="on a GPU: also write the measurements to this file")
    parser.add_argument("--report-from", metavar="JSON", nargs="+",
                        help="on a GPU: write RESULTS-cuda.md from files saved by earlier runs (--save), measuring "
                             "nothing: a GPU machine that allows 10 minutes a command runs each TF32 setting apart")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.no_sweep = 1, True
    on_gpu = args.device != "cpu"
    default_batches = [32, 128] if on_gpu else [32]

    def batches_for(workload):
        return args.batches or ([GPT_BATCH] if workload == "gpt" else default_batches)

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
            summaries += [compare(args, workload, batch) for workload in args.workloads
                          for batch in batches_for(workload)]
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"info": info, "ember_graphs": args.ember_graphs, "summaries": summaries}, f)
        text = report_gpu(args, info, summaries)
        print(text)
        if not args.quick:
            with open(results_path(args, f"RESULTS-{args.device.split(':')[0]}"), "w") as f:
                f.write(text + "\n")
        return
    # The ceiling is measured before and after each workload and after the sweep, and the best
    # is kept: one measurement taken while a neighbour slowed the machine would make the
    # step's matmuls look more efficient than they are.
    measurements = []

    def measure_ceiling():
        measurements.append(run_json([os.path.join(args.build, "benchmarks", "train_step"), "--sgemm-ceiling",
                                      "--precision", args.precision]))
        print(f"product ceiling ({measurements[-1]['product']}): {measurements[-1]['sgemm_gflops']:.0f} GFLOP/s",
              flush=True)

    measure_ceiling()
    summaries = []
    for workload in args.workloads:
        for batch in batches_for(workload):
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
        with open(results_path(args, "RESULTS"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
