// The tutorials the guide retraces, one file each; main.cpp runs them in this order, from one
// seed, and fails if any check did.
#pragma once

namespace ember::from_pytorch_tutorials {

void chapter_three();              // [000, 001] "NLP with Transformers", chapter 3: nlp_with_transformers.cpp
void attention_is_all_you_need();  // [002] "Attention Is All You Need" from scratch: attention_is_all_you_need.cpp
void einsum_notebooks();           // [003, 004] einsum self-attention, Peter Bloem's classifier: einsum_notebooks.cpp

}  // namespace ember::from_pytorch_tutorials
