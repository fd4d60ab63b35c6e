#!/usr/bin/env bash
# Sets up, builds and runs ember's demo: a transformer classifier trained from scratch on the
# sentiment sentences (examples/text_classifier.cpp), then asked about two new sentences.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch_data.sh sentiment
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel "$(nproc)" --target text_classifier
./build/examples/text_classifier "$@"
./build/examples/text_classifier --predict "What a great little phone, I love it!"
./build/examples/text_classifier --predict "The food was cold and the service was terribly slow."
