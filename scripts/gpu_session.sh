#!/usr/bin/env bash
# ember's GPU checks, for a machine with an NVIDIA GPU, nvcc, cmake, ninja and PyTorch but none
# of ember's Debian build dependencies and no network (the GPU machines ember is tested on).
# The dependencies travel as Debian packages fetched beforehand on a Debian machine:
#
#   bash scripts/gpu_session.sh fetch      # on Debian, with network: .gpu-deps/*.deb (git-ignored)
#
# and then, on the GPU machine, in the repository root, with .gpu-deps/ copied beside it:
#
#   bash scripts/gpu_session.sh build      # unpack the packages, configure and build with CUDA
#   bash scripts/gpu_session.sh test       # the CUDA suites, then compute-sanitizer's memcheck over them
#   bash scripts/gpu_session.sh examples   # short --device cuda training runs of the examples
#   bash scripts/gpu_session.sh translate  # translation --recipe gpu: 9 minutes, then its BLEU
#   bash scripts/gpu_session.sh bench      # side_by_side.py --device cuda: RESULTS-cuda.md
#   bash scripts/gpu_session.sh bench-fp32 # the same in three parts, for a machine that allows
#   bash scripts/gpu_session.sh bench-tf32 #   ten minutes a command: each TF32 setting apart,
#   bash scripts/gpu_session.sh bench-report  # then RESULTS-cuda.md from both
#   bash scripts/gpu_session.sh bench-attention  # fused CUDA attention against the composed ops
#   bash scripts/gpu_session.sh bench-bf16 # side_by_side.py --precision bf16: RESULTS-cuda-bf16.md
#   bash scripts/gpu_session.sh examples-bf16  # the text classifier and translation's GPU recipe in bf16
#   bash scripts/gpu_session.sh all        # build, test, bench
#   bash scripts/gpu_session.sh check      # the one-call check: everything below in about 9 minutes
#
# Each stage writes its log to $OUT (or ./gpu-logs) and stops at the first failure. The build
# stays in build-gpu/, so the later stages reuse it while the machine lives. The examples read
# data/ (scripts/fetch_data.sh), which must be copied to the GPU machine too.
set -euo pipefail
cd "$(dirname "$0")/.."

DEPS_DIR=${GPU_DEPS_DIR:-.gpu-deps}
PREFIX=${GPU_DEPS_PREFIX:-/opt/ember-deps}
BUILD=${GPU_BUILD_DIR:-build-gpu}
LOGS=${OUT:-gpu-logs}
mkdir -p "$LOGS"

# What ember builds against (see scripts/setup.sh), with the shared libraries they need at run
# time that a machine without Debian's toolchain packages may lack.
PACKAGES=(libfmt-dev libfmt9 doctest-dev nlohmann-json3-dev libcli11-dev libbenchmark-dev libbenchmark1debian
          libopenblas-openmp-dev libopenblas0-openmp libopenblas-dev libgfortran5 libquadmath0)

fetch() {
  mkdir -p "$DEPS_DIR"
  (cd "$DEPS_DIR" && apt-get download "${PACKAGES[@]}")
  du -sh "$DEPS_DIR"
}

