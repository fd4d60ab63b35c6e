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
#
# Each stage writes its log to $OUT (or ./gpu-logs) and stops at the first failure. The build
# stays in build-gpu/, so the later stages reuse it while the machine lives. The examples read
# data/ (scripts/fetch_data.sh), which must be copied to the GPU machine too.
set -euo pipefail
cd "$(dirname "$0")/.."

DEPS_DIR=.gpu-deps
PREFIX=/opt/ember-deps
BUILD=build-gpu
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
  for deb in "$DEPS_DIR"/*.deb; do dpkg-deb -x "$deb" "$PREFIX"; done
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/openblas-openmp:$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

build() {
  unpack
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -2
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
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
  *) echo "usage: $0 fetch|build|test|examples|translate|bench|bench-fp32|bench-tf32|bench-report|bench-attention|bench-bf16|examples-bf16|all" >&2
     exit 2 ;;
esac
