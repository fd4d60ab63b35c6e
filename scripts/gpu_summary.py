"""gpu-summary.md: one page from what `scripts/gpu_session.sh check` left in its output folder.

    python3 scripts/gpu_summary.py OUT_DIR

It reads, each only if present (a stage that timed out or was skipped leaves some out):
    commit.txt              the commit and the id of the working tree the check ran on
    check-stages.tsv        stage, status, seconds, note: one line per stage, in the order run
    suites.log              ctest's output over the CUDA suites
    sanitizer-status.tsv    tool, suite, status, seconds, doctest option: one line per compute-sanitizer job
    harness-*.json          the GPU harness's measurements (side_by_side.py --save)
    bench-attention.json    bench_cuda_attention's results (Google Benchmark's JSON)
    sdpa-attention.json     PyTorch SDPA at the same cases (benchmarks/side_by_side/torch_attention.py)
    cpu-harness.log         the CPU harness's output (its per-round lines)
and writes OUT_DIR/gpu-summary.md, also printing it. Plain Python, no third-party module.
"""
import glob
import json
import os
import re
import sys


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def read_tsv(path):
    return [line.split("\t") for line in read_lines(path) if line.strip()]


def stages_section(out):
    rows = read_tsv(os.path.join(out, "check-stages.tsv"))
    lines = ["## Stages", "", "| stage | result | seconds | note |", "|---|---|---:|---|"]
    for row in rows:
        stage, status, seconds, note = (row + ["", "", "", ""])[:4]
        lines.append(f"| {stage} | {status} | {seconds} | {note} |")
    if not rows:
        lines.append("| (none recorded) | | | |")
    return lines


# ctest's per-test lines: "  3/11 Test  #3: cuda_test_cuda_graphs ............   Passed    4.12 sec"
# (or "***Failed", "***Timeout", "***Exception: SegFault", "***Not Run", "***Skipped").
CTEST_LINE = re.compile(r"Test\s+#\d+:\s+(\S+)\s+\.*\s*(\*+)?\s*([A-Za-z][^\d]*?)\s+([\d.]+)\s+sec")


def suite_results(out):
    results = []
    for line in read_lines(os.path.join(out, "suites.log")):
        match = CTEST_LINE.search(line)
        if match:
            name, _, status, seconds = match.groups()
            results.append((name, status.strip(), seconds))
    return results


def build_facts(out):
    """What the configure step said of MPI and NCCL: the NCCL suite needs both to build its backend."""
    facts = []
    for line in read_lines(os.path.join(out, "build.log")):
        match = re.search(r"ember: (MPI|NCCL) (\S+)", line)
        if match:
            facts.append(f"{match.group(1)} {match.group(2)}")
    return facts


def suites_section(out):
    results = suite_results(out)
    lines = ["## CUDA suites (ctest -R '^cuda_')", ""]
    facts = build_facts(out)
    if facts:
        lines += [f"Built with: {', '.join(facts)}. The machine has one GPU: NCCL runs with one rank only.", ""]
    if not results:
        lines.append("No suite result was recorded (see suites.log).")
        return lines
    lines += ["| suite | result | seconds |", "|---|---|---:|"]
    lines += [f"| {name} | {status} | {seconds} |" for name, status, seconds in results]
    failed = [name for name, status, _ in results if status != "Passed"]
    lines.append("")
    lines.append(f"{len(results) - len(failed)} passed, {len(failed)} failed"
                 + (f": {', '.join(failed)} (their output is in suites.log)" if failed else ""))
    return lines


def sanitizer_section(out):
    rows = read_tsv(os.path.join(out, "sanitizer-status.tsv"))
    lines = ["## compute-sanitizer", ""]
    if not rows:
        lines.append("No sanitizer job ran.")
        return lines
    lines += ["| tool | suite | result | seconds | cases |", "|---|---|---|---:|---|"]
    for row in rows:
        tool, suite, status, seconds, option = (row + ["", "", "", "", ""])[:5]
        cases = f"`{option}`" if option else "all"
        lines.append(f"| {tool} | {suite} | {status} | {seconds} | {cases} |")
    waiting = [f"{row[0]} {row[1]}" for row in rows if len(row) > 2 and row[2] == "not run"]
    if waiting:
        lines += ["", f"Not run this time, first in line for the next run: {', '.join(waiting)}."]
    return lines


