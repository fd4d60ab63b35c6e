#!/usr/bin/env bash
# Sets up, builds and runs ember's whole test suite (through ctest); then, in a second build
# folder compiled by clang with AddressSanitizer and UndefinedBehaviorSanitizer, runs the suites
# that read user input and a short run of every fuzz target (tests/fuzz/, scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The CUDA backend is compiled wherever nvcc is, GPU or not, so CI (nvcc, no GPU) checks that it
# compiles; CMake's AUTO would compile it only with a GPU present. The tests and benchmarks are
# asked for by name, since scripts/demo.sh configures the same build folder without them.
cuda_args=(-DEMBER_CUDA=AUTO)
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then cuda_args=(-DEMBER_CUDA=ON); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" -DEMBER_BUILD_TESTS=ON \
  -DEMBER_BUILD_BENCHMARKS=ON ${EMBER_CMAKE_ARGS:-} >/dev/null
cmake --build build --parallel "$(nproc)"
ctest --test-dir build --output-on-failure --parallel "$(nproc)" "$@"

# The sanitizer build checks what a user's files and command lines reach: the loaders of
# safetensors files, checkpoints, BERT checkpoint folders, tokenizer files, data sets and metrics
# CSVs, and the examples' options parsers and config files; and the suites of malformed calls
# (overlapping writes, overflowing shapes, unrepresentable scalars, seeded op programs); and the
# CPU kernels of each instruction set the machine has, with dropout's mask bits. The other
# suites (the ops, the models) run only in the Release build above, to keep this command within
# CI's time on two cores. To run them all
# sanitized: cmake --build build-sanitize && ctest --test-dir build-sanitize
# -O1: the sanitizers' recommended level; with them it compiles in under half -O3's time.
sanitized_suites=(test_safetensors test_checkpoint test_run_files test_tokenizers test_wordpiece test_bpe
                  test_unicode test_datasets test_metrics_log test_example_options test_example_config
                  test_device_option test_memory_overlap test_size_overflow test_scalar_range
                  test_unbounded_calls test_state_validation test_op_programs test_written_in_place test_bert
                  test_pretraining_data test_json_reader test_cpu_isa test_dropout test_gpt2_tokenizer test_gpt2)
cmake -S . -B build-sanitize -G Ninja ${EMBER_CMAKE_ARGS:-} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
  -DCMAKE_CXX_COMPILER=clang++-16 -DEMBER_SANITIZE=ON -DEMBER_FUZZ=ON -DEMBER_CUDA=OFF \
  -DEMBER_BUILD_BENCHMARKS=OFF -DEMBER_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-sanitize --parallel "$(nproc)" --target "${sanitized_suites[@]}" fuzz_targets
# Names on the frames of a sanitizer report (llvm-16's symbolizer; setup.sh installs it).
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-16/bin/llvm-symbolizer
export UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir build-sanitize --output-on-failure --parallel "$(nproc)" -R "^($(IFS='|'; echo "${sanitized_suites[*]}"))\$"
bash scripts/fuzz.sh 20
