// The small BERT of the transfer-learning lesson, defined once: pretrain_bert pretrains it, and
// fine_tune_bert trains the same network from random weights, so that the comparison of the two
// measures pretraining and nothing else.
#pragma once

#include <ember.h>

#include <cstdint>

namespace ember::examples {

struct SmallBert {
  int64_t hidden = 128;      // the width; the feed-forward layers are 4 times wider
  int64_t layers = 2;        // post-LN encoder layers
  int64_t heads = 4;
  int64_t positions = 128;   // pretraining's sequences: [CLS], 126 word pieces, [SEP]
  double dropout = 0.1;      // of the hidden states and of the attention
  double init_range = 0.02;  // the standard deviation of the initial weights (BERT's initializer_range)

  nn::BertConfig config(int64_t vocab_size) const {
    nn::BertConfig config;
    config.vocab_size = vocab_size;
    config.hidden_size = hidden;
    config.num_hidden_layers = layers;
    config.num_attention_heads = heads;
    config.intermediate_size = 4 * hidden;
    config.max_position_embeddings = positions;
    config.initializer_range = init_range;
    config.hidden_dropout_prob = dropout;
    config.attention_probs_dropout_prob = dropout;
    return config;
  }
};

}  // namespace ember::examples
