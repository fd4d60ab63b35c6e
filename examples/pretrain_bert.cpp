// Pretraining a small BERT by masked language modelling: the first half of the transfer-learning
// lesson of "NLP with Transformers". A transformer that has read plain English (here about
// 2 million words: State of the Union addresses, Moby Dick, the sentiment training sentences
// without their labels) knows what words mean before it sees a single label; fine_tune_bert
// --init-from out/pretrain_bert then fine-tunes it on the 2,400 labelled sentences.
//
//   bash scripts/fetch_data.sh sotu moby-dick sentiment bert-vocab
//   ./build/examples/pretrain_bert                          # 10 minutes on 2 cores (bf16)
//   ./build/examples/pretrain_bert --fill "the food was [MASK] ."
//   ./build/examples/pretrain_bert --polarity words --out out/pretrain_bert_polarity   # stage 6b
//
// The recipe, stage by stage:
//   1. Text: the addresses of years not divisible by 10, the first 90% of Moby Dick and the
//      sentiment training sentences (never the test ones); the other addresses are held out.
//      The sentiment sentences appear 20 times (--sentiment-repeats), a quarter of the text:
//      they are the kind of English the classifier will read, reviews, where the addresses are
//      speeches (pretraining on the task's own text, Gururangan et al., 2020). --text sentiment
//      pretrains on them alone.
//   2. Word pieces: BERT's uncased WordPiece vocabulary (data/bert/vocab.json) pruned to the
//      8,000 pieces this text uses most, every character its words are made of kept
//      (text::prune_wordpiece_vocabulary, --vocab corpus --vocab-size 8000). Of BERT's 30,522
//      pieces, 2 million words use most rarely: their embedding rows learn little, and the
//      output layer over all of them is about half of each step. Pruned, the step is twice as
//      fast and the fine-tuned classifier better (examples/README.md). Text is still
//      cut as BERT cuts it, into BERT's pieces, shorter ones where a long piece was left out;
//      --vocab bert keeps all 30,522. The vocabulary is written beside the model (vocab.txt).
//   3. Sequences: the word pieces of every document one after another, cut into sequences of
//      128 ([CLS], 126 pieces, [SEP]); no padding.
//   4. Masking (BERT's): 15% of the pieces of each sequence are chosen; 80% of those become
//      [MASK], 10% a random piece, 10% stay. The loss is the cross-entropy at the chosen ones.
//      Each (step, row) draws its own masks from the seed, so a resumed run masks as the
//      uninterrupted one. --masking words chooses whole words instead: a word's "##" pieces are
//      chosen with its first piece (whole-word masking, as BERT's later checkpoints were made).
//   5. Model: nn::BertForMaskedLM, 2 post-LN layers of width 128, 4 heads, feed-forward 512 (the
//      small BERT of examples/common/small_bert.h, which fine_tune_bert trains from scratch too),
//      started with two heads of the first layer looking at the pieces just before and after
//      (nn::init_neighbour_heads, --init neighbours): from BERT's own initialisation (--init bert)
//      every head spreads its attention evenly, the model predicts a [MASK] from the bag of
//      pieces around it, and in 20 minutes on 2 cores it does not learn to look next door.
//   6. Training: 9,000 steps of AdamW (lr 1e-3, weight decay 0.01), warm-up then cosine decay
//      (paced to end with --minutes, 20, if they run out first), batches of 32 sequences,
//      dropout 0.1, bfloat16 autocast when the CPU multiplies bfloat16 (--precision), a progress
//      bar, a checkpoint every 200 steps (--resume), and on the held-out addresses the
//      masked-token accuracy and perplexity.
//   6b. --polarity words, sentiment-aware pretraining (after SKEP, Tian et al., 2020): masked
//      language modelling learns that "good" and "bad" fill the same blanks, and puts them side by
//      side. A second head, one Linear on the final states, learns at every word of the AFINN-165
//      lexicon (3,382 words scored by hand, fetched with the sentiment data) whether it is
//      positive or negative, its loss added with weight --polarity-weight. On the held-out text
//      it is scored at the hidden opinion words only: their polarity must come from the sentence.
//      Fine-tuning loads the BERT, not this head.
//   7. The result: config.json, model.safetensors (Hugging Face's names) and vocab.txt, which
//      fine_tune_bert --init-from reads; --fill shows the five likeliest pieces for a [MASK].
//      --init-from DIR goes on pretraining such a model, on --text sentiment for instance.
#include <ember.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/bert_vocabulary.h"
#include "common/options.h"
#include "core/cpu/bf16_gemm.h"
#include "common/run_main.h"
#include "common/small_bert.h"

