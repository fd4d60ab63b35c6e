"""ember's training step at two builds, in one run: did a change cost speed?

    git worktree add /tmp/ember-before <commit>
    cmake -S /tmp/ember-before -B /tmp/ember-before/build -G Ninja -DCMAKE_BUILD_TYPE=Release \\
        -DEMBER_CUDA=OFF -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_EXAMPLES=OFF
    ninja -C /tmp/ember-before/build train_step          # and the same for the build after
    python3 benchmarks/side_by_side/before_after.py /tmp/ember-before/build /tmp/ember-after/build

Both builds should be configured alike (CUDA on or off in both). Rounds alternate the builds,
each round a fresh process of --steps timed steps per build and workload, the order reversed
every other round so that a drift in the machine's speed falls on both; the medians are over
all the steps of all the rounds. Extra arguments go to train_step (e.g. --precision bf16).
"""
import argparse
import json
import os
import subprocess
from statistics import median


def step_times(build, workload, steps, extra):
    command = [os.path.join(build, "benchmarks", "train_step"), "--workload", workload, "--steps", str(steps), *extra]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])["step_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="build directory of the library before the change")
    parser.add_argument("after", help="build directory of the library after the change")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per process")
    args, extra = parser.parse_known_args()
    builds = [("before", args.before), ("after", args.after)]
    for workload in ("classifier", "encoder-decoder"):
        times = {name: [] for name, _ in builds}
        for round_index in range(args.rounds):
            for name, build in (builds if round_index % 2 == 0 else builds[::-1]):
                times[name] += step_times(build, workload, args.steps, extra)
        before, after = median(times["before"]), median(times["after"])
        print(f"{workload}: before {before:.1f} ms, after {after:.1f} ms (median of {len(times['after'])} steps "
              f"each), after/before {after / before:.3f}", flush=True)


if __name__ == "__main__":
    main()
