"""gpu-summary.md: one page from what `scripts/gpu_session.sh check` left in its output folder.

    python3 scripts/gpu_summary.py OUT_DIR

It reads, each only if present (a stage that timed out or was skipped leaves some out):
    commit.txt              the commit and the id of the working tree the check ran on
    check-stages.tsv        stage, status, seconds, note: one line per stage, in the order run
    suites.log              ctest's output over the CUDA suites
    sanitizer-status.tsv    tool, suite, status, seconds, doctest option: one line per compute-sanitizer job
    harness-*.json          the GPU harness's measurements (side_by_side.py --save)
    bench-attention.json    bench_cuda_attention's results (Google Benchmark's JSON)
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
                harness_section(out), attention_section(out), cpu_section(out)]
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
