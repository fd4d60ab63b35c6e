// Reading and writing safetensors files: the header's JSON, the atomic write and the checks
// that keep a malformed file from reaching memory it does not describe.
#include "nn/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "nn/io/json_reader.h"

namespace ember::nn {

// Tensor bytes go to and from the file as they lie in memory.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
static_assert(sizeof(bool) == 1, "safetensors BOOL elements are one byte");

namespace {

using nlohmann::json;

// A header beyond this is a corrupt length field, not a real file: even models with
// thousands of tensors have headers of a few hundred kilobytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeCode {
  std::string_view code;
  DType dtype;
};
constexpr std::array<DTypeCode, 6> kDTypeCodes = {{
    {"F32", kFloat32},
    {"F64", kFloat64},
    {"I64", kInt64},
    {"BOOL", kBool},
    {"BF16", kBFloat16},
    {"F16", kFloat16},
}};
// Dtypes the format defines that ember tensors cannot hold: named as unsupported rather
// than unknown, so the user knows the file is fine and what to convert.
constexpr std::array<std::string_view, 14> kOtherSafetensorsDTypes = {
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "I8", "U8", "I16", "U16", "I32", "U32", "U64", "C64"};

std::string_view code_of(DType dtype) {
  for (const DTypeCode& entry : kDTypeCodes) {
    if (entry.dtype == dtype) return entry.code;
  }
  fail("save_safetensors: dtype {} has no safetensors code", dtype);
}

std::string os_error(int error) { return std::error_code(error, std::generic_category()).message(); }

// Closes a file descriptor on every path out of a scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error that close() can carry (a delayed write failure).
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

// --- writing ---------------------------------------------------------------------------------

void write_all(int fd, const void* data, size_t nbytes, const std::string& path) {
  const char* bytes = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t written = ::write(fd, bytes, nbytes);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("save_safetensors: writing '{}' failed: {}", path, os_error(errno));
    }
    bytes += written;
    nbytes -= static_cast<size_t>(written);
  }
}

// Unique among processes (pid) and among threads of this one (counter), and in the target's
// directory so that the final rename stays within one file system and is atomic.
std::string temporary_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter.fetch_add(1));
}

// --- reading ---------------------------------------------------------------------------------

[[noreturn]] void corrupt(const std::string& path, const std::string& problem) {
  fail("load_safetensors: '{}' is not a valid safetensors file: {}", path, problem);
}

// Reads exactly nbytes at offset; a short read means the file changed under us or lied about
// its size, both reported as corruption rather than returning garbage.
void read_exact(int fd, uint64_t offset, void* data, size_t nbytes, const std::string& path) {
  char* bytes = static_cast<char*>(data);
  while (nbytes > 0) {
    const ssize_t got = ::pread(fd, bytes, nbytes, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("load_safetensors: reading '{}' failed: {}", path, os_error(errno));
    }
    if (got == 0) corrupt(path, fmt::format("the file ended early, at byte {}", offset));
    bytes += got;
    offset += static_cast<uint64_t>(got);
    nbytes -= static_cast<size_t>(got);
  }
}

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;  // byte offsets into the data section
  uint64_t end;
};

DType parse_dtype(const json& info, const std::string& name, const std::string& path) {
  const auto it = info.find("dtype");
  if (it == info.end() || !it->is_string()) corrupt(path, fmt::format("tensor '{}' has no \"dtype\" string", name));
  const std::string& code = it->get_ref<const std::string&>();
  for (const DTypeCode& entry : kDTypeCodes) {
    if (entry.code == code) return entry.dtype;
  }
  if (std::find(kOtherSafetensorsDTypes.begin(), kOtherSafetensorsDTypes.end(), code) !=
      kOtherSafetensorsDTypes.end()) {
    fail("load_safetensors: '{}': tensor '{}' has unsupported dtype {} (ember reads F32, F64, BF16, F16, I64 and BOOL; "
         "convert the tensor before saving)", path, name, code);
  }
  corrupt(path, fmt::format("tensor '{}' has unknown dtype \"{}\"", name, code));
}

Shape parse_shape(const json& info, const std::string& name, const std::string& path) {
  const auto it = info.find("shape");
  if (it == info.end() || !it->is_array()) corrupt(path, fmt::format("tensor '{}' has no \"shape\" array", name));
  Shape shape;
  shape.reserve(it->size());
  // The product of the sizes (zeros counted as ones, as contiguous strides count them) must
  // fit in int64, or the tensor's strides would overflow.
  int64_t stride_product = 1;
  for (const json& size : *it) {
    const std::optional<int64_t> integer = json_to_int64(size);
    if (!integer) corrupt(path, fmt::format("tensor '{}' has shape entry {}; expected an integer", name, size.dump()));
    const int64_t value = *integer;
    if (value < 0) corrupt(path, fmt::format("tensor '{}' has negative size {} in its shape", name, value));
    if (__builtin_mul_overflow(stride_product, std::max<int64_t>(value, 1), &stride_product)) {
      corrupt(path, fmt::format("tensor '{}' has a shape {} whose element count overflows", name, it->dump()));
    }
    shape.push_back(value);
  }
  return shape;
}

