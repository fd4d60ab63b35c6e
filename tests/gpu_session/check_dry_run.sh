#!/usr/bin/env bash
# `scripts/gpu_session.sh check` without a GPU: the GPU machine's tools (nvidia-smi, cmake's
# build, ctest, compute-sanitizer, the harness's Python and the attention benchmark) are replaced
# by stand-ins that answer as the real ones do, one suite failing, one sanitizer job too slow for
# its share, and the CPU harness hanging past its cap. What is checked is the orchestration the
# GPU run depends on and cannot debug in its few minutes: every stage runs in order under its own
# timeout, a failure or a timeout does not stop the next stage, the sanitizer jobs rotate and the
# ones left are listed, a stage with no time left is skipped, and gpu-summary.md reports it all.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stubs="$work/bin" build="$work/build" out="$work/out" deps="$work/deps" prefix="$work/prefix"
mkdir -p "$stubs" "$out" "$deps/pkg/DEBIAN" "$deps/pkg/usr/lib"

# One real package, so that unpack() extracts something.
printf 'Package: ember-stand-in\nVersion: 1\nArchitecture: all\nMaintainer: ember\nDescription: stand-in\n' \
  > "$deps/pkg/DEBIAN/control"
echo "a library" > "$deps/pkg/usr/lib/stand-in.txt"
dpkg-deb --build "$deps/pkg" "$deps/stand-in.deb" > /dev/null
rm -rf "$deps/pkg"

stub() { printf '#!/usr/bin/env bash\n%s\n' "$2" > "$stubs/$1"; chmod +x "$stubs/$1"; }
stub nvidia-smi 'echo "name, driver_version, memory.total"; echo "Stand-in GPU, 0, 0 MiB"'
stub nvcc 'echo "Cuda compilation tools, stand-in"; echo "Build stand-in"'
# cmake: configuring prints; building makes the binaries the check runs.
stub cmake "case \"\$1\" in
  --build)
    mkdir -p '$build/tests/cuda' '$build/benchmarks'
    for target in \"\$@\"; do
      case \"\$target\" in cuda_*) printf '#!/usr/bin/env bash\nexit 0\n' > '$build/tests/cuda/'\"\$target\"; chmod +x '$build/tests/cuda/'\"\$target\" ;; esac
    done
    printf '#!/usr/bin/env bash\nfor a in \"\$@\"; do case \"\$a\" in --benchmark_out=*) echo \"{\\\\\"benchmarks\\\\\": [{\\\\\"name\\\\\": \\\\\"BM_CudaAttentionBf16Forward/path:2/causal:0/len:1024/dim:64/real_time\\\\\", \\\\\"run_type\\\\\": \\\\\"iteration\\\\\", \\\\\"real_time\\\\\": 1.5, \\\\\"FLOP/s\\\\\": 2.0e14}, {\\\\\"name\\\\\": \\\\\"BM_CudaAttentionF16Forward/path:2/causal:0/len:1024/dim:64/real_time\\\\\", \\\\\"run_type\\\\\": \\\\\"iteration\\\\\", \\\\\"real_time\\\\\": 2.0, \\\\\"FLOP/s\\\\\": 1.5e14}, {\\\\\"name\\\\\": \\\\\"BM_CudaAttentionForward/fused:1/causal:0/len:128/batch:32/tf32:1/real_time\\\\\", \\\\\"run_type\\\\\": \\\\\"iteration\\\\\", \\\\\"real_time\\\\\": 0.1, \\\\\"FLOP/s\\\\\": 9.0e12}]}\" > \"\${a#--benchmark_out=}\" ;; esac; done\n' > '$build/benchmarks/bench_cuda_attention'
    chmod +x '$build/benchmarks/bench_cuda_attention' ;;
  *) echo configured ;;
