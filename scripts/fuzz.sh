#!/usr/bin/env bash
# Runs ember's libFuzzer targets (tests/fuzz/), one per core at a time, each for a fixed time, from
# the seed corpus that write_seeds makes with ember, the inputs that once found a bug
# (tests/fuzz/regressions/<target>/) and what earlier runs in the same build folder found.
#
#   bash scripts/fuzz.sh                       # every target, 20 s each (what scripts/test.sh runs)
#   bash scripts/fuzz.sh 3600 fuzz_bpe_file    # one target for an hour
#
# It needs the sanitizer build folder that scripts/test.sh makes (build-sanitize; another with
# EMBER_FUZZ_BUILD=folder). A finding stops nothing: every target runs, then the script fails
# naming each target that found something and the file that reproduces it.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-20}"
shift || true
build="${EMBER_FUZZ_BUILD:-build-sanitize}"
fuzz_bin="$build/tests/fuzz"
[ -x "$fuzz_bin/write_seeds" ] || { echo "fuzz: $fuzz_bin/write_seeds not found; run bash scripts/test.sh first" >&2; exit 1; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for binary in "$fuzz_bin"/fuzz_*; do targets+=("$(basename "$binary")"); done
fi

# Names on the frames of a sanitizer report (llvm-16's symbolizer; setup.sh installs it).
if [ -x /usr/lib/llvm-16/bin/llvm-symbolizer ]; then export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer; fi

corpus="$build/fuzz/corpus"
"$fuzz_bin/write_seeds" "$build/fuzz/seeds" >/dev/null

# Fuzzes one target for $seconds; its exit status is libFuzzer's (non-zero: a finding).
fuzz_one() {
  local target="$1"
  mkdir -p "$corpus/$target" "$build/fuzz/findings/$target"
  local inputs=("$corpus/$target" "$build/fuzz/seeds/$target")
  [ -d "tests/fuzz/regressions/$target" ] && inputs+=("tests/fuzz/regressions/$target")
  # The targets that read JSON mutate with its grammar's pieces as well.
  local dictionary=()
  case "$target" in
    fuzz_safetensors|fuzz_checkpoint|fuzz_tokenizer_file|fuzz_wordpiece_file|fuzz_bpe_file|fuzz_bert_vocab|fuzz_sentiment|fuzz_example_config)
      dictionary=(-dict=tests/fuzz/json.dict) ;;
  esac
  # -timeout: one input taking 10 s is a hang. -rss_limit_mb: a loader that asks for gigabytes
  # on a small file is a finding too.
  "$fuzz_bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dictionary[@]}" \
    -artifact_prefix="$build/fuzz/findings/$target/" "${inputs[@]}" >"$build/fuzz/logs/$target.log" 2>&1
}

# The targets run side by side, one per core (EMBER_FUZZ_JOBS to choose), each on one OpenMP
# thread: a target is one process that runs its inputs one after another, so two of them on two
# cores each get as many executions as one alone, in half the wall time.
jobs_at_once="${EMBER_FUZZ_JOBS:-$(nproc)}"
export OMP_NUM_THREADS=1
mkdir -p "$build/fuzz/logs"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n || true; done
  rm -f "$build/fuzz/logs/$target.found"
  { fuzz_one "$target" || touch "$build/fuzz/logs/$target.found"; } &
done
wait

# The reports, in the targets' order.
failed=()
total=0
for target in "${targets[@]}"; do
  log="$build/fuzz/logs/$target.log"
  if [ ! -e "$build/fuzz/logs/$target.found" ]; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
    echo "fuzz: $target: ${runs:-?} executions in ${seconds} s, coverage ${coverage:-?} edges, nothing found"
    total=$((total + ${runs:-0}))
  else
    echo "fuzz: $target FOUND A BUG (log: $log):"
    grep -E "ERROR|SUMMARY|terminate|what\(\)|Test unit written" "$log" | head -20 | sed 's/^/    /'
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets found bugs: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, $total executions, nothing found"
