#!/usr/bin/env bash
# The worked examples refuse bad command lines with an error that names what is wrong: each
# call below must exit with a failure status (not a crash), printing the text given. They are
# all refused before any data set is read, so this runs without the data.
#
#   bash tests/examples/check_errors.sh build/examples
set -uo pipefail
examples="$1"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/pretrained"

failures=0
expect_error() {  # expect_error TEXT COMMAND...: COMMAND fails (status 1-127) and prints TEXT
  local want="$1"
  shift
  local output status
  output="$("$@" 2>&1)"
  status=$?
  if [ "$status" -ge 1 ] && [ "$status" -le 127 ] && grep -qF -- "$want" <<<"$output"; then
    echo "ok: ${*#"$examples/"} -> $want"
  else
    echo "FAILED: $* exited $status and should have failed naming \"$want\"; it printed:"
    tail -n 5 <<<"$output"
    failures=$((failures + 1))
  fi
}

# pretrain_bert --init-from brings its own shape and vocabulary.
for option in "--hidden 64" "--layers 3" "--heads 2" "--init bert" "--init-range 0.05" "--dropout 0.2" \
              "--vocab bert" "--vocab-size 4000"; do
  # shellcheck disable=SC2086  # the option and its value are two words
  expect_error "pretrain_bert: ${option%% *} shapes a fresh model, but --init-from $scratch/pretrained brings its own" \
    "$examples/pretrain_bert" --init-from "$scratch/pretrained" $option --out "$scratch/out"
done
expect_error "--init-from: Directory does not exist" "$examples/pretrain_bert" --init-from "$scratch/absent"
expect_error "--vocab: small not in {corpus,bert}" "$examples/pretrain_bert" --vocab small
expect_error "--vocab-size" "$examples/pretrain_bert" --vocab-size 0
expect_error "--masking: sentences not in {words,pieces}" "$examples/pretrain_bert" --masking sentences
expect_error "--polarity: sentences not in {words,none}" "$examples/pretrain_bert" --polarity sentences
expect_error "--polarity-weight" "$examples/pretrain_bert" --polarity words --polarity-weight 0
expect_error "--model: rules not in {transformer,bow,lexicon}" "$examples/text_classifier" --model rules
expect_error "--model: bert not in {transformer,bow,lexicon}" "$examples/text_classifier" --model bert
expect_error "--validation-fold: must be between 1 and 5, got 6" "$examples/text_classifier" --validation-fold 6
expect_error "--validation-fold: must be between 1 and 5, got 0" "$examples/text_classifier" --validation-fold 0
expect_error "--minutes" "$examples/text_classifier" --minutes 0

# fine_tune_bert: where the network and its word pieces come from.
expect_error "--vocab: File does not exist" "$examples/fine_tune_bert" --vocab "$scratch/absent.txt"
expect_error "--config-from: Directory does not exist" "$examples/fine_tune_bert" --config-from "$scratch/absent"
expect_error "fine_tune_bert: --init-from $scratch/pretrained brings its own network; --config-from $scratch/pretrained is for" \
  "$examples/fine_tune_bert" --init-from "$scratch/pretrained" --config-from "$scratch/pretrained"
expect_error "fine_tune_bert: --freeze-encoder needs --init-from" "$examples/fine_tune_bert" --freeze-encoder
expect_error "--validation-fold: must be between 1 and 5, got 6" "$examples/fine_tune_bert" --validation-fold 6
expect_error "--encoder-lr-factor" "$examples/fine_tune_bert" --encoder-lr-factor 2
expect_error "--lr" "$examples/fine_tune_bert" --lr 0

# gpt2: presets, sizes, sampling and checkpoint folders.
expect_error "--preset: 350M not in {cpu,124M}" "$examples/gpt2" --preset 350M
expect_error "--context" "$examples/gpt2" --context 4096
expect_error "--top-p" "$examples/gpt2" --top-p 1.5
expect_error "--init-from: Directory does not exist" "$examples/gpt2" --init-from "$scratch/absent"
expect_error "--generate: no model in $scratch/out/model/" "$examples/gpt2" --generate --out "$scratch/out" --data "$scratch"
expect_error "--text: cannot open $scratch/absent.txt" "$examples/gpt2" --text "$scratch/absent.txt" --data "$scratch" --out "$scratch/out"
expect_error "gpt2: --n-embd shapes a fresh model, but --init-from $scratch/pretrained brings its own" \
  "$examples/gpt2" --init-from "$scratch/pretrained" --n-embd 128
expect_error "--init-from: $scratch/pretrained/ has no config.json" \
  "$examples/gpt2" --generate --init-from "$scratch/pretrained" --data "$scratch" --out "$scratch/out"
expect_error "--init-from: $scratch/pretrained/ has no config.json" \
  "$examples/gpt2" --init-from "$scratch/pretrained" --data "$scratch" --out "$scratch/out"
echo "A line of text." >"$scratch/one.txt"
expect_error "GPT-2's tokenizer files are missing from $scratch/gpt2-vocab/: run bash scripts/fetch_data.sh gpt2-vocab" \
  "$examples/gpt2" --text "$scratch/one.txt" --data "$scratch" --out "$scratch/out"

exit $((failures > 0))