# Unpacked under $PREFIX, never over /: these are another distribution's files.
unpack() {
  [ -d "$DEPS_DIR" ] || { echo "error: $DEPS_DIR/ is missing: run 'bash scripts/gpu_session.sh fetch' on Debian first" >&2; exit 1; }
  mkdir -p "$PREFIX"
  # Once per machine: every stage calls this, and the check runs each stage as its own process.
  if [ ! -f "$PREFIX/.unpacked" ] || [ -n "$(find "$DEPS_DIR" -name '*.deb' -newer "$PREFIX/.unpacked")" ]; then
    for deb in "$DEPS_DIR"/*.deb; do dpkg-deb -x "$deb" "$PREFIX"; done
    touch "$PREFIX/.unpacked"
  fi
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/openblas-openmp:$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

build() {
  unpack
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -2
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DEMBER_CUDA_FLASH=ON \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DEMBER_CBLAS_INCLUDE_DIR="$PREFIX/usr/include/x86_64-linux-gnu/openblas-openmp" \
    -DEMBER_OPENBLAS_LIBRARY="$PREFIX/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so"
  cmake --build "$BUILD" --parallel "$(nproc)"
}

test_stage() {
  unpack
  ctest --test-dir "$BUILD" -R '^cuda_' --output-on-failure
  # memcheck over every CUDA suite: out-of-bounds and misaligned accesses. Not leaks: the
  # caching allocator keeps freed blocks to the end by design, and memcheck would list them.
  for suite in "$BUILD"/tests/cuda/cuda_test_*; do
    echo "== compute-sanitizer memcheck $(basename "$suite")"
    compute-sanitizer --tool memcheck --leak-check no --error-exitcode 1 "$suite"
  done
  # The CPU suite too: the same binaries, built with the CUDA backend in.
  ctest --test-dir "$BUILD" -E '^cuda_' --output-on-failure --parallel "$(nproc)"
}

# Short runs: that every example trains on the GPU, and how fast; not their full recipes.
examples() {
  unpack
  local bin="$BUILD/examples" out=gpu-runs
  "$bin/text_classifier" --device cuda --out "$out/text_classifier"
  "$bin/spelling_to_sound" --device cuda --steps 300 --minutes 2 --out "$out/spelling_to_sound"
  "$bin/char_language_model" --device cuda --minutes 2 --out "$out/char_language_model"
}

# The GPU recipe of the translation example, whole (its budget is 9 minutes of training).
translate() {
  unpack
  "$BUILD/examples/translation" --recipe gpu --device cuda --out gpu-runs/translation
}

# Mixed precision's quality bars: the text classifier and the translation recipe under bf16
# autocast, to set beside their float32 runs (examples, translate).
examples_bf16() {
  unpack
  "$BUILD/examples/text_classifier" --device cuda --precision bf16 --out gpu-runs/text_classifier-bf16
  "$BUILD/examples/translation" --recipe gpu --device cuda --precision bf16 --out gpu-runs/translation-bf16
}

bench_setting() {
  unpack
  PYTHONUNBUFFERED=1 python3 benchmarks/side_by_side/side_by_side.py --device cuda --build "$BUILD" --python python3 \
    --tf32 "$1" --save "$LOGS/bench-tf32-$1.json"
}
bench_fp32() { bench_setting off; }
bench_tf32() { bench_setting on; }
bench_report() {
  python3 benchmarks/side_by_side/side_by_side.py --device cuda --report-from "$LOGS/bench-tf32-off.json" \
    "$LOGS/bench-tf32-on.json"
  cp benchmarks/RESULTS-cuda.md "$LOGS/" 2>/dev/null || true
}
bench() { bench_fp32 && bench_tf32 && bench_report; }
# Both libraries' steps under bf16 autocast (PyTorch eager, compiled, and compiled with CUDA
# graphs; ember replaying its step as a graph): the mixed-precision bars.
bench_bf16() {
  unpack
  PYTHONUNBUFFERED=1 python3 benchmarks/side_by_side/side_by_side.py --device cuda --build "$BUILD" --python python3 \
    --precision bf16 --tf32 off --save "$LOGS/bench-bf16.json"
  cp benchmarks/RESULTS-cuda-bf16.md "$LOGS/" 2>/dev/null || true
}
# The fused attention kernels against the composed ops, and at long sequences (op benchmark).
bench_attention() {
  unpack
  "$BUILD/benchmarks/bench_cuda_attention" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$LOGS/bench-attention.json" --benchmark_out_format=json
}

# --- check: the one-call check of a short GPU loan ---------------------------------------------
# One command that builds only what it needs, then runs, each under its own timeout and in this
# order: the CUDA suites; compute-sanitizer jobs (racecheck and synccheck on the attention cases,
# memcheck on every suite) for as long as their share lasts, starting each run further along the
# list so that later runs cover the rest; the training-step harness on the GPU at batch 32 and
# 128 (ember float32 with graphs and without, ember bf16, PyTorch eager beside each); the
# attention benchmark, then PyTorch's SDPA at the same cases; ember's CPU step on this machine's
# cores beside its PyTorch. Every stage writes its log to $OUT, and $OUT/gpu-summary.md
# (scripts/gpu_summary.py) says what passed, failed, timed out or was skipped, with the figures.
# A stage's failure does not stop the next.
#
# $OUT ends up with gpu-summary.md and gpu-check.tar.gz (every stage's log and measurements).
#
# The budget (CHECK_BUDGET_S, 540 s) is the time from the start to the summary; each stage gets
# at most its cap (CHECK_CAP_<STAGE>_S) and never more than what is left, less what the summary
# needs. tests/gpu_session/check_dry_run.sh runs this with stand-ins for the GPU's tools.
CHECK_BUDGET_S=${CHECK_BUDGET_S:-540}
CHECK_MIN_STAGE_S=${CHECK_MIN_STAGE_S:-30}  # a stage (or sanitizer job) with less left is not started
HARNESS_PYTHON=${HARNESS_PYTHON:-python3}
SANITIZER=${SANITIZER:-compute-sanitizer}

# The targets the check runs: the CUDA suites, the harness's train_step, the attention benchmark.
check_targets() {
  local source
  for source in tests/cuda/test_*.cpp; do
    source=$(basename "$source" .cpp)
    echo "cuda_$source"
  done
  echo train_step bench_cuda_attention
}

build_for_check() {
  unpack
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -2
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DEMBER_CUDA_FLASH=ON -DEMBER_BUILD_EXAMPLES=OFF \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DEMBER_CBLAS_INCLUDE_DIR="$PREFIX/usr/include/x86_64-linux-gnu/openblas-openmp" \
    -DEMBER_OPENBLAS_LIBRARY="$PREFIX/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so"
  # shellcheck disable=SC2046
  cmake --build "$BUILD" --parallel "$(nproc)" --target $(check_targets)
}

check_suites() {
  unpack
  ctest --test-dir "$BUILD" -R '^cuda_' --output-on-failure --timeout 240
}

# The sanitizer jobs, in the order a run takes them: "tool suite [option...]", where an option
# that starts with "--" is compute-sanitizer's and any other the suite's (doctest's).
# compute-sanitizer reports every failed CUDA call as an error, so memcheck leaves out the two
# cases that make cudaMalloc fail on purpose (an allocation larger than the GPU, an out-of-memory
# inside a capture: ember's answer to those is what the suites themselves check), and does not
# report failed calls in the NCCL suite, where NCCL's own start-up probes its kernels with
# cudaFuncGetAttributes and takes "no kernel image" for an answer (seen on an H200). Memory
# accesses are checked in full in every job.
# The attention kernels' race and barrier checks take one test case each, the float32-tile kernel's
# and the tensor-core kernel's: racecheck over every attention case did not finish in 46 s on an
# H200. (Test names are matched with '*' for their spaces: a job's words are split at spaces.)
ATTENTION_FLOAT32_CASE='-tc=fused*CUDA*attention*matches*the*CPU*over*tile*edges*'
ATTENTION_TENSOR_CORE_CASE='-tc=fused*CUDA*attention*on*tensor*cores*matches*the*CPU*'
sanitizer_jobs() {
  local tool
  for tool in racecheck synccheck; do
    echo "$tool cuda_test_cuda_nn_parity $ATTENTION_FLOAT32_CASE"
    echo "$tool cuda_test_cuda_nn_parity $ATTENTION_TENSOR_CORE_CASE"
  done
  local suite
  for suite in $(check_targets); do
    case "$suite" in
      cuda_test_cuda_runtime) echo "memcheck $suite -tce=*allocation*larger*than*the*GPU*" ;;
      cuda_test_cuda_graph_capture_faults) echo "memcheck $suite -tce=*out-of-memory*inside*a*capture*" ;;
      cuda_test_cuda_nccl) echo "memcheck $suite --report-api-errors=no" ;;
      cuda_*) echo "memcheck $suite" ;;
    esac
  done
}

# Runs the jobs from a rotating start until the stage's deadline (CHECK_STAGE_DEADLINE, epoch
# seconds) is near, recording each in sanitizer-status.tsv; the ones left are "not run". The start
# moves with the commit count (or EMBER_SANITIZER_START), so successive check runs cover the list.
check_sanitizers() {
  unpack
  local -a jobs
  mapfile -t jobs < <(sanitizer_jobs)
  local count=${#jobs[@]} start
  start=${EMBER_SANITIZER_START:-$(git rev-list --count HEAD 2>/dev/null || echo 0)}
  start=$((start % count))
  local status_file="$LOGS/sanitizer-status.tsv" i job tool suite option word left began code status
  local -a words sanitizer_options suite_options
  : > "$status_file"
  for ((i = 0; i < count; ++i)); do
    job=${jobs[$(((start + i) % count))]}
    option=""
    read -r tool suite option <<< "$job"
    # Split without globbing: the wildcards are doctest's, not the shell's.
    read -r -a words <<< "$option"
    sanitizer_options=() suite_options=()
    for word in "${words[@]}"; do
      case "$word" in --*) sanitizer_options+=("$word") ;; *) suite_options+=("$word") ;; esac
    done
    left=$((CHECK_STAGE_DEADLINE - $(date +%s)))
    if [ "$left" -lt "$CHECK_MIN_STAGE_S" ]; then
      printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$suite" "not run" 0 "$option" >> "$status_file"
      continue
    fi
    echo "== compute-sanitizer $tool $suite $option (${left} s left)"
    began=$(date +%s)
    code=0
    timeout --kill-after=5 "$left" "$SANITIZER" --tool "$tool" --error-exitcode 1 \
      $([ "$tool" = memcheck ] && echo --leak-check no) "${sanitizer_options[@]}" \
      "$BUILD/tests/cuda/$suite" "${suite_options[@]}" || code=$?
    case "$code" in
      0) status=passed ;;
      124|137) status="timed out" ;;
      *) status="failed ($code)" ;;
    esac
    printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$suite" "$status" $(($(date +%s) - began)) "$option" >> "$status_file"
  done
  cat "$status_file"
  ! grep -q $'\tfailed' "$status_file"
}

# One harness run: one workload, PyTorch eager beside ember, one round; batches 32 and 128, or
# for gpt (GPT-2 small, context 1024) batch 16.
harness_run() {
  local name=$1 workload=$2
  shift 2
  local -a batches=(32 128)
  [ "$workload" = gpt ] && batches=(16)
  PYTHONUNBUFFERED=1 "$HARNESS_PYTHON" benchmarks/side_by_side/side_by_side.py --device cuda --build "$BUILD" \
    --python python3 --quick --tf32 off --torch-modes --batches "${batches[@]}" --workloads "$workload" \
    --save "$LOGS/harness-$name-$workload.json" "$@"
}

# The harness runs, "setting:workload", in the order the stage takes them; CHECK_HARNESS_RUNS
# picks some (one run takes about 40 s on an H200, so the stage's share does not fit them all).
HARNESS_RUNS_ALL="fp32-graphs:classifier fp32-graphs:encoder-decoder bf16-graphs:classifier bf16-graphs:encoder-decoder
                  bf16-graphs:gpt fp32-op-by-op:classifier fp32-op-by-op:encoder-decoder"
check_harness() {
  unpack
  local failed=0 run setting workload
  for run in ${CHECK_HARNESS_RUNS:-$HARNESS_RUNS_ALL}; do
    setting=${run%%:*} workload=${run#*:}
    case "$setting" in
      fp32-graphs) harness_run "$setting" "$workload" || failed=1 ;;
      fp32-op-by-op) harness_run "$setting" "$workload" --no-ember-graphs || failed=1 ;;
      bf16-graphs) harness_run "$setting" "$workload" --precision bf16 || failed=1 ;;
      *) echo "error: unknown harness setting '$setting' in '$run'" >&2; failed=1 ;;
    esac
  done
  return "$failed"
}

# The issue's sizes: float32 fused at the classifier's length and at 1,024-4,096, as float32 and
# with TF32 allowed (the mma.sync kernels on TF32), and composed (three ops, cuBLAS products) at
# the classifier's length, which says whether short sequences should take the fused kernels;
# bfloat16 at 1,024 and 4,096 (head dim 64) and 2,048 (head dim 128), non-causal on the mma.sync
# forward with each of its four tile shapes (paths 2-5: the table that chooses the default) and
# on the WMMA path (1), causal on the default tile; float16 on the default tile, causal and not;
# and the deterministic backward's cost on the default tiles.
check_attention() {
  unpack
  "$BUILD/benchmarks/bench_cuda_attention" \
    --benchmark_filter='BM_CudaAttention(Forward|ForwardBackward)/fused:(1/causal:0/|0/causal:0/len:128/)|BM_CudaAttentionBf16(Forward|ForwardBackward)/path:([1-5]/causal:0|2/causal:1)/|BM_CudaAttentionF16(Forward|ForwardBackward)/path:2/|BM_CudaAttentionBf16ForwardBackwardDeterministic/' \
    --benchmark_out="$LOGS/bench-attention.json" --benchmark_out_format=json
}

# PyTorch's SDPA at bench_cuda_attention's cases on this GPU, right after ember's: the issue's
# bars compare the two in one run (gpu-summary.md sets them side by side).
check_sdpa() {
  PYTHONUNBUFFERED=1 "$HARNESS_PYTHON" benchmarks/side_by_side/torch_attention.py --out "$LOGS/sdpa-attention.json"
}

check_cpu_harness() {
  unpack
  OMP_NUM_THREADS=$(nproc) PYTHONUNBUFFERED=1 "$HARNESS_PYTHON" benchmarks/side_by_side/side_by_side.py \
    --device cpu --build "$BUILD" --python python3 --quick --torch-threads "$(nproc)"
}

# Runs stage $1 (function $2) with at most $3 seconds and what the budget has left, recording its
# result in check-stages.tsv. A stage with under CHECK_MIN_STAGE_S seconds left is skipped.
CHECK_SUMMARY_RESERVE_S=15
check_stage() {
  local name=$1 function=$2 cap=$3
  local now left limit began code status note=""
  now=$(date +%s)
  left=$((CHECK_START + CHECK_BUDGET_S - CHECK_SUMMARY_RESERVE_S - now))
  limit=$((cap < left ? cap : left))
  if [ "$limit" -lt "$CHECK_MIN_STAGE_S" ]; then
    printf '%s\t%s\t%s\t%s\n' "$name" skipped 0 "no time left (${left} s of the budget)" >> "$LOGS/check-stages.tsv"
    echo "== $name: skipped, ${left} s left"
    return
  fi
  echo "== $name ($(date -u +%H:%M:%S), at most ${limit} s)"
  began=$(date +%s)
  code=0
  CHECK_STAGE_DEADLINE=$((began + limit - 5)) timeout --kill-after=5 "$limit" bash "$0" "check-$name" \
    > "$LOGS/$name.log" 2>&1 || code=$?
  case "$code" in
    0) status=passed ;;
    124|137) status="timed out"; note="stopped after ${limit} s" ;;
    *) status=failed; note="exit code $code; see $name.log" ;;
  esac
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" $(($(date +%s) - began)) "$note" >> "$LOGS/check-stages.tsv"
  tail -5 "$LOGS/$name.log"
}

# The git tree id of the files as they are here, tracked or not (ignored ones left out): the
# machine's copy of the history may be older than the files sent to it, and this names them
# exactly. On the machine they came from, `git log --format='%h %T' | grep ID` finds the commit.
working_tree_id() {
  local index
  index=$(mktemp -u)
  if GIT_INDEX_FILE=$index git add -A . > /dev/null 2>&1; then GIT_INDEX_FILE=$index git write-tree 2>/dev/null; fi
  rm -f "$index"
}

check() {
  CHECK_START=$(date +%s)
  export CHECK_START
  : > "$LOGS/check-stages.tsv"
  {
    git log -1 --format='commit %H (%s)' 2>/dev/null || echo "commit unknown (no git history)"
    echo "working tree $(working_tree_id)"
  } > "$LOGS/commit.txt"
  check_stage build build_for_check "${CHECK_CAP_BUILD_S:-270}"
  if grep -q $'^build\tpassed' "$LOGS/check-stages.tsv"; then
    check_stage suites check_suites "${CHECK_CAP_SUITES_S:-120}"
    check_stage sanitizers check_sanitizers "${CHECK_CAP_SANITIZERS_S:-60}"
    check_stage harness check_harness "${CHECK_CAP_HARNESS_S:-240}"
    check_stage attention check_attention "${CHECK_CAP_ATTENTION_S:-60}"
    check_stage sdpa check_sdpa "${CHECK_CAP_SDPA_S:-40}"
    check_stage cpu-harness check_cpu_harness "${CHECK_CAP_CPU_HARNESS_S:-60}"
  else
    for name in suites sanitizers harness attention sdpa cpu-harness; do
      printf '%s\t%s\t%s\t%s\n' "$name" skipped 0 "the build did not pass" >> "$LOGS/check-stages.tsv"
    done
  fi
  python3 scripts/gpu_summary.py "$LOGS"
  bundle_logs
}

# Leaves $OUT with two files, gpu-summary.md and gpu-check.tar.gz holding every log and
# measurement beside it: a machine lent for a short spell may return only a few files.
# CHECK_BUNDLE_LOGS=0 keeps them loose.
bundle_logs() {
  [ "${CHECK_BUNDLE_LOGS:-1}" = 0 ] && return
  local -a files=()
  local file
  for file in "$LOGS"/*; do
    case "$(basename "$file")" in gpu-summary.md|gpu-check.tar.gz) ;; *) [ -f "$file" ] && files+=("$(basename "$file")") ;; esac
  done
  [ "${#files[@]}" -eq 0 ] && return
  tar -czf "$LOGS/gpu-check.tar.gz" -C "$LOGS" gpu-summary.md "${files[@]}" && (cd "$LOGS" && rm -f -- "${files[@]}")
}

stage=${1:-all}
run_stage() {
  echo "== $1 ($(date -u +%H:%M:%S))"
  "$2" 2>&1 | tee "$LOGS/$1.log"
}
case "$stage" in
  fetch) fetch ;;
  build) run_stage build build ;;
  test) run_stage test test_stage ;;
  examples) run_stage examples examples ;;
  translate) run_stage translate translate ;;
  bench) run_stage bench bench ;;
  bench-fp32) run_stage bench-fp32 bench_fp32 ;;
  bench-tf32) run_stage bench-tf32 bench_tf32 ;;
  bench-report) run_stage bench-report bench_report ;;
  bench-attention) run_stage bench-attention bench_attention ;;
  bench-bf16) run_stage bench-bf16 bench_bf16 ;;
  examples-bf16) run_stage examples-bf16 examples_bf16 ;;
  all) run_stage build build && run_stage test test_stage && run_stage bench bench ;;
  check) check ;;
  # The check's stages, each run by check_stage in a process of its own under its timeout.
  check-build) build_for_check ;;
  check-suites) check_suites ;;
  check-sanitizers) check_sanitizers ;;
  check-harness) check_harness ;;
  check-attention) check_attention ;;
  check-sdpa) check_sdpa ;;
  check-cpu-harness) check_cpu_harness ;;
  *) echo "usage: $0 fetch|build|test|examples|translate|bench|bench-fp32|bench-tf32|bench-report|bench-attention|bench-bf16|examples-bf16|all|check" >&2
     exit 2 ;;
esac