using namespace ember;

namespace {

struct Recipe {
  int64_t length = examples::SmallBert{}.positions;  // word pieces per sequence
  int64_t hidden = examples::SmallBert{}.hidden;
  int64_t layers = examples::SmallBert{}.layers;
  int64_t heads = examples::SmallBert{}.heads;
  int64_t batch = 32;
  double lr = 1e-3;
  int64_t steps = 9000;
  double minutes = 20;
  std::string text = "all";  // all: addresses, Moby Dick and sentiment sentences; sentiment: those alone
  int64_t sentiment_repeats = 20;  // the sentiment sentences appear this many times in the text
  double dropout = examples::SmallBert{}.dropout;
  double init_range = examples::SmallBert{}.init_range;  // the standard deviation of the initial weights
  std::string init = "neighbours";  // neighbours: nn::init_neighbour_heads; bert: BERT's own initialisation
  std::string init_from;  // a pretrained model's folder to go on pretraining from (its shape, its weights)
  std::string vocab = "corpus";  // corpus: BERT's pieces pruned to this text's most used; bert: all of them
  int64_t vocab_size = 8000;     // --vocab corpus: how many pieces are kept
  std::string masking = "pieces";  // words: a word's pieces are chosen together; pieces: each on its own
  // words: a second head learns each opinion word's polarity from the AFINN lexicon (stage 6b);
  // none: masked language modelling alone, as BERT was pretrained.
  std::string polarity = "none";
  double polarity_weight = 1.0;  // the polarity loss's weight beside the masked-token loss
};

// What pretraining trains: BertForMaskedLM and, with --polarity words, a second head, one
// Linear(hidden, 2) that reads the final state of each word the lexicon knows and says whether
// the word is positive or negative. Fine-tuning loads the BERT alone (model.safetensors); the
// checkpoint keeps both heads for --resume.
class PretrainingModel : public nn::Module {
 public:
  PretrainingModel(std::shared_ptr<nn::BertForMaskedLM> masked_lm, bool with_polarity)
      : nn::Module("PretrainingModel") {
    mlm = register_module("mlm", std::move(masked_lm));
    if (with_polarity) {
      polarity = register_module("polarity", std::make_shared<nn::Linear>(mlm->bert->config().hidden_size, 2));
    }
  }
  std::shared_ptr<nn::BertForMaskedLM> mlm;
  std::shared_ptr<nn::Linear> polarity;  // null without --polarity words
};

nn::BertConfig model_config(const Recipe& recipe, int64_t vocab_size) {
  const examples::SmallBert shape{.hidden = recipe.hidden, .layers = recipe.layers, .heads = recipe.heads,
                                  .positions = recipe.length, .dropout = recipe.dropout,
                                  .init_range = recipe.init_range};
  return shape.config(vocab_size);
}

// Sentences and paragraphs as documents: each is tokenized whole.
std::vector<std::vector<int64_t>> tokenize_all(const text::WordPieceTokenizer& tokenizer,
                                               const std::vector<std::string>& documents) {
  std::vector<std::vector<int64_t>> ids(documents.size());
  for (size_t i = 0; i < documents.size(); ++i) ids[i] = tokenizer.encode(documents[i]);
  return ids;
}

// The text, packed: word-piece sequences and, with --polarity words, each one's polarity targets
// (datasets::word_polarity_targets: 0 or 1 at the first piece of each lexicon word, kIgnoreIndex elsewhere).
struct Sequences {
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<int64_t>> polarity;  // empty without --polarity words
};

struct Batch {
  Tensor inputs, labels;  // [batch, T]
  Tensor positions;       // the chosen positions, into the flattened [batch * T], found while masking
  // With polarity targets: the positions (into the flattened [batch * T]) of the lexicon words
  // scored, and their polarities. Undefined when the batch has none to score.
  Tensor polarity_positions, polarity_labels;
};

// Which lexicon words the polarity head is scored on: every one while training, so the words'
// own representations learn their polarity; on held-out text only the ones the masking hid
// (turned into [MASK] or a random piece), where the polarity must come from the sentence.
enum class PolarityScored { every_word, hidden_words };

// Rows `rows` of the sequences, masked with draws from (seed, step, row).
Batch masked_batch(const Sequences& sequences, const std::vector<int64_t>& rows, const datasets::MaskingOptions& options,
                   uint64_t seed, int64_t step, Device device, PolarityScored scored = PolarityScored::every_word) {
  const int64_t length = static_cast<int64_t>(sequences.ids.front().size());
  datasets::MaskedBatch masked_rows;
  std::vector<int64_t> polarity_positions, polarity_labels;
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint64_t draw = seed * 0x100000001B3ull + static_cast<uint64_t>(step) * 1000003ull + r;
    const datasets::MaskedSequence masked = datasets::mask_for_mlm(sequences.ids[rows[r]], options, draw);
    if (!sequences.polarity.empty()) {
      const std::vector<int64_t>& targets = sequences.polarity[rows[r]];
      for (int64_t t = 0; t < length; ++t) {
        const bool hidden = masked.inputs[t] != sequences.ids[rows[r]][t];
        if (targets[t] != kIgnoreIndex && (scored == PolarityScored::every_word || hidden)) {
          polarity_positions.push_back(static_cast<int64_t>(r) * length + t);
          polarity_labels.push_back(targets[t]);
        }
      }
    }
    masked_rows.append(masked);
  }
  const int64_t count = static_cast<int64_t>(rows.size());
  const int64_t chosen = static_cast<int64_t>(masked_rows.positions.size());
  Batch batch{tensor(masked_rows.inputs, {count, length}).to(device),
              tensor(masked_rows.labels, {count, length}).to(device),
              tensor(masked_rows.positions, {chosen}).to(device), {}, {}};
  if (!polarity_positions.empty()) {
    const int64_t scored_count = static_cast<int64_t>(polarity_positions.size());
    batch.polarity_positions = tensor(polarity_positions, {scored_count}).to(device);
    batch.polarity_labels = tensor(polarity_labels, {scored_count}).to(device);
  }
  return batch;
}