def harness_section(out):
    lines = ["## Training step on the GPU (side_by_side.py, ms per step, medians)", ""]
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "harness-*.json"))):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        setting = os.path.basename(path)[len("harness-"):-len(".json")]
        for s in saved.get("summaries", []):
            ember, torch = s.get("ember", {}), s.get("pytorch", {})
            rows.append((setting, s.get("workload"), s.get("batch"), ember.get("median_ms"), torch.get("median_ms"),
                         ember.get("peak_device_mb"), torch.get("peak_device_mb"), ember.get("cuda_malloc_per_step"),
                         ember.get("host_waits_per_step"), s.get("cublas_calls_op_by_op")))
    if not rows:
        lines.append("No harness measurement was recorded.")
        return lines
    lines += ["| setting | workload | batch | ember | PyTorch eager | speed-up | peak MB ember / PyTorch | "
              "cudaMalloc / host waits per warm step | cuBLAS calls per step |",
              "|---|---|---:|---:|---:|---:|---|---|---:|"]

    def number(value, form="{:.2f}"):
        return form.format(value) if isinstance(value, (int, float)) else "-"

    for setting, workload, batch, e, t, e_mb, t_mb, mallocs, waits, calls in rows:
        ratio = f"{t / e:.2f}x" if isinstance(e, (int, float)) and isinstance(t, (int, float)) and e > 0 else "-"
        lines.append(f"| {setting} | {workload} | {batch} | {number(e)} | {number(t)} | {ratio} | "
                     f"{number(e_mb, '{:.0f}')} / {number(t_mb, '{:.0f}')} | {number(mallocs, '{:g}')} / "
                     f"{number(waits, '{:g}')} | {number(calls, '{:g}')} |")
    return lines


def attention_section(out):
    path = os.path.join(out, "bench-attention.json")
    lines = ["## Attention (bench_cuda_attention)", ""]
    if not os.path.exists(path):
        lines.append("No attention measurement was recorded.")
        return lines
    with open(path, encoding="utf-8") as f:
        benchmarks = json.load(f).get("benchmarks", [])
    lines += ["| case | ms | TFLOP/s |", "|---|---:|---:|"]
    for b in benchmarks:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            lines.append(f"| {b.get('name')} | error: {b.get('error_message', '')} | |")
            continue
        flops = b.get("FLOP/s")
        lines.append(f"| {b.get('name')} | {b.get('real_time', float('nan')):.3f} | "
                     f"{flops / 1e12 if isinstance(flops, (int, float)) else float('nan'):.1f} |")
    return lines


# bench_cuda_attention's case names: the bfloat16 cases by path, the float32 ones fused or composed.
SIXTEEN_BIT_CASE = re.compile(
    r"BM_CudaAttention(Bf16|F16)(Forward|ForwardBackward)/path:(\d+)/causal:(\d)/len:(\d+)/dim:(\d+)")
SIXTEEN_BIT_DTYPES = {"Bf16": "bfloat16", "F16": "float16"}
FLOAT32_CASE = re.compile(
    r"BM_CudaAttention(Forward|ForwardBackward)/fused:1/causal:(\d)/len:(\d+)/batch:\d+(?:/tf32:(\d))?")
PATH_NAMES = {0: "float32 tiles", 1: "WMMA"}


