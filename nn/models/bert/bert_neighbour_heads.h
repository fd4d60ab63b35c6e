// A starting point for pretraining a small BERT from scratch: two heads of the first layer
// already looking at the piece just before and the piece just after each position.
//
//   nn::BertForMaskedLM model(config);
//   nn::init_neighbour_heads(*model.bert);   // before the first step
//
// Why. BERT's initial weights make every head spread its attention evenly over the sequence, so
// a freshly built model predicts a [MASK] from the bag of pieces around it: which words are
// frequent, which are frequent together. Word order only enters once some head learns to look
// next door, and nothing pulls a head there until the model already uses what it would find:
// the loss sits on a plateau near the unigram entropy until that circle breaks. A small model
// trained for minutes on a CPU may not break it at all; started with two heads already looking
// next door, it uses word order from its first steps. examples/pretrain_bert compares both starts
// (--init neighbours, --init bert) by held-out perplexity and by the attention its heads put on
// the neighbouring pieces.
//
// What changes, and only at initialisation (the network, its names and its checkpoints stay
// BERT's; training is free to undo any of it):
//   - the last head_size dimensions of the hidden state are kept for position: the word and
//     token-type embeddings start at zero there, and the position embeddings start as
//     head_size / 2 sinusoid pairs of spread-out frequencies there and zero elsewhere, at the
//     same scale as the words (initializer_range), so the embedding LayerNorm keeps both;
//   - layer 0's head 0 has a query that rotates each pair by one position back and a key that
//     copies it, so its score for position j from position i is a sum of cosines of the
//     frequencies times (i - 1 - j): largest at j = i - 1 and small elsewhere. Head 1 looks one
//     position ahead. `sharpness` scales both scores (3: about 90% of the weight on the
//     neighbour); the other heads and layers keep BERT's initialisation.
#pragma once

#include "nn/models/bert/bert.h"

namespace ember::nn {

struct NeighbourHeadsOptions {
  double sharpness = 3.0;  // the product of the query and key scales: how peaked the two heads start
};

// Re-initialises the embeddings and layer 0's first two heads of `bert` as above. Needs at least
// two heads and an even head size; throws ember::Error naming the sizes otherwise.
void init_neighbour_heads(BertModel& bert, const NeighbourHeadsOptions& options = {});

}  // namespace ember::nn
