#!/usr/bin/env bash
# Sets up, builds and runs ember's demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel "$(nproc)" --target fit_function
./build/examples/fit_function "$@"