// The polarity head's logits [scored, 2] at the batch's scored lexicon words, from the encoder's
// final states [batch, T, hidden].
Tensor polarity_logits(PretrainingModel& model, const Tensor& states, const Batch& batch) {
  return model.polarity->forward(index_select(states.reshape({-1, states.size(2)}), 0, batch.polarity_positions));
}

// The training loss: the masked-token cross-entropy, plus --polarity-weight times the polarity
// head's cross-entropy where the batch has lexicon words. The polarity term alone is returned in
// `polarity_loss` for the log (undefined without one).
Tensor pretraining_loss(PretrainingModel& model, const Batch& batch, double polarity_weight, Tensor& polarity_loss) {
  const Tensor states = model.mlm->bert->forward(batch.inputs);
  // The head at the chosen positions only.
  Tensor loss = model.mlm->loss_from_states(states, batch.labels, batch.positions);
  polarity_loss = Tensor();
  if (model.polarity && batch.polarity_positions.defined()) {
    polarity_loss = cross_entropy(polarity_logits(model, states, batch), batch.polarity_labels);
    loss = loss + polarity_loss * polarity_weight;
  }
  return loss;
}

struct HeldOut {
  double loss = 0, accuracy = 0;
  // With --polarity words, at the hidden lexicon words: how many, the share that is positive (what
  // always answering "positive" would score) and the head's accuracy.
  int64_t polarity_words = 0;
  double polarity_positive = 0, polarity_accuracy = 0;
};