TensorEntry parse_entry(const std::string& name, const json& info, const std::string& path) {
  if (!info.is_object()) {
    corrupt(path, fmt::format("tensor '{}' is described by a JSON {}; expected an object with dtype, shape and "
                              "data_offsets", name, info.type_name()));
  }
  TensorEntry entry{name, parse_dtype(info, name, path), parse_shape(info, name, path), 0, 0};

  const auto offsets = info.find("data_offsets");
  const bool pair = offsets != info.end() && offsets->is_array() && offsets->size() == 2;
  const std::optional<uint64_t> begin = pair ? json_to_uint64((*offsets)[0]) : std::nullopt;
  const std::optional<uint64_t> end = pair ? json_to_uint64((*offsets)[1]) : std::nullopt;
  if (!begin || !end) {
    corrupt(path, fmt::format("tensor '{}' needs \"data_offsets\" as two non-negative integers, got {}", name,
                              offsets == info.end() ? std::string("nothing") : offsets->dump()));
  }
  entry.begin = *begin;
  entry.end = *end;
  if (entry.begin > entry.end) {
    corrupt(path, fmt::format("tensor '{}' has data_offsets [{}, {}] that end before they begin", name, entry.begin,
                              entry.end));
  }
  uint64_t nbytes = 0;
  const bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(numel_of(entry.shape)),
                                               static_cast<uint64_t>(element_size(entry.dtype)), &nbytes);
  if (overflow || entry.end - entry.begin != nbytes) {
    corrupt(path, fmt::format("tensor '{}' has data_offsets [{}, {}] covering {} bytes, but shape {} of {} needs {}",
                              name, entry.begin, entry.end, entry.end - entry.begin, shape_str(entry.shape),
                              code_of(entry.dtype), overflow ? std::string("more than 2^64") : std::to_string(nbytes)));
  }
  return entry;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& path) {
  if (!value.is_object()) {
    corrupt(path, fmt::format("\"__metadata__\" is a JSON {}; expected an object of strings", value.type_name()));
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      corrupt(path, fmt::format("metadata '{}' is a JSON {}; metadata values must be strings", key, item.type_name()));
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// The tensors must tile the data section exactly: sorted by offset, each starts where the
// previous one ends, and the last ends at the end of the file.
void check_layout(std::vector<const TensorEntry*> entries, uint64_t data_size, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry* entry : entries) {
    if (entry->begin < covered) {
      corrupt(path, fmt::format("tensor '{}' (bytes [{}, {}]) overlaps tensor '{}' (bytes [{}, {}])", entry->name,
                                entry->begin, entry->end, previous->name, previous->begin, previous->end));
    }
    if (entry->begin > covered) {
      corrupt(path, fmt::format("{} unclaimed bytes lie before tensor '{}' (bytes [{}, {}]); tensors must be stored "
                                "back to back", entry->begin - covered, entry->name, entry->begin, entry->end));
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered != data_size) {
    corrupt(path, fmt::format("the data section holds {} bytes but the tensors describe only {}", data_size, covered));
  }
}

}  // namespace

void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything that can fail on the tensors fails before the file system is touched.
  using ordered_json = nlohmann::ordered_json;
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::vector<Tensor> data;
  data.reserve(tensors.size());
  uint64_t offset = 0;
  {
    NoGradGuard no_grad;
    for (const auto& [name, tensor] : tensors) {
      EMBER_CHECK(name != kMetadataKey, "save_safetensors: '{}': the name \"__metadata__\" is reserved for the "
                  "metadata and cannot name a tensor", path);
      EMBER_CHECK(tensor.defined(), "save_safetensors: '{}': tensor '{}' is undefined", path, name);
      Tensor contiguous_cpu = tensor.detach().to(kCPU).contiguous();
      const uint64_t nbytes = static_cast<uint64_t>(contiguous_cpu.numel()) * element_size(contiguous_cpu.dtype());
      // Key order as the reference writer emits it: dtype, shape, data_offsets.
      ordered_json info = ordered_json::object();
      info["dtype"] = code_of(contiguous_cpu.dtype());
      info["shape"] = contiguous_cpu.sizes();
      info["data_offsets"] = {offset, offset + nbytes};
      header[name] = std::move(info);
      offset += nbytes;
      data.push_back(std::move(contiguous_cpu));
    }
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& error) {
    fail("save_safetensors: '{}': a tensor name or metadata string is not valid UTF-8 ({})", path, error.what());
  }
  // Padding to a multiple of 8 keeps the data section 8-byte aligned in the file, so readers
  // that map the file can view float64 and int64 tensors in place.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::array<unsigned char, 8> length_field{};
  for (size_t i = 0; i < 8; ++i) length_field[i] = static_cast<unsigned char>(uint64_t(header_text.size()) >> (8 * i));

  const std::string temporary = temporary_path_for(path);
  FileDescriptor file(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (file.get() < 0) {
    fail("save_safetensors: cannot create the temporary file '{}' for '{}': {}", temporary, path, os_error(errno));
  }
  try {
    write_all(file.get(), length_field.data(), length_field.size(), path);
    write_all(file.get(), header_text.data(), header_text.size(), path);
    for (const Tensor& tensor : data) {
      const size_t nbytes = static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype());
      if (nbytes > 0) write_all(file.get(), tensor.raw_data(), nbytes, path);
    }
    // On disk before the rename, so a crash leaves either the old file or the whole new one.
    if (::fsync(file.get()) != 0) fail("save_safetensors: flushing '{}' failed: {}", path, os_error(errno));
    if (file.close() != 0) fail("save_safetensors: closing '{}' failed: {}", path, os_error(errno));
    if (before_rename_for_tests) before_rename_for_tests(temporary);
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      fail("save_safetensors: cannot replace '{}' with '{}': {}", path, temporary, os_error(errno));
    }
  } catch (...) {
    if (file.get() >= 0) file.close();
    ::unlink(temporary.c_str());
    throw;
  }
}

