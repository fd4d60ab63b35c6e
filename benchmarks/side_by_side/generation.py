"""ember against PyTorch on GPT-2 generation with a KV cache, the same weights, in one run.

    python3 benchmarks/side_by_side/generation.py                      # 124M, 64 tokens, 1 and 2 threads
    python3 benchmarks/side_by_side/generation.py --threads 2 --rounds 1

ember's generate_tokens writes a random GPT-2 (124M by default) in Hugging Face's layout; then,
for each thread count, ember and PyTorch's torch_generation.py continue the same prompt greedily
from those weights, alternately, several rounds, each in a fresh process. Every token after the
prompt is timed; the table gives the median milliseconds per token over all rounds. Both must
choose the same tokens: greedy decoding of one model is deterministic up to rounding, and a
difference is reported.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile
from statistics import median

from machine import machine
from processes import ROOT, run_json

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="ember's build directory")
    parser.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--n-layer", type=int, default=12)
    parser.add_argument("--n-head", type=int, default=12)
    parser.add_argument("--n-embd", type=int, default=768)
    args = parser.parse_args()
    args.device, args.precision = "cpu", "fp32"
    info = machine(args)
    generate = os.path.join(args.build, "benchmarks", "generate_tokens")
    rng = random.Random(0)
    prompt = ",".join(str(rng.randrange(50257)) for _ in range(args.prompt_tokens))
    with tempfile.TemporaryDirectory() as folder:
        run_quietly([generate, "--save-weights", folder, "--n-layer", args.n_layer, "--n-head", args.n_head,
                             "--n-embd", args.n_embd])
        rows = []
        for threads in args.threads:
            runs = {"ember": [], "pytorch": []}
            for _ in range(args.rounds):
                runs["ember"].append(run_json([generate, "--init-from", folder, "--prompt-ids", prompt,
                                               "--new-tokens", str(args.new_tokens), "--threads", str(threads)]))
                runs["pytorch"].append(run_json([args.python, os.path.join(HERE, "torch_generation.py"),
                                                 "--weights", folder, "--prompt-ids", prompt, "--new-tokens",
                                                 str(args.new_tokens), "--threads", str(threads)]))
            same = all(e["generated"] == t["generated"] for e, t in zip(runs["ember"], runs["pytorch"]))
            ms = {library: median(ms for run in results for ms in run["token_ms"]) for library, results in runs.items()}
            prompt_ms = {library: median(run["prompt_ms"] for run in results) for library, results in runs.items()}
            rss = {library: max(run["peak_rss_mb"] for run in results) for library, results in runs.items()}
            rows.append((threads, ms, prompt_ms, rss, same))
    print(f"GPT-2 generation, {args.n_layer} layers x {args.n_embd} ({args.n_head} heads), greedy, KV cache; "
          f"prompt {args.prompt_tokens} tokens, {args.new_tokens} new; {info.get('cpu', 'cpu')}; "
          f"median of {args.rounds} rounds")
    print("| threads | ember ms/token | PyTorch ms/token | ratio (PyTorch / ember) | prompt ms (ember / PyTorch) "
          "| peak RSS MB (ember / PyTorch) | same tokens |")
    print("|---|---|---|---|---|---|---|")
    for threads, ms, prompt_ms, rss, same in rows:
        print(f"| {threads} | {ms['ember']:.1f} | {ms['pytorch']:.1f} | {ms['pytorch'] / ms['ember']:.2f}x "
              f"| {prompt_ms['ember']:.0f} / {prompt_ms['pytorch']:.0f} | {rss['ember']:.0f} / {rss['pytorch']:.0f} "
              f"| {'yes' if same else 'NO'} |")


def run_quietly(command):
    """Runs a command that prints nothing on success (ember's --save-weights)."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(map(str, command))} failed ({done.returncode}):\n{done.stderr[-2000:]}")


if __name__ == "__main__":
    main()