// Masked-token loss and accuracy over the held-out sequences, with fixed masks; with the polarity
// head, how often it tells a hidden lexicon word's polarity from the sentence around it.
HeldOut evaluate(PretrainingModel& model, const Sequences& sequences, const datasets::MaskingOptions& options,
                 Device device) {
  NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0, predicted = 0, polarity_correct = 0, polarity_scored = 0, polarity_positive = 0;
  for (int64_t start = 0; start < static_cast<int64_t>(sequences.ids.size()); start += 64) {
    std::vector<int64_t> rows;
    for (int64_t r = start; r < std::min<int64_t>(start + 64, sequences.ids.size()); ++r) rows.push_back(r);
    const Batch batch =
        masked_batch(sequences, rows, options, /*seed=*/12345, start, device, PolarityScored::hidden_words);
    const Tensor states = model.mlm->bert->forward(batch.inputs);
    if (model.polarity && batch.polarity_positions.defined()) {
      const Tensor right = eq(argmax(polarity_logits(model, states, batch), -1), batch.polarity_labels);
      polarity_correct += right.to(kInt64).sum().item<int64_t>();
      polarity_scored += batch.polarity_labels.size(0);
      polarity_positive += batch.polarity_labels.sum().item<int64_t>();
    }
    const Tensor logits = model.mlm->predictions(states);
    const Tensor flat_labels = batch.labels.reshape({-1});
    const Tensor chosen = ne(flat_labels, static_cast<double>(kIgnoreIndex));
    const int64_t count = chosen.to(kInt64).sum().item<int64_t>();
    const Tensor flat_logits = logits.reshape({-1, logits.size(-1)});
    loss_sum += cross_entropy(flat_logits, flat_labels, {.reduction = Reduction::Sum}).item<double>();
    correct += logical_and(chosen, eq(argmax(flat_logits, -1), flat_labels)).to(kInt64).sum().item<int64_t>();
    predicted += count;
  }
  model.train();
  const double scored = static_cast<double>(std::max<int64_t>(polarity_scored, 1));
  return {loss_sum / std::max<int64_t>(predicted, 1), static_cast<double>(correct) / std::max<int64_t>(predicted, 1),
          polarity_scored, polarity_positive / scored, polarity_correct / scored};
}

// Whether the model reads word order yet: the share of its attention that the likeliest-looking
// head puts on the two pieces beside each position, averaged over 16 held-out sequences. A model
// on BERT's early plateau predicts from the bag of pieces around a [MASK] and spreads every
// head's weight evenly, 2 / length on the neighbours (1.6% at 128); a head that has learned to
// look next door puts far more there, and the loss leaves the plateau with it.
double neighbour_attention(PretrainingModel& model, const Sequences& sequences, const datasets::MaskingOptions& options,
                           Device device) {
  NoGradGuard no_grad;
  model.eval();
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < std::min<int64_t>(16, sequences.ids.size()); ++r) rows.push_back(r);
  const Batch batch = masked_batch(sequences, rows, options, /*seed=*/12345, /*step=*/0, device);
  double best = 0;
  for (const Tensor& layer : model.mlm->bert->attention_weights(batch.inputs)) {  // [batch, heads, T, T]
    const std::vector<double> weights = layer.to(kFloat64).to_vector<double>();
    const int64_t count = layer.size(0), heads = layer.size(1), length = layer.size(2);
    for (int64_t h = 0; h < heads; ++h) {
      double share = 0;
      for (int64_t b = 0; b < count; ++b) {
        for (int64_t i = 1; i + 1 < length; ++i) {
          const double* row = weights.data() + ((b * heads + h) * length + i) * length;
          share += row[i - 1] + row[i + 1];
        }
      }
      best = std::max(best, share / static_cast<double>(count * (length - 2)));
    }
  }
  model.train();
  return best;
}

// 6b. With --polarity words: the AFINN lexicon's words marked in the packed text, for the
// polarity head.
void mark_polarity(const examples::CommonOptions& common, const text::WordPieceTokenizer& tokenizer, Sequences& train,
                   Sequences& held_out) {
  const datasets::PolarityLexicon lexicon = datasets::load_afinn(common.data_dir, tokenizer);
  for (Sequences* sequences : {&train, &held_out}) {
    for (const auto& ids : sequences->ids) {
      sequences->polarity.push_back(datasets::word_polarity_targets(ids, tokenizer, lexicon));
    }
  }
  int64_t marked = 0, positive = 0;
  for (const auto& targets : train.polarity) {
    marked += std::count_if(targets.begin(), targets.end(), [](int64_t t) { return t != kIgnoreIndex; });
    positive += std::count(targets.begin(), targets.end(), 1);
  }
  fmt::print("polarity: {} words of AFINN-165 ({} phrases left out); {} words of the training text among them, "
             "{:.0f}% positive\n",
             lexicon.polarity.size(), lexicon.phrases_skipped, marked, 100.0 * positive / std::max<int64_t>(marked, 1));
}

