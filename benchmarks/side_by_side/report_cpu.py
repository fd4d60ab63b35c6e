"""The CPU report, RESULTS.md: the machine, the step times of both libraries, where ember's step
goes, the warm-step checks, the sweep and the bars."""
import statistics

from machine import cpu_times, steal_share
from report_common import precision_line, profile_section, verdict


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
    say(precision_line(args))
    sizes = ", ".join("n={}: {:.0f}".format(size["n"], size["gflops"]) for size in ceiling["sizes"])
    others = ", ".join(f"{m['sgemm_gflops']:.0f}" for m in ceiling["measurements"])
    say(f"- product ceiling ({ceiling.get('product', 'cblas_sgemm')} alone, square sizes, best of each): "
        f"{ceiling['sgemm_gflops']:.0f} GFLOP/s "
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
            say(f"All products: {100 * s['matmul_of_best']:.0f}% of the run's best product ceiling "
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
                say("Each profiled step ran between two short product ceilings (n=1024 and 2048, about a quarter of a "
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
            f"matrix products at {100 * efficiency:.0f}% of the product ceiling measured beside each step "
            f"(matmul alone {100 * s.get('matmul_only_efficiency', 0):.0f}%), "
            f"{100 * s.get('matmul_of_best', 0):.0f}% of the run's best (bar 80%): "
            f"{matmul_verdict}; peak RSS {s['ember']['peak_rss_mb']:.0f} MB against "
            f"{s['pytorch']['peak_rss_mb']:.0f} MB: {verdict(s['ember']['peak_rss_mb'] <= s['pytorch']['peak_rss_mb'])}")
    say("")
    return "\n".join(lines)
