// einsum for the contractions attention code is written with, built on permute, reshape and
// bmm: "nqhd,nkhd->nhqk", "nhql,nlhd->nqhd", "bij,bjk->bik", "ij,jk->ik", "bhqd,bhkd->bhqk"...
#pragma once

#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace ember {

// Explicit form "in1,in2->out" with one letter (a-z, A-Z) per dim. Letters in both inputs but
// not the output are summed over; letters in one input only and not the output are summed
// first. One or two operands. A letter names dims of equal size in every operand (no
// broadcasting); repeated letters within one operand (diagonals) and "..." are not supported.
// Two operands become one batched matmul, whose batch dims are read in place with their
// strides, so permuted attention operands are not copied.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

}  // namespace ember
