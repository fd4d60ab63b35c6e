// ember::Error, the one exception type ember throws for bad input, and the checks that raise it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ember {

// Every user-facing failure is an Error whose message names the op or module and the
// operands involved, e.g. "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws an Error with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ember

// EMBER_CHECK(condition, "op: message {}", args...) throws ember::Error when condition is false.
// A macro so the message is only formatted on failure.
#define EMBER_CHECK(condition, ...)     \
  do {                                  \
    if (!(condition)) [[unlikely]] {    \
      ::ember::fail(__VA_ARGS__);       \
    }                                   \
  } while (0)
