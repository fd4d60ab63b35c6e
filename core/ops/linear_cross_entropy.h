// linear_cross_entropy: cross_entropy(linear(x, weight), targets) without ever holding the whole
// logits. A language model's output layer maps every position to a score per vocabulary entry,
// and for GPT-2 (50,257 entries) those logits and their gradient are the largest tensors of a
// training step: batch x context x vocab, 3.3 GB each in float32 for 16 sequences of 1024 tokens.
//
// The rows are taken a chunk at a time. For each chunk the forward computes the logits, the
// losses and, when a gradient will be needed, the chunk's gradient with respect to the logits
// (softmax minus the target, which is fully known once the row's log-sum-exp is), and
// immediately folds it into the gradients of x and weight. The chunk's logits are then
// dropped. The backward has only to scale the two gradients by the loss's own gradient, so the
// three products a linear layer costs (one forward, two backward) are done once each, as
// without chunking, and the memory for logits is one chunk's.
#pragma once

#include "core/ops/cross_entropy.h"

namespace ember {

// The rows of logits one chunk holds by default: 2^25 elements / vocab (128 MiB of float32).
int64_t default_cross_entropy_chunk_rows(int64_t classes);

// x [..., in], weight [classes, in] (no bias), int64 targets [...]. Equal in value and gradient to
// cross_entropy(linear(x, weight), targets, options), under autocast too. Reduction::Mean and
// Reduction::Sum run in chunks of `chunk_rows` rows (0: the default above); Reduction::None,
// whose per-row losses each take their own gradient, is the plain composition. Differentiable
// twice: a backward under create_graph is written with differentiable ops over the whole logits.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            CrossEntropyOptions options = {}, int64_t chunk_rows = 0);

}  // namespace ember
