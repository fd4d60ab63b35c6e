// Refusing paths that are not regular files before a loader opens them.
#include "nn/io/regular_file.h"

#include <sys/stat.h>

#include "core/error.h"

namespace ember {

void check_regular_file(const std::string& path, std::string_view who) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return;
  EMBER_CHECK(S_ISREG(status.st_mode), "{}: '{}' is not a regular file", who, path);
}

}  // namespace ember