// 2. The vocabulary (the recipe above says why it is pruned): the --init-from model's own, else
// BERT's, whole (--vocab bert) or pruned to the --vocab-size pieces `documents` use most. The
// pruning is deterministic, so --resume rebuilds the same vocabulary.
text::WordPieceTokenizer word_pieces(const Recipe& recipe, const examples::CommonOptions& common,
                                     const std::vector<std::string>& documents) {
  if (!recipe.init_from.empty()) return examples::bert_vocabulary(common.data_dir, recipe.init_from);
  auto bert = examples::bert_vocabulary(common.data_dir, "");
  if (recipe.vocab == "bert") return bert;
  const auto started = std::chrono::steady_clock::now();
  auto pruned = text::prune_wordpiece_vocabulary(bert, documents, recipe.vocab_size);
  fmt::print("vocabulary: {} of BERT's {} word pieces, the ones this text uses most, and every character ({:.1f} s)\n",
             pruned.vocab_size(), bert.vocab_size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return pruned;
}

// --fill: the five likeliest word pieces for each [MASK] of the sentence.
int fill(const examples::CommonOptions& common, const std::string& sentence) {
  const std::string folder = common.out_dir;
  auto model = nn::BertForMaskedLM::from_pretrained(folder);
  model->eval();
  const auto tokenizer = examples::bert_vocabulary(common.data_dir, folder);
  // [MASK] is not text: the pieces around it are encoded apart and the mask id put between.
  std::vector<int64_t> ids{tokenizer.token_to_id("[CLS]")};
  size_t from = 0;
  std::vector<size_t> masks;
  while (true) {
    const size_t at = sentence.find("[MASK]", from);
    const std::vector<int64_t> piece = tokenizer.encode(sentence.substr(from, at == std::string::npos ? std::string::npos : at - from));
    ids.insert(ids.end(), piece.begin(), piece.end());
    if (at == std::string::npos) break;
    masks.push_back(ids.size());
    ids.push_back(tokenizer.token_to_id("[MASK]"));
    from = at + 6;
  }
  ids.push_back(tokenizer.token_to_id("[SEP]"));
  EMBER_CHECK(!masks.empty(), "--fill: \"{}\" has no [MASK] to fill", sentence);
  NoGradGuard no_grad;
  const Tensor logits = model->forward(tensor(ids, {1, static_cast<int64_t>(ids.size())}));
  fmt::print("{}\n", sentence);
  for (const size_t position : masks) {
    const Tensor probabilities = softmax(logits.select(0, 0).select(0, static_cast<int64_t>(position)), -1);
    const ValuesIndices best = topk(probabilities, 5);
    const std::vector<float> p = best.values.to_vector<float>();
    const std::vector<int64_t> which = best.indices.to_vector<int64_t>();
    fmt::print("[MASK] at word piece {}:\n", position);
    for (size_t k = 0; k < which.size(); ++k) fmt::print("  {:<12} {:.4f}\n", tokenizer.id_to_token(which[k]), p[k]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pretrain a small BERT by masked language modelling on 2 million words of English"};
  examples::CommonOptions common{.out_dir = "out/pretrain_bert"};
  examples::add_common_options(app, common);
  Recipe recipe;
  std::string sentence;
  app.add_option("--steps", recipe.steps, "training steps (the schedule's length)")->check(examples::above(0))->capture_default_str();
  app.add_option("--minutes", recipe.minutes, "the time budget: the learning rate's schedule is paced to end with "
                 "it if the steps do not fit")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--hidden", recipe.hidden, "width of the model")->check(examples::above(0))->capture_default_str();
  app.add_option("--layers", recipe.layers, "encoder layers")->check(examples::above(0))->capture_default_str();
  app.add_option("--heads", recipe.heads, "attention heads")->check(examples::above(0))->capture_default_str();
  app.add_option("--length", recipe.length, "word pieces per sequence, [CLS] and [SEP] included")
      ->check(examples::between(8, 512))
      ->capture_default_str();
  app.add_option("--batch", recipe.batch, "sequences per step")->check(examples::above(0))->capture_default_str();
  app.add_option("--lr", recipe.lr, "peak learning rate (AdamW)")->check(examples::above(0))->capture_default_str();
  app.add_option("--dropout", recipe.dropout, "dropout of the hidden states and the attention while pretraining")
      ->check(examples::between(0.0, 0.9))
      ->capture_default_str();
  app.add_option("--init-range", recipe.init_range, "standard deviation of the initial weights")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--init", recipe.init, "neighbours: two heads of the first layer start looking at the pieces just "
                 "before and after; bert: BERT's own initialisation, every head looking everywhere")
      ->check(CLI::IsMember({"neighbours", "bert"}))
      ->capture_default_str();
  app.add_option("--init-from", recipe.init_from, "go on pretraining the model in this folder (config.json and "
                 "model.safetensors, as pretrain_bert writes them); its config sets the model's shape")
      ->check(CLI::ExistingDirectory);
  app.add_option("--vocab", recipe.vocab, "corpus: BERT's word pieces pruned to the --vocab-size this text uses "
                 "most (every character kept); bert: all 30,522 of them")
      ->check(CLI::IsMember({"corpus", "bert"}))
      ->capture_default_str();
  app.add_option("--vocab-size", recipe.vocab_size, "--vocab corpus: word pieces kept")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--text", recipe.text, "all, or sentiment: the sentiment training sentences alone")
      ->check(CLI::IsMember({"all", "sentiment"}))
      ->capture_default_str();
  app.add_option("--sentiment-repeats", recipe.sentiment_repeats, "how many times the sentiment sentences appear in "
                 "the text")->check(examples::above(0))->capture_default_str();
  app.add_option("--masking", recipe.masking, "words: the pieces of a word are chosen together (whole-word "
                 "masking); pieces: each piece on its own, as the first BERT did")
      ->check(CLI::IsMember({"words", "pieces"}))
      ->capture_default_str();
  app.add_option("--polarity", recipe.polarity, "words: a second head learns, at each word of the AFINN lexicon, "
                 "whether it is positive or negative (sentiment-aware pretraining); none: masked language "
                 "modelling alone")
      ->check(CLI::IsMember({"words", "none"}))
      ->capture_default_str();
  app.add_option("--polarity-weight", recipe.polarity_weight, "--polarity words: the polarity loss's weight beside "
                 "the masked-token loss")
      ->check(examples::above(0))
      ->capture_default_str();
  app.add_option("--fill", sentence, "the five likeliest word pieces for each [MASK] of this sentence, from the "
                 "pretrained model in --out");

  return examples::run_main(app, argc, argv, common, [&]() -> int {
    if (app.count("--fill") > 0) return fill(common, sentence);
    for (const char* shaping : {"--hidden", "--layers", "--heads", "--init", "--init-range", "--dropout", "--vocab",
                                "--vocab-size"}) {
      EMBER_CHECK(recipe.init_from.empty() || app.count(shaping) == 0,
                  "pretrain_bert: {} shapes a fresh model, but --init-from {} brings its own (its config.json)",
                  shaping, recipe.init_from);
    }
    // bfloat16 where the CPU multiplies it in pairs (AVX512-BF16): twice float32's speed.
    if (app.count("--precision") == 0 && common.device == "cpu" && cpu::bf16_products_in_pairs()) {
      common.precision = "bf16";
    }
    const Device device = examples::setup_run(common);
    fmt::print("precision: {}\n", common.precision);

    // 1. Text.
    const datasets::SotuData addresses = datasets::load_sotu(common.data_dir);
    const datasets::TextSplit moby_dick = datasets::load_moby_dick(common.data_dir);
    const datasets::SentimentData sentiment = datasets::load_sentiment(common.data_dir);
    std::vector<std::string> train_documents, held_out_documents;
    if (recipe.text == "all") {
      for (const auto& address : addresses.train) train_documents.push_back(address.text);
      train_documents.push_back(moby_dick.train);
    }
    for (int64_t r = 0; r < recipe.sentiment_repeats; ++r) {
      for (const auto& example : sentiment.train) train_documents.push_back(example.text);  // the text, not the label
    }
    for (const auto& address : addresses.held_out) held_out_documents.push_back(address.text);
    if (recipe.text == "all") {
      fmt::print("text: {} addresses ({} held out), Moby Dick, {} sentiment sentences without labels x {}\n",
                 addresses.train.size(), addresses.held_out.size(), sentiment.train.size(), recipe.sentiment_repeats);
    } else {
      fmt::print("text: {} sentiment sentences without labels x {} ({} addresses held out)\n", sentiment.train.size(),
                 recipe.sentiment_repeats, addresses.held_out.size());
    }

    // 2. and 3. Word pieces, packed into sequences.
    const text::WordPieceTokenizer tokenizer = word_pieces(recipe, common, train_documents);
    const int64_t cls = tokenizer.token_to_id("[CLS]"), sep = tokenizer.token_to_id("[SEP]");
    Sequences train_sequences{datasets::pack_sequences(tokenize_all(tokenizer, train_documents), recipe.length, cls, sep), {}};
    Sequences held_out_sequences{
        datasets::pack_sequences(tokenize_all(tokenizer, held_out_documents), recipe.length, cls, sep), {}};
    if (held_out_sequences.ids.size() > 256) held_out_sequences.ids.resize(256);  // enough for the figures, quick
    fmt::print("word pieces: {} train sequences of {} ({} pieces), {} held out\n", train_sequences.ids.size(),
               recipe.length, train_sequences.ids.size() * (recipe.length - 2), held_out_sequences.ids.size());
    EMBER_CHECK(!train_sequences.ids.empty() && !held_out_sequences.ids.empty(), "pretrain_bert: too little text for a "
                "sequence of {} word pieces", recipe.length);
    const datasets::MaskingOptions options = datasets::MaskingOptions::for_tokenizer(tokenizer, recipe.masking == "words");
    const bool with_polarity = recipe.polarity == "words";
    if (with_polarity) mark_polarity(common, tokenizer, train_sequences, held_out_sequences);

    // 5. Model: a fresh one, or with --init-from a pretrained one that goes on pretraining, on
    // the sentiment sentences alone for instance (--text sentiment: pretraining on the task's own
    // text after the general text, as Gururangan et al., 2020, do).
    std::shared_ptr<nn::BertForMaskedLM> built;
    if (recipe.init_from.empty()) {
      built = std::make_shared<nn::BertForMaskedLM>(model_config(recipe, tokenizer.vocab_size()));
      if (recipe.init == "neighbours") nn::init_neighbour_heads(*built->bert);
    } else {
      built = nn::BertForMaskedLM::from_pretrained(recipe.init_from);
      const nn::BertConfig& loaded = built->bert->config();
      EMBER_CHECK(loaded.vocab_size == tokenizer.vocab_size(), "pretrain_bert: the model in {} has {} word pieces, "
                  "BERT's vocabulary {}", recipe.init_from, loaded.vocab_size, tokenizer.vocab_size());
      EMBER_CHECK(loaded.max_position_embeddings >= recipe.length, "pretrain_bert: the model in {} has {} positions, "
                  "fewer than --length {}", recipe.init_from, loaded.max_position_embeddings, recipe.length);
    }
    PretrainingModel model(built, with_polarity);
    const nn::BertConfig config = model.mlm->bert->config();
    model.to(device);
    fmt::print("model: BertForMaskedLM, {} layers, hidden {}, {} heads, {} parameters, {}\n", config.num_hidden_layers,
               config.hidden_size, config.num_attention_heads, model.mlm->num_parameters(),
               recipe.init_from.empty() ? recipe.init + " initialisation" : "from " + recipe.init_from);

    // 6. Training: --steps steps (the warm-up and cosine decay are laid out over them), or as
    // many as --minutes hold, the schedule paced to end with the time.
    datasets::BatchSchedule schedule = datasets::BatchSchedule::shuffled(
        static_cast<int64_t>(train_sequences.ids.size()), recipe.batch, common.seed);
    const int64_t planned_steps = recipe.steps;
    nn::AdamW optimizer(nn::weight_decay_groups(model, 0.01), {.lr = recipe.lr});
    nn::Scheduler scheduler(optimizer, std::make_shared<nn::WarmupCosine>(recipe.lr, 200, planned_steps));
    const train::Precision precision = common.precision_choice();
    nn::GradScaler scaler({.enabled = train::needs_loss_scaling(precision)});
    train::CheckpointSaver saver(common.out_path("checkpoint.safetensors"), 200, model, optimizer, &scheduler, &scaler);
    std::optional<int64_t> resumed;
    if (common.resume) {
      std::string found;
      resumed = train::resume_from(saver.path(), model, optimizer, &scheduler, &found, &scaler);
      fmt::print("--resume: {}\n", found);
    }
    std::vector<std::string> columns{"train_loss", "held_out_loss", "held_out_perplexity", "held_out_accuracy",
                                     "neighbour_attention", "lr"};
    if (with_polarity) columns.insert(columns.end(), {"train_polarity_loss", "held_out_polarity_accuracy"});
    train::MetricsLog log(common.out_path("metrics.csv"), columns, resumed);
    train::ProgressBar progress(planned_steps, {.label = "pretrain", .unit = "sequences"}, resumed.value_or(0));
    train::TimeBudget budget({.seconds = 60 * recipe.minutes});
    budget.pace(scheduler, planned_steps);
    double loss_sum = 0, polarity_loss_sum = 0;
    int64_t loss_count = 0, polarity_loss_count = 0, step = resumed.value_or(0);
    HeldOut last;
    double neighbours = 0;
    model.train();
    while (!budget.finished()) {
      ++step;
      const std::vector<int64_t> rows = schedule.batch(step - 1);
      const Batch batch = masked_batch(train_sequences, rows, options, common.seed, step, device);
      Tensor loss, polarity_loss;
      {
        const AutocastGuard autocast = train::autocast_scope(precision, device.type);
        loss = pretraining_loss(model, batch, recipe.polarity_weight, polarity_loss);
      }
      optimizer.zero_grad();
      scaler.scale(loss).backward();
      nn::clip_grad_norm_(model.parameters(), 1.0);
      scaler.step(optimizer);
      scaler.update();
      budget.step_done();  // the schedule's next step, or further if the time runs short
      loss_sum += loss.item<double>();
      ++loss_count;
      if (polarity_loss.defined()) {
        polarity_loss_sum += polarity_loss.item<double>();
        ++polarity_loss_count;
      }
      progress.update(step, {{"loss", loss_sum / loss_count}}, static_cast<double>(rows.size()));
      if (step % 200 == 0 || budget.finished()) {
        last = evaluate(model, held_out_sequences, options, device);
        neighbours = neighbour_attention(model, held_out_sequences, options, device);
        train::MetricValues values{{"train_loss", loss_sum / loss_count}, {"held_out_loss", last.loss},
                                   {"held_out_perplexity", std::exp(last.loss)}, {"held_out_accuracy", last.accuracy},
                                   {"neighbour_attention", neighbours}, {"lr", optimizer.lr(0)}};
        // With --polarity words the train loss is both objectives' sum; metrics.csv has the polarity part too.
        std::string line = fmt::format("step {:>5}  train loss {:.3f}  held-out loss {:.3f} (perplexity {:.1f})  "
                                       "masked-token accuracy {:.1f}%  attention on neighbours {:.1f}%",
                                       step, loss_sum / loss_count, last.loss, std::exp(last.loss),
                                       100 * last.accuracy, 100 * neighbours);
        if (with_polarity) {
          const double polarity_loss_mean = polarity_loss_sum / std::max<int64_t>(polarity_loss_count, 1);
          values.insert(values.end(), {{"train_polarity_loss", polarity_loss_mean},
                                       {"held_out_polarity_accuracy", last.polarity_accuracy}});
          line += fmt::format("  polarity of hidden opinion words {:.1f}%", 100 * last.polarity_accuracy);
        }
        log.write(step, values);
        progress.print_line(line);
        loss_sum = polarity_loss_sum = 0;
        loss_count = polarity_loss_count = 0;
        saver.save(step);
      }
      if (budget.out_of_time()) {
        progress.print_line(fmt::format("time budget of {} minutes reached at step {}; the learning rate's schedule "
                                        "was paced to end with it", recipe.minutes, step));
      }
    }
    progress.finish();
    const bool finished_before = resumed.has_value() && step == *resumed;
    if (finished_before) {
      // --resume of a run that had already finished: no step ran, so measure what was saved.
      last = evaluate(model, held_out_sequences, options, device);
      neighbours = neighbour_attention(model, held_out_sequences, options, device);
    }

    // 7. What fine-tuning reads: the model under Hugging Face's names, with its config.
    train::plot_metrics_csv(log.path(), "BERT pretraining");
    config.to_json_file(common.out_path("config.json"));
    tokenizer.save_vocab_txt(common.out_path("vocab.txt"));
    nn::save(*model.mlm, common.out_path("model.safetensors"));
    fmt::print("held-out masked-token accuracy {:.1f}%, perplexity {:.1f}, after {} steps{}\n", 100 * last.accuracy,
               std::exp(last.loss), step,
               finished_before ? std::string(" (trained before this --resume)")
                               : fmt::format(" in {:.0f} s", budget.elapsed_seconds()));
    if (with_polarity) {
      fmt::print("polarity of the {} hidden opinion words, from their sentences: {:.1f}% right ({:.1f}% are "
                 "positive)\n",
                 last.polarity_words, 100 * last.polarity_accuracy, 100 * last.polarity_positive);
    }
    fmt::print("the head most drawn to word order puts {:.1f}% of its attention on the two neighbouring pieces "
               "(evenly spread: {:.1f}%)\n",
               100 * neighbours, 200.0 / static_cast<double>(recipe.length));
    return 0;
  });
}
