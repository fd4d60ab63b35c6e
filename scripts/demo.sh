#!/usr/bin/env bash
# Sets up, builds and runs ember's demo: a transformer classifier trained from scratch on the
# sentiment sentences (examples/text_classifier.cpp), then asked about two new sentences.
#
# It installs and builds only what the demo needs: setup.sh's demo set, and the library and the
# one example (not the tests or benchmarks, which scripts/test.sh builds in the same folder).
# The CUDA backend is compiled where a GPU is present (CMake's EMBER_CUDA=AUTO), or when asked
# for: EMBER_CMAKE_ARGS="-DEMBER_CUDA=ON" bash scripts/demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
bash scripts/fetch_data.sh sentiment
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF \
  ${EMBER_CMAKE_ARGS:-} >/dev/null
cmake --build build --parallel "$(nproc)" --target text_classifier
./build/examples/text_classifier "$@"
./build/examples/text_classifier --predict "What a great little phone, I love it!"
./build/examples/text_classifier --predict "The food was cold and the service was terribly slow."
