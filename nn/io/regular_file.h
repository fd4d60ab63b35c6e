// The check every file loader makes before it opens a path to read: opening a FIFO waits for a
// writer that may never come, and a device may never end, so anything but a regular file is
// refused first.
#pragma once

#include <string>
#include <string_view>

namespace ember {

// Throws, naming `who` and `path`, when `path` exists and is not a regular file (a FIFO, a
// directory, a device); a missing path is left to the open that follows, which reports it.
void check_regular_file(const std::string& path, std::string_view who);

}  // namespace ember
