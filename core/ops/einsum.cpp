// einsum: parses an explicit equation and lowers it to sum, permute, reshape and one batched
// matmul, so it is differentiable through those ops and needs no kernel of its own.
#include "core/ops/einsum.h"

#include <algorithm>
#include <array>
#include <string>

#include "core/autocast.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/views.h"

namespace ember {
namespace {

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

Equation parse(std::string_view equation, size_t operand_count) {
  std::string text;
  for (char c : equation) {
    if (c != ' ') text.push_back(c);
  }
  EMBER_CHECK(text.find("...") == std::string::npos, "einsum: \"{}\": ellipsis (...) is not supported; name every dim",
              equation);
  const size_t arrow = text.find("->");
  EMBER_CHECK(arrow != std::string::npos && text.find("->", arrow + 2) == std::string::npos,
              "einsum: \"{}\" must have the explicit form \"in1,in2->out\" with one \"->\"", equation);
  Equation parsed;
  parsed.output = text.substr(arrow + 2);
  const std::string lhs = text.substr(0, arrow);
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    parsed.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  EMBER_CHECK(parsed.inputs.size() <= 2, "einsum: \"{}\" has {} operands; only one or two are supported", equation,
              parsed.inputs.size());
  EMBER_CHECK(parsed.inputs.size() == operand_count, "einsum: \"{}\" names {} operand(s) but {} were given",
              equation, parsed.inputs.size(), operand_count);
  for (size_t i = 0; i <= parsed.inputs.size(); ++i) {
    const std::string& term = i < parsed.inputs.size() ? parsed.inputs[i] : parsed.output;
    const std::string what = i < parsed.inputs.size() ? fmt::format("operand {}", i) : std::string("the output");
    for (size_t j = 0; j < term.size(); ++j) {
      EMBER_CHECK(is_letter(term[j]), "einsum: \"{}\": invalid character '{}' in {} (expected letters)", equation,
                  term[j], what);
      EMBER_CHECK(term.find(term[j], j + 1) == std::string::npos,
                  "einsum: \"{}\": letter '{}' repeats in {}; repeated letters (diagonals) are not supported",
                  equation, term[j], what);
    }
  }
  for (char c : parsed.output) {
    const bool in_some_input = std::any_of(parsed.inputs.begin(), parsed.inputs.end(),
                                           [c](const std::string& term) { return term.find(c) != std::string::npos; });
    EMBER_CHECK(in_some_input, "einsum: \"{}\": output letter '{}' appears in no operand", equation, c);
  }
  return parsed;
}

bool has(const std::string& term, char c) { return term.find(c) != std::string::npos; }

// Position of each letter of `order` in `term`.
Shape positions(const std::string& term, const std::string& order) {
  Shape dims;
  for (char c : order) dims.push_back(static_cast<int64_t>(term.find(c)));
  return dims;
}

// Sums x (labelled by `term`) over its letters missing from both `keep1` and `keep2`, and
// returns it with the remaining letters in `term`.
Tensor sum_unused(const Tensor& x, std::string& term, const std::string& keep1, const std::string& keep2) {
  Shape dims;
  std::string kept;
  for (size_t d = 0; d < term.size(); ++d) {
    if (has(keep1, term[d]) || has(keep2, term[d])) {
      kept.push_back(term[d]);
    } else {
      dims.push_back(static_cast<int64_t>(d));
    }
  }
  if (dims.empty()) return x;
  term = kept;
  return sum(x, dims);
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands) {
  if (auto cast = autocast::product_operands(operands)) return einsum(equation, *cast);
  Equation eq = parse(equation, operands.size());
  std::array<int64_t, 128> letter_size;
  letter_size.fill(-1);
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& x = operands[i];
    EMBER_CHECK(x.defined(), "einsum: operand {} is undefined", i);
    EMBER_CHECK(x.dim() == static_cast<int64_t>(eq.inputs[i].size()),
                "einsum: \"{}\": operand {} has shape {} ({} dims) but \"{}\" names {} dims", equation, i,
                shape_str(x.sizes()), x.dim(), eq.inputs[i], eq.inputs[i].size());
    for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
      int64_t& size = letter_size[static_cast<unsigned char>(eq.inputs[i][d])];
      EMBER_CHECK(size == -1 || size == x.sizes()[d],
                  "einsum: \"{}\": letter '{}' has size {} in one operand and {} in operand {} (shape {})", equation,
                  eq.inputs[i][d], size, x.sizes()[d], i, shape_str(x.sizes()));
      size = x.sizes()[d];
    }
  }

  if (operands.size() == 1) {
    std::string term = eq.inputs[0];
    const Tensor reduced = sum_unused(operands[0], term, eq.output, "");
    return permute(reduced, positions(term, eq.output));
  }

  // Letters only one operand has and the output lacks are summed away first; the rest are
  // batch (both operands and the output), contracted (both operands only), or free (one
  // operand and the output).
  std::string left = eq.inputs[0], right = eq.inputs[1];
  const Tensor a = sum_unused(operands[0], left, eq.output, right);
  const Tensor b = sum_unused(operands[1], right, eq.output, left);
  std::string batch, contracted, left_free, right_free;
  for (char c : left) {
    if (has(right, c)) {
      (has(eq.output, c) ? batch : contracted).push_back(c);
    } else {
      left_free.push_back(c);
    }
  }
  for (char c : right) {
    if (!has(left, c)) right_free.push_back(c);
  }
  auto size_of = [&](const std::string& letters) {
    int64_t n = 1;
    for (char c : letters) n *= letter_size[static_cast<unsigned char>(c)];
    return n;
  };
  Shape batch_shape;
  for (char c : batch) batch_shape.push_back(letter_size[static_cast<unsigned char>(c)]);

  // a -> [*batch, M, K] and b -> [*batch, K, N]. The batch dims stay separate, so matmul reads
  // them with their own strides: permuted operands (as in attention) need no copy unless the
  // free or contracted letters themselves cannot be merged.
  auto as_batched_matrix = [&](const Tensor& x, const std::string& term, const std::string& rows,
                               const std::string& cols) {
    Tensor permuted = permute(x, positions(term, batch + rows + cols));
    Shape shape = batch_shape;
    shape.push_back(size_of(rows));
    shape.push_back(size_of(cols));
    return reshape(permuted, shape);
  };
  const Tensor product =
      matmul(as_batched_matrix(a, left, left_free, contracted), as_batched_matrix(b, right, contracted, right_free));

  // [*batch, M, N] -> [*batch, *left_free, *right_free] -> the output's order.
  const std::string produced = batch + left_free + right_free;
  Shape produced_shape;
  for (char c : produced) produced_shape.push_back(letter_size[static_cast<unsigned char>(c)]);
  return permute(reshape(product, produced_shape), positions(produced, eq.output));
}

}  // namespace ember
