#!/usr/bin/env bash
# Data-parallel scaling of the classifier step on this machine: one process, then two under
# mpirun, one OpenMP thread each, at three DDP bucket sizes; `rounds` repetitions of each, since
# the machine's cores are shared and single runs are noisy. Writes everything to stdout.
#
#   bash benchmarks/data_parallel.sh build [rounds] [extra options for data_parallel_step]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
program="$build/benchmarks/data_parallel_step"
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
export OMP_NUM_THREADS=1
for round in $(seq 1 "$rounds"); do
  echo "== round $round, $(uptime)"
  "$program" "$@"
  for bucket in 25 4 1; do
    "${mpirun[@]}" "$program" --bucket-mib "$bucket" "$@"
  done
done