def ember_attention_rates(out):
    """{(dtype, pass, causal, length, head_dim): (TFLOP/s, path)}: the best path of each case."""
    path = os.path.join(out, "bench-attention.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        benchmarks = json.load(f).get("benchmarks", [])
    best = {}
    for b in benchmarks:
        if b.get("error_occurred") or not isinstance(b.get("FLOP/s"), (int, float)):
            continue
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("name", "")
        match = SIXTEEN_BIT_CASE.match(name)
        if match:
            dtype, which, path_id, causal, length, head_dim = match.groups()
            key = (SIXTEEN_BIT_DTYPES[dtype], which, causal == "1", int(length), int(head_dim))
            path_name = PATH_NAMES.get(int(path_id), f"mma.sync tile {int(path_id) - 2}")
        else:
            match = FLOAT32_CASE.match(name)
            if not match:
                continue
            which, causal, length, tf32 = match.groups()
            key = ("float32", which, causal == "1", int(length), 64)
            # With TF32 allowed the mma.sync kernels take float32 on TF32 tensor cores.
            path_name = "fused, TF32" if tf32 == "1" else "fused"
        key = key[:1] + ("forward" if key[1] == "Forward" else "forward_backward",) + key[2:]
        rate = b["FLOP/s"] / 1e12
        if key not in best or rate > best[key][0]:
            best[key] = (rate, path_name)
    return best


def attention_bar(dtype, length):
    """The issue's bar for ember over SDPA: half of its flash backend's rate in 16 bits; in float32
    its default's rate at 128, half of it from 1,024 on."""
    if dtype in ("bfloat16", "float16"):
        return "flash", 0.5
    return "default", 1.0 if length <= 128 else 0.5


def sdpa_section(out):
    lines = ["## Attention against PyTorch SDPA, same GPU, same check", ""]
    path = os.path.join(out, "sdpa-attention.json")
    if not os.path.exists(path):
        return lines + ["No SDPA measurement was recorded."]
    with open(path, encoding="utf-8") as f:
        sdpa = json.load(f)
    lines += [f"PyTorch {sdpa.get('torch', '?')} on {sdpa.get('device', '?')}. TFLOP/s in FlashAttention-2's count "
              "(forward 4 B H L S E, forward + backward 3.5 times that, halved when causal).", "",
              "| dtype | length | head dim | causal | pass | ember (best path) | SDPA flash | SDPA default | "
              "ember / bar's SDPA | bar |", "|---|---:|---:|---|---|---:|---:|---:|---:|---|"]
    rates = {}
    for entry in sdpa.get("cases", []):
        key = (entry["dtype"], entry["pass"], entry["causal"], entry["length"], entry["head_dim"])
        rates.setdefault(key, {})[entry["backend"]] = entry.get("tflops", entry.get("error", "error"))
    ember = ember_attention_rates(out)
    for key, backends in rates.items():
        dtype, pass_name, causal, length, head_dim = key
        mine = ember.get(key)
        against, fraction = attention_bar(dtype, length)
        theirs = backends.get(against)

        def shown(rate):
            return f"{rate:.1f}" if isinstance(rate, (int, float)) else ("-" if rate is None else f"error: {rate}")

        if mine and isinstance(theirs, (int, float)) and theirs > 0:
            ratio = mine[0] / theirs
            verdict = f"{'met' if ratio >= fraction else 'not met'} (>= {fraction:g}x {against})"
            ratio_text = f"{ratio:.2f}x"
        else:
            ratio_text, verdict = "-", "not measured"
        lines.append(f"| {dtype} | {length} | {head_dim} | {'yes' if causal else 'no'} | {pass_name} | "
                     f"{shown(mine[0]) + ' (' + mine[1] + ')' if mine else 'not measured'} | "
                     f"{shown(backends.get('flash'))} | {shown(backends.get('default'))} | {ratio_text} | {verdict} |")
    return lines


def cpu_section(out):
    lines = ["## ember's CPU step on this machine's cores, beside its PyTorch (one round)", ""]
    rounds = [line.strip() for line in read_lines(os.path.join(out, "cpu-harness.log")) if " round " in line]
    lines += [f"- {line}" for line in rounds] if rounds else ["No CPU measurement was recorded."]
    return lines


def source_section(out):
    lines = read_lines(os.path.join(out, "commit.txt"))
    return [f"- {line}" for line in lines] if lines else []


def summary(out):
    sections = [["# GPU check", ""], source_section(out), stages_section(out), suites_section(out), sanitizer_section(out),
                harness_section(out), attention_section(out), sdpa_section(out), cpu_section(out)]
    return "\n".join("\n".join(section) + "\n" for section in sections)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_summary.py OUT_DIR")
    text = summary(sys.argv[1])
    with open(os.path.join(sys.argv[1], "gpu-summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
