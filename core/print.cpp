// Printing tensors.
#include <ostream>

#include "core/print.h"

namespace ember {
std::ostream& operator<<(std::ostream& out, const Tensor& tensor) { return out << to_string(tensor); }
}  // namespace ember