StateDict load_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  // O_NONBLOCK: opening a FIFO to read would otherwise wait for a writer before the check of
  // the file's kind below could refuse it. (It changes nothing for the regular file read after.)
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) fail("load_safetensors: cannot open '{}': {}", path, os_error(errno));
  struct stat status {};
  if (::fstat(file.get(), &status) != 0) fail("load_safetensors: cannot stat '{}': {}", path, os_error(errno));
  if (!S_ISREG(status.st_mode)) fail("load_safetensors: '{}' is not a regular file", path);
  const uint64_t file_size = static_cast<uint64_t>(status.st_size);

  if (file_size < 8) {
    corrupt(path, fmt::format("the file has {} bytes, fewer than the 8-byte header length that starts it", file_size));
  }
  std::array<unsigned char, 8> length_field{};
  read_exact(file.get(), 0, length_field.data(), length_field.size(), path);
  uint64_t header_length = 0;
  for (size_t i = 0; i < 8; ++i) header_length |= uint64_t(length_field[i]) << (8 * i);
  if (header_length > kMaxHeaderBytes) {
    corrupt(path, fmt::format("the header length {} is beyond the {}-byte limit (a corrupt length field?)",
                              header_length, kMaxHeaderBytes));
  }
  if (header_length > file_size - 8) {
    corrupt(path, fmt::format("the header length {} runs past the end of the file ({} bytes follow the length "
                              "field; is the file truncated?)", header_length, file_size - 8));
  }
  std::string header_text(header_length, '\0');
  read_exact(file.get(), 8, header_text.data(), header_text.size(), path);

  json header;
  try {
    header = parse_json_nested_at_most(header_text, [&] {
      corrupt(path, fmt::format("the header is nested deeper than {} levels", kMaxJsonNesting));
    });
  } catch (const json::exception& error) {
    corrupt(path, fmt::format("the header is not valid JSON ({})", error.what()));
  }
  if (!header.is_object()) {
    corrupt(path, fmt::format("the header is a JSON {}; expected an object of tensors", header.type_name()));
  }

  std::map<std::string, std::string> file_metadata;
  std::vector<TensorEntry> entries;
  entries.reserve(header.size());
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      file_metadata = parse_metadata(value, path);
    } else {
      entries.push_back(parse_entry(name, value, path));
    }
  }
  const uint64_t data_start = 8 + header_length;
  const uint64_t data_size = file_size - data_start;
  for (const TensorEntry& entry : entries) {
    if (entry.end > data_size) {
      corrupt(path, fmt::format("tensor '{}' has data_offsets [{}, {}] beyond the {}-byte data section (is the "
                                "file truncated?)", entry.name, entry.begin, entry.end, data_size));
    }
  }
  std::vector<const TensorEntry*> layout;
  layout.reserve(entries.size());
  for (const TensorEntry& entry : entries) layout.push_back(&entry);
  check_layout(std::move(layout), data_size, path);

  StateDict tensors;
  for (const TensorEntry& entry : entries) {
    Tensor tensor = make_tensor(entry.shape, entry.dtype, kCPU);
    const size_t nbytes = static_cast<size_t>(entry.end - entry.begin);
    if (nbytes > 0) {
      read_exact(file.get(), data_start + entry.begin, tensor.raw_data(), nbytes, path);
    }
    if (entry.dtype == kBool) {
      // A bool byte other than 0 or 1 is undefined behaviour the moment it is read as bool.
      const auto* bytes = static_cast<const unsigned char*>(tensor.raw_data());
      for (size_t i = 0; i < nbytes; ++i) {
        if (bytes[i] > 1) {
          corrupt(path, fmt::format("BOOL tensor '{}' holds byte {} at element {}; expected 0 or 1", entry.name,
                                    bytes[i], i));
        }
      }
    }
    tensors.emplace(entry.name, std::move(tensor));
  }
  if (metadata != nullptr) *metadata = std::move(file_metadata);
  return tensors;
}

void save(const Module& module, const std::string& path) { save_safetensors(path, module.state_dict()); }

void load(Module& module, const std::string& path, bool strict) {
  module.load_state_dict(load_safetensors(path), strict);
}

}  // namespace ember::nn
