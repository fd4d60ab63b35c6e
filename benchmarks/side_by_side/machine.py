"""The machine a run is measured on: what it is (CPU, memory, ember's commit, PyTorch's version),
and how much of its CPU time the hypervisor gave to other machines meanwhile (steal)."""
import datetime
import os
import platform
import subprocess

from processes import ROOT


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
