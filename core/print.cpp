// Printing tensors the way PyTorch does: nested brackets, one common number format per tensor
// with aligned columns, "..." in place of the middle of large tensors, then shape, dtype, device
// and autograd status.
#include "core/print.h"

#include <cmath>
#include <ostream>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/copy.h"

namespace ember {
namespace {

// Above this many elements a tensor is summarised: each dim shows its first and last
// kEdgeItems entries and "..." between them (PyTorch's threshold and edgeitems).
constexpr int64_t kSummaryThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
// Rows of a 1-D block wrap, and suffixes move to a new line, to stay within this width.
constexpr int64_t kLineWidth = 80;
constexpr std::string_view kPrefix = "tensor(";

// The indices shown along a dim of `size`; -1 marks the "..." between the two edges.
std::vector<int64_t> shown_indices(int64_t size, bool summarize) {
  std::vector<int64_t> indices;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) indices.push_back(i);
    indices.push_back(-1);
    for (int64_t i = size - kEdgeItems; i < size; ++i) indices.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i) indices.push_back(i);
  }
  return indices;
}

// Flat offsets (into a contiguous tensor) of the shown elements, in printing order.
void collect_shown(const Shape& sizes, const Shape& strides, size_t dim, int64_t offset, bool summarize,
                   std::vector<int64_t>& out) {
  if (dim == sizes.size()) {
    out.push_back(offset);
    return;
  }
  for (int64_t i : shown_indices(sizes[dim], summarize)) {
    if (i >= 0) collect_shown(sizes, strides, dim + 1, offset + i * strides[dim], summarize, out);
  }
}

// Floating values share one format: four decimals, or scientific notation when the nonzero
// finite magnitudes span more than three orders of magnitude or leave the fixed range.
bool needs_scientific(const std::vector<double>& values) {
  double smallest = INFINITY, largest = 0;
  for (double v : values) {
    if (!std::isfinite(v) || v == 0) continue;
    smallest = std::min(smallest, std::abs(v));
    largest = std::max(largest, std::abs(v));
  }
  if (largest == 0) return false;
  return largest / smallest > 1000 || largest > 1e8 || smallest < 1e-4;
}

std::string format_floating(double v, bool scientific) {
  if (std::isnan(v)) return "nan";  // never "-nan"
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return scientific ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v);
}

// The shown elements of a contiguous CPU tensor as text, in printing order.
std::vector<std::string> format_elements(const Tensor& host, const std::vector<int64_t>& offsets) {
  std::vector<std::string> texts;
  texts.reserve(offsets.size());
  visit_any_dtype(host.dtype(), [&]<class T>() {
    const T* data = host.data_ptr<T>();
    if constexpr (is_floating_element<T>) {
      std::vector<double> values;
      values.reserve(offsets.size());
      for (int64_t offset : offsets) values.push_back(static_cast<double>(data[offset]));
      const bool scientific = needs_scientific(values);
      for (double v : values) texts.push_back(format_floating(v, scientific));
    } else if constexpr (std::is_same_v<T, bool>) {
      for (int64_t offset : offsets) texts.emplace_back(data[offset] ? "True" : "False");
    } else {
      for (int64_t offset : offsets) texts.push_back(fmt::format("{}", data[offset]));
    }
  });
  return texts;
}

// Lays out the elements as nested brackets. `next` walks `texts` in the order collect_shown
// produced them; every element is right-aligned to `width`.
class Layout {
 public:
  Layout(const Shape& sizes, bool summarize, const std::vector<std::string>& texts, size_t width)
      : sizes_(sizes), summarize_(summarize), texts_(texts), width_(width) {}

  std::string block(size_t dim, int64_t indent) {
    const std::vector<int64_t> indices = shown_indices(sizes_[dim], summarize_);
    if (dim + 1 == sizes_.size()) return row(indices, indent);
    std::vector<std::string> parts;
    for (int64_t i : indices) parts.push_back(i < 0 ? std::string("...") : block(dim + 1, indent + 1));
    // Sub-blocks are separated by one line break per dim they span, as in PyTorch.
    const std::string separator =
        fmt::format(",{}{}", std::string(sizes_.size() - dim - 1, '\n'), std::string(indent + 1, ' '));
    return fmt::format("[{}]", fmt::join(parts, separator));
  }

 private:
  std::string row(const std::vector<int64_t>& indices, int64_t indent) {
    const int64_t item_width = static_cast<int64_t>(width_) + 2;  // the value and ", "
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / item_width);
    std::string out = "[";
    int64_t on_line = 0;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (k > 0) {
        if (on_line == per_line) {
          out.append(",\n").append(indent + 1, ' ');
          on_line = 0;
        } else {
          out.append(", ");
        }
      }
      if (indices[k] < 0) {
        out += " ...";
      } else {
        const std::string& text = texts_[next_++];
        out.append(width_ - text.size(), ' ').append(text);
      }
      ++on_line;
    }
    return out + "]";
  }

  const Shape& sizes_;
  bool summarize_;
  const std::vector<std::string>& texts_;
  size_t width_;
  size_t next_ = 0;
};

std::string values_text(const Tensor& tensor) {
  if (tensor.numel() == 0) return "[]";
  Tensor host;
  {
    NoGradGuard no_grad;
    host = tensor.detach().to(kCPU).contiguous();
  }
  const bool summarize = host.numel() > kSummaryThreshold;
  std::vector<int64_t> offsets;
  collect_shown(host.sizes(), host.strides(), 0, 0, summarize, offsets);
  const std::vector<std::string> texts = format_elements(host, offsets);
  if (host.dim() == 0) return texts.front();
  size_t width = 0;
  for (const std::string& text : texts) width = std::max(width, text.size());
  Layout layout(host.sizes(), summarize, texts, width);
  return layout.block(0, static_cast<int64_t>(kPrefix.size()));
}

}  // namespace

std::string to_string(const Tensor& tensor) {
  if (!tensor.defined()) return "tensor(undefined)";
  std::vector<std::string> suffixes;
  if (tensor.dim() > 0) suffixes.push_back("shape=" + shape_str(tensor.sizes()));
  if (tensor.dtype() != kFloat32) suffixes.push_back(fmt::format("dtype={}", tensor.dtype()));
  if (!tensor.is_cpu()) suffixes.push_back(fmt::format("device={}", tensor.device()));
  if (tensor.grad_fn()) {
    suffixes.push_back(fmt::format("grad_fn=<{}>", tensor.grad_fn()->name()));
  } else if (tensor.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }

  std::string out = std::string(kPrefix) + values_text(tensor);
  // A suffix that would push the line past kLineWidth starts a new line instead.
  const size_t last_break = out.rfind('\n');
  int64_t line_length = static_cast<int64_t>(last_break == std::string::npos ? out.size() : out.size() - last_break - 1);
  for (const std::string& suffix : suffixes) {
    const int64_t length = static_cast<int64_t>(suffix.size());
    if (line_length + 2 + length + 1 > kLineWidth) {
      out.append(",\n").append(kPrefix.size(), ' ').append(suffix);
      line_length = static_cast<int64_t>(kPrefix.size()) + length;
    } else {
      out += ", " + suffix;
      line_length += 2 + length;
    }
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << to_string(tensor); }

}  // namespace ember
