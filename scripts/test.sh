#!/usr/bin/env bash
# Sets up, builds and runs ember's whole test suite (through ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${EMBER_CMAKE_ARGS:-} >/dev/null
cmake --build build --parallel "$(nproc)"
ctest --test-dir build --output-on-failure --parallel "$(nproc)" "$@"