esac"
stub ctest '[ -n "${STUB_CTEST_SLEEP:-}" ] && sleep "$STUB_CTEST_SLEEP"
echo "  1/2 Test  #1: cuda_test_cuda_graphs ..........   Passed    4.12 sec"
echo "  2/2 Test  #2: cuda_test_cuda_models ..........***Failed    1.23 sec"
echo "a failing case: CHECK( x == y ) is NOT correct!"
exit 8'
# compute-sanitizer: synccheck is too slow for the share; the other jobs pass.
stub compute-sanitizer 'echo "$*" >> "$(dirname "$0")/sanitizer-calls"; case "$*" in *synccheck*) sleep 30 ;; *) sleep 0.2 ;; esac'
# The harness: the GPU runs save their measurements; the CPU run hangs past its cap.
stub harness-python 'save=""; device=""
sdpa=""
while [ $# -gt 0 ]; do case "$1" in --save) save=$2; shift ;; --device) device=$2; shift ;; --out) sdpa=$2; shift ;; esac; shift; done
# torch_attention.py: SDPA at the attention cases, one of them refused by a backend.
if [ -n "$sdpa" ]; then
  echo "{\"torch\": \"stand-in\", \"device\": \"Stand-in GPU\", \"cases\": [
    {\"dtype\": \"bfloat16\", \"batch\": 16, \"heads\": 16, \"length\": 1024, \"head_dim\": 64, \"causal\": false, \"pass\": \"forward\", \"backend\": \"flash\", \"median_ms\": 1.0, \"tflops\": 250.0},
    {\"dtype\": \"bfloat16\", \"batch\": 16, \"heads\": 16, \"length\": 1024, \"head_dim\": 64, \"causal\": false, \"pass\": \"forward\", \"backend\": \"default\", \"median_ms\": 1.1, \"tflops\": 240.0},
    {\"dtype\": \"float16\", \"batch\": 16, \"heads\": 16, \"length\": 1024, \"head_dim\": 64, \"causal\": false, \"pass\": \"forward\", \"backend\": \"flash\", \"median_ms\": 1.0, \"tflops\": 200.0},
    {\"dtype\": \"float32\", \"batch\": 32, \"heads\": 4, \"length\": 128, \"head_dim\": 64, \"causal\": false, \"pass\": \"forward\", \"backend\": \"default\", \"median_ms\": 0.2, \"tflops\": 6.0},
    {\"dtype\": \"float32\", \"batch\": 32, \"heads\": 4, \"length\": 128, \"head_dim\": 64, \"causal\": true, \"pass\": \"forward\", \"backend\": \"default\", \"error\": \"no kernel\"}]}" > "$sdpa"
  exit 0
fi
if [ "$device" = cpu ]; then echo "  classifier batch 32 round 1/1: ember 10.0 ms, PyTorch 20.0 ms, steal 0%: kept"; sleep 60; fi
echo "{\"summaries\": [{\"workload\": \"classifier\", \"batch\": 32, \"ember\": {\"median_ms\": 4.0, \"peak_device_mb\": 100, \"cuda_malloc_per_step\": 0, \"host_waits_per_step\": 1}, \"pytorch\": {\"median_ms\": 10.6, \"peak_device_mb\": 200}, \"cublas_calls_op_by_op\": 40}]}" > "$save"'

cd "$repo"
begin=$(date +%s)
PATH="$stubs:$PATH" OUT="$out" GPU_BUILD_DIR="$build" GPU_DEPS_DIR="$deps" GPU_DEPS_PREFIX="$prefix" \
  HARNESS_PYTHON="$stubs/harness-python" EMBER_SANITIZER_START=0 CHECK_MIN_STAGE_S=3 CHECK_BUDGET_S=60 CHECK_BUNDLE_LOGS=0 \
  CHECK_CAP_BUILD_S=20 CHECK_CAP_SUITES_S=10 CHECK_CAP_SANITIZERS_S=12 CHECK_CAP_HARNESS_S=10 \
  CHECK_CAP_ATTENTION_S=10 CHECK_CAP_SDPA_S=5 CHECK_CAP_CPU_HARNESS_S=5 \
  bash scripts/gpu_session.sh check > "$work/check.out" 2>&1 || { cat "$work/check.out"; echo "FAIL: check exited non-zero"; exit 1; }
elapsed=$(($(date +%s) - begin))

summary="$out/gpu-summary.md"
failures=0
expect() {  # expect DESCRIPTION PATTERN [FILE]
  if grep -qE -- "$2" "${3:-$summary}"; then echo "ok: $1"; else echo "FAIL: $1 (no /$2/)"; failures=$((failures + 1)); fi
}
[ -f "$prefix/usr/lib/stand-in.txt" ] && echo "ok: the packages were unpacked" || { echo "FAIL: nothing unpacked"; failures=$((failures + 1)); }
expect "the build passed" '^\| build \| passed \|'
expect "the tree checked is named by its git tree id" "^- working tree $(cd "$repo" && i=$(mktemp -u) && GIT_INDEX_FILE=$i git add -A . && GIT_INDEX_FILE=$i git write-tree; rm -f "$i")\$"
expect "a failing suite makes the suites stage fail" '^\| suites \| failed \|'
expect "each suite's result is listed" '^\| cuda_test_cuda_graphs \| Passed \| 4.12 \|'
expect "the failing suite is named" '1 passed, 1 failed: cuda_test_cuda_models'
expect "the failing case's output is kept in the stage's log" 'NOT correct' "$out/suites.log"
expect "racecheck ran first on the attention cases" '^\| racecheck \| cuda_test_cuda_nn_parity \| passed \|'
expect "a sanitizer job past the deadline is cut off" '^\| synccheck \| cuda_test_cuda_nn_parity \| timed out \|'
expect "the jobs left are listed for the next run" 'first in line for the next run: synccheck cuda_test_cuda_nn_parity, memcheck'
expect "the attention jobs name their cases" '^\| racecheck \| cuda_test_cuda_nn_parity \| passed \| [0-9]+ \| `-tc=fused\*CUDA\*attention\*matches\*the\*CPU\*over\*tile\*edges\*` \|'
# The sanitizer stage alone, from the first memcheck job on, so that every job is reached.
PATH="$stubs:$PATH" OUT="$work/sanitizers" GPU_BUILD_DIR="$build" GPU_DEPS_DIR="$deps" GPU_DEPS_PREFIX="$prefix" \
  EMBER_SANITIZER_START=4 CHECK_MIN_STAGE_S=3 CHECK_STAGE_DEADLINE=$(($(date +%s) + 8)) \
  bash scripts/gpu_session.sh check-sanitizers > "$work/sanitizers.out" 2>&1 || true
expect "the sanitizer's options go to it, before the suite" '--leak-check no --report-api-errors=no .*/cuda_test_cuda_nccl$' "$stubs/sanitizer-calls"
expect "the suite's options go to the suite, wildcards intact" '/cuda_test_cuda_nn_parity -tc=fused\*CUDA\*attention\*on\*tensor\*cores\*matches\*the\*CPU\*$' "$stubs/sanitizer-calls"
expect "memcheck leaves out the deliberate out-of-memory" '^\| memcheck \| cuda_test_cuda_runtime \| .* \| `-tce=\*allocation\*larger\*than\*the\*GPU\*` \|'
expect "the harness's figures" '^\| fp32-graphs-classifier \| classifier \| 32 \| 4.00 \| 10.60 \| 2.65x \|'
expect "three settings of the harness per workload" '^\| bf16-graphs-encoder-decoder \|'
expect "the attention figures" 'BM_CudaAttentionBf16Forward/path:2/causal:0/len:1024/dim:64/real_time \| 1.500 \| 200.0 \|'
expect "SDPA ran as a stage of its own" '^\| sdpa \| passed \|'
expect "ember against SDPA's flash backend, with the bar" '^\| bfloat16 \| 1024 \| 64 \| no \| forward \| 200.0 \(mma.sync tile 0\) \| 250.0 \| 240.0 \| 0.80x \| met \(>= 0.5x flash\) \|'
expect "float16 against SDPA's flash backend" '^\| float16 \| 1024 \| 64 \| no \| forward \| 150.0 \(mma.sync tile 0\) \| 200.0 \| - \| 0.75x \| met \(>= 0.5x flash\) \|'
expect "float32 on TF32 named as such, against SDPA's float32 default" '^\| float32 \| 128 \| 64 \| no \| forward \| 9.0 \(fused, TF32\) \| - \| 6.0 \| 1.50x \| met \(>= 1x default\) \|'
expect "a case SDPA refused, and one ember did not measure" '^\| float32 \| 128 \| 64 \| yes \| forward \| not measured \| - \| error: no kernel \| - \| not measured \|'
expect "a stage past its cap is reported timed out, and the summary still written" '^\| cpu-harness \| timed out \|'
expect "the CPU harness's rounds before the timeout" 'ember 10.0 ms, PyTorch 20.0 ms'
[ "$elapsed" -le 75 ] && echo "ok: within the budget (${elapsed} s)" || { echo "FAIL: took ${elapsed} s"; failures=$((failures + 1)); }

# A stage that takes all the time left (the suites, hanging) leaves none for the later ones: they
# are skipped, and the summary says so.
rm -rf "$out" && mkdir -p "$out"
PATH="$stubs:$PATH" OUT="$out" GPU_BUILD_DIR="$build" GPU_DEPS_DIR="$deps" GPU_DEPS_PREFIX="$prefix" \
  HARNESS_PYTHON="$stubs/harness-python" STUB_CTEST_SLEEP=60 CHECK_MIN_STAGE_S=3 CHECK_BUDGET_S=28 \
  bash scripts/gpu_session.sh check > "$work/check2.out" 2>&1 || { cat "$work/check2.out"; echo "FAIL: check exited non-zero"; exit 1; }
expect "the hanging suites are cut off" '^\| suites \| timed out \|'
# Bundled (the default): the summary and one archive holding the rest.
leftover=$(cd "$out" && ls | sort | tr '\n' ' ')
[ "$leftover" = "gpu-check.tar.gz gpu-summary.md " ] && echo "ok: \$OUT holds the summary and the archive" \
  || { echo "FAIL: \$OUT holds: $leftover"; failures=$((failures + 1)); }
tar -tzf "$out/gpu-check.tar.gz" > "$work/archived"
expect "the archive holds the stages' logs" '^suites\.log$' "$work/archived"
for later in sanitizers harness attention sdpa cpu-harness; do
  expect "$later is skipped for want of time" "^\\| $later \\| skipped \\| 0 \\| no time left"
done

if [ "$failures" -ne 0 ]; then
  echo "--- gpu-summary.md"; cat "$summary" 2>/dev/null || true
  echo "--- check output"; cat "$work/check.out"
  echo "$failures check(s) failed"
  exit 1
fi
echo "gpu_session.sh check dry run: all checks passed"
