// Atomic writes with POSIX calls: the fsync before the rename is what makes them survive a crash.
#include "nn/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace ember::nn {
namespace {

// The temporary file lives beside the target, so the rename stays within one file system
// (and is atomic); pid and counter keep concurrent writers of the same path apart.
std::string temporary_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter.fetch_add(1));
}

std::string os_error(int code) { return std::strerror(code); }

}  // namespace

void create_directory(const std::string& directory) {
  if (directory.empty()) return;  // the current directory
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) fail("create_directory: cannot create '{}': {}", directory, error.message());
  EMBER_CHECK(std::filesystem::is_directory(directory), "create_directory: '{}' exists but is not a directory",
              directory);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  EMBER_CHECK(!path.empty(), "write_file_atomically: empty path");
  create_directory(std::filesystem::path(path).parent_path().string());

  const std::string temporary = temporary_path_for(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("write_file_atomically: cannot create '{}' for '{}': {}", temporary, path, os_error(errno));

  auto give_up = [&](const char* what, int code) {
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    fail("write_file_atomically: {} '{}' failed: {}", what, path, os_error(code));
  };
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      give_up("writing", errno);
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  if (::fsync(fd) != 0) give_up("flushing", errno);
  if (::close(fd) != 0) {
    const int code = errno;
    ::unlink(temporary.c_str());
    fail("write_file_atomically: closing '{}' failed: {}", path, os_error(code));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int code = errno;
    ::unlink(temporary.c_str());
    fail("write_file_atomically: cannot replace '{}': {}", path, os_error(code));
  }
}

}  // namespace ember::nn
