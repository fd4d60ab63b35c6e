// safetensors: round trips, byte-exact files, module save/load, atomic writes, and rejection
// of every kind of malformed file without crashing.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "helpers.h"
#include "scratch_files.h"
#include "nn/modules/module.h"
#include "nn/io/safetensors.h"

using namespace ember;
using namespace ember::testing;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string bytes;
  for (T value : values) {
    char buffer[sizeof(T)];
    std::memcpy(buffer, &value, sizeof(T));
    bytes.append(buffer, sizeof(T));
  }
  return bytes;
}

// A file as the format defines it: length, JSON header as given (unpadded), data.
std::string assemble(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

// The row-major bytes of a tensor's elements: compares values exactly, bool and NaN included.
std::string element_bytes(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), c.numel() * element_size(c.dtype()));
}

void check_same_tensor(const Tensor& loaded, const Tensor& original) {
  CHECK(loaded.dtype() == original.dtype());
  CHECK(loaded.sizes() == original.sizes());
  CHECK(loaded.is_cpu());
  CHECK(loaded.is_contiguous());
  CHECK_FALSE(loaded.requires_grad());
  CHECK(element_bytes(loaded) == element_bytes(original));
}

class TinyAffine : public nn::Module {
 public:
  TinyAffine() : Module("TinyAffine") {
    weight = register_parameter("weight", randn({3, 4}));
    bias = register_parameter("bias", randn({3}));
  }
  Tensor forward(const Tensor& x) { return add(matmul(x, weight.t()), bias); }
  Tensor weight, bias;
};

class TinyWide : public nn::Module {
 public:
  TinyWide() : Module("TinyWide") {
    weight = register_parameter("weight", randn({5, 4}));
    bias = register_parameter("bias", randn({5}));
  }
  Tensor weight, bias;
};

// A valid file holding every dtype and metadata: the starting point of the corruption tests.
nn::StateDict sample_state() {
  manual_seed(7);
  return {
      {"bias", randn({3})},
      {"flags", tensor<bool>({true, false, true, true}, {2, 2})},
      {"ids", tensor<int64_t>({1, -2, 3}, {3})},
      {"weight", randn({2, 3}, kFloat64)},
  };
}

}  // namespace

TEST_CASE("round trip of every dtype, 0-d, empty and non-contiguous tensors") {
  ScratchDir dir("safetensors");
  manual_seed(1);
  Tensor parameter = randn({4, 3});
  parameter.requires_grad_(true);
  const nn::StateDict state = {
      {"f32", randn({3, 4})},
      {"f32.parameter", parameter},
      {"f64.transposed", randn({2, 3}, kFloat64).t()},
      {"i64", tensor<int64_t>({0, -1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()},
                              {2, 2})},
      {"bool.transposed", gt(randn({3, 2}), 0.0).t()},
      {"scalar", scalar_tensor(3.5, kFloat64)},
      {"scalar.bool", scalar_tensor(1.0, kBool)},
      {"empty", zeros({0, 3})},
      {"empty.i64", zeros({2, 0}, kInt64)},
      {"strided", arange(12.0).slice(0, 1, 12, 3)},
      {"nan.inf", tensor<float>({std::nanf(""), INFINITY, -INFINITY, -0.0f}, {4})},
  };
  REQUIRE_FALSE(state.at("f64.transposed").is_contiguous());
  REQUIRE_FALSE(state.at("strided").is_contiguous());
  const std::string path = dir.file("state.safetensors");
  nn::save_safetensors(path, state);
  const nn::StateDict loaded = nn::load_safetensors(path);
  REQUIRE(loaded.size() == state.size());
  for (const auto& [name, original] : state) {
    INFO("tensor ", name);
    REQUIRE(loaded.contains(name));
    check_same_tensor(loaded.at(name), original);
  }
  // The data section is 8-byte aligned, as the reference writer pads it.
  const std::string bytes = read_bytes(path);
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK(header_length % 8 == 0);
}

TEST_CASE("an empty state dict round trips") {
  ScratchDir dir("safetensors");
  const std::string path = dir.file("empty.safetensors");
  nn::save_safetensors(path, {});
  CHECK(read_bytes(path) == le64(8) + "{}      ");
  CHECK(nn::load_safetensors(path).empty());
}

TEST_CASE("metadata round trips, and is cleared when a file has none") {
  ScratchDir dir("safetensors");
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quotes \" and \\ backslashes, ünïcödé, new\nline"}, {"", "empty key"}};
  const std::string path = dir.file("meta.safetensors");
  nn::save_safetensors(path, {{"x", ones({2})}}, metadata);
  std::map<std::string, std::string> read_back = {{"stale", "entry"}};
  const nn::StateDict loaded = nn::load_safetensors(path, &read_back);
  CHECK(read_back == metadata);
  check_same_tensor(loaded.at("x"), ones({2}));

  const std::string plain = dir.file("plain.safetensors");
  nn::save_safetensors(plain, {{"x", ones({2})}});
  CHECK(read_bytes(plain).find("__metadata__") == std::string::npos);
  nn::load_safetensors(plain, &read_back);
  CHECK(read_back.empty());
}

TEST_CASE("a file assembled by hand from the format loads, and ember writes exactly those bytes") {
  ScratchDir dir("safetensors");
  // {"a": F32 [2] = 1, 2}: 54 bytes of JSON padded with two spaces to 56.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  )";
  REQUIRE(header.size() == 56);
  const std::string expected = le64(56) + header + std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  const std::string hand_made = dir.file("hand.safetensors");
  write_bytes(hand_made, expected);
  const nn::StateDict loaded = nn::load_safetensors(hand_made);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded.at("a").dtype() == kFloat32);
  CHECK(loaded.at("a").sizes() == Shape{2});
  CHECK(loaded.at("a").to_vector<float>() == std::vector<float>{1.0f, 2.0f});

  const std::string written = dir.file("written.safetensors");
  nn::save_safetensors(written, {{"a", tensor<float>({1.0f, 2.0f}, {2})}});
  CHECK(read_bytes(written) == expected);
}

TEST_CASE("BF16 and F16 tensors: a hand-made file loads bit for bit, round trips, and loads into a float32 model") {
  ScratchDir dir("safetensors");
  // bf16 1.0 = 0x3f80, -2.5 = 0xc020; f16 1.0 = 0x3c00, 65504 = 0x7bff; little-endian.
  const std::string header =
      R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"h":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})";
  const std::string data("\x80\x3f\x20\xc0\x00\x3c\xff\x7b", 8);
  const std::string hand_made = dir.file("half.safetensors");
  write_bytes(hand_made, assemble(header, data));
  const nn::StateDict loaded = nn::load_safetensors(hand_made);
  CHECK(loaded.at("b").dtype() == kBFloat16);
  CHECK(loaded.at("h").dtype() == kFloat16);
  CHECK(loaded.at("b").to_vector<float>() == std::vector<float>{1.0f, -2.5f});
  CHECK(loaded.at("h").to_vector<float>() == std::vector<float>{1.0f, 65504.0f});

  const std::string written = dir.file("written.safetensors");
  nn::save_safetensors(written, loaded);
  const nn::StateDict again = nn::load_safetensors(written);
  for (const char* name : {"b", "h"}) check_same_tensor(again.at(name), loaded.at(name));

  // Weights shared in bfloat16, as most downloaded checkpoints are, load into a float32 model.
  manual_seed(3);
  TinyAffine source;
  const std::string half_path = dir.file("affine_bf16.safetensors");
  nn::StateDict halved;
  for (const auto& [name, value] : source.state_dict()) halved[name] = value.to(kBFloat16);
  nn::save_safetensors(half_path, halved);
  TinyAffine target;
  nn::load(target, half_path);
  CHECK(target.weight.dtype() == kFloat32);
  CHECK(element_bytes(target.weight) == element_bytes(halved.at("weight").to(kFloat32)));
}

TEST_CASE("files from other writers: unpadded header, any key order, data not in name order") {
  ScratchDir dir("safetensors");
  // The reference writer orders data by alignment, so names and offsets need not agree.
  const std::string header =
      R"({"z":{"shape":[2],"data_offsets":[0,16],"dtype":"I64"},)"
      R"( "a" : {"dtype":"BOOL","shape":[3],"data_offsets":[24,27], "extra": "ignored"},)"
      R"("m":{"dtype":"F64","shape":[],"data_offsets":[16,24]},)"
      R"("__metadata__":{"format":"pt"}})";
  const std::string path = dir.file("other.safetensors");
  write_bytes(path, assemble(header, raw<int64_t>({7, -9}) + raw<double>({0.25}) + std::string("\x01\x00\x01", 3)));
  std::map<std::string, std::string> metadata;
  const nn::StateDict loaded = nn::load_safetensors(path, &metadata);
  CHECK(metadata == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(loaded.at("z").to_vector<int64_t>() == std::vector<int64_t>{7, -9});
  CHECK(loaded.at("m").dim() == 0);
  CHECK(loaded.at("m").item<double>() == 0.25);
  CHECK(loaded.at("a").dtype() == kBool);
  CHECK(loaded.at("a").to_vector<bool>() == std::vector<bool>{true, false, true});
}

TEST_CASE("a saved module reloads into a fresh one with identical outputs") {
  ScratchDir dir("safetensors");
  manual_seed(3);
  TinyAffine trained;
  const std::string path = dir.file("module.safetensors");
  nn::save(trained, path);

  TinyAffine fresh;  // different random initial values
  const Tensor x = randn({2, 4});
  CHECK(element_bytes(fresh.forward(x)) != element_bytes(trained.forward(x)));
  const Tensor weight_handle = fresh.weight;
  nn::load(fresh, path);
  CHECK(element_bytes(fresh.forward(x)) == element_bytes(trained.forward(x)));
  CHECK(element_bytes(weight_handle) == element_bytes(trained.weight));  // loaded in place
  CHECK(fresh.weight.requires_grad());

  // Key and shape errors come from load_state_dict.
  const std::string partial = dir.file("partial.safetensors");
  nn::save_safetensors(partial, {{"weight", randn({3, 4})}, {"extra", zeros({1})}});
  CHECK_THROWS_WITH_ALL(nn::load(fresh, partial), "TinyAffine.load_state_dict", "missing keys [bias]",
                        "unexpected keys [extra]");
  TinyWide wide;
  CHECK_THROWS_WITH_ALL(nn::load(wide, path), "TinyWide.load_state_dict", "'bias'", "[3]", "[5]");

  // Non-strict: only the keys present are loaded.
  TinyAffine other;
  nn::load(other, partial, /*strict=*/false);
  CHECK(element_bytes(other.weight) == element_bytes(nn::load_safetensors(partial).at("weight")));
}

TEST_CASE("writes are atomic: no temporary files stay, an existing file is replaced whole") {
  ScratchDir dir("safetensors");
  const std::string path = dir.file("model.safetensors");
  nn::save_safetensors(path, {{"big", zeros({1000})}, {"other", ones({10}, kInt64)}});
  const auto big_size = fs::file_size(path);
  nn::save_safetensors(path, {{"small", ones({2})}});
  CHECK(fs::file_size(path) < big_size);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
  const nn::StateDict loaded = nn::load_safetensors(path);
  REQUIRE(loaded.size() == 1);
  check_same_tensor(loaded.at("small"), ones({2}));

  // A failed save leaves the old file untouched and nothing beside it.
  const std::string before = read_bytes(path);
  CHECK_THROWS_WITH_ALL(nn::save_safetensors(path, {{"a", ones({2})}, {"b", Tensor()}}), "save_safetensors",
                        path.c_str(), "tensor 'b' is undefined");
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});

  // Renaming onto a directory fails after the temporary was written: it must be removed.
  fs::create_directory(dir.file("a_directory"));
  const std::string onto_directory = dir.file("a_directory");
  CHECK_THROWS_WITH_ALL(nn::save_safetensors(onto_directory, {{"a", ones({2})}}), "save_safetensors",
                        "cannot replace", onto_directory.c_str(), "directory");
  CHECK(dir.entries() == std::vector<std::string>{"a_directory", "model.safetensors"});
}

TEST_CASE("save errors name the path and the problem") {
  ScratchDir dir("safetensors");
  const std::string missing_dir = dir.file("no/such/dir/model.safetensors");
  CHECK_THROWS_WITH_ALL(nn::save_safetensors(missing_dir, {{"a", ones({1})}}), "save_safetensors",
                        "cannot create the temporary file", missing_dir.c_str(), "No such file or directory");
  const std::string path = dir.file("model.safetensors");
  CHECK_THROWS_WITH_ALL(nn::save_safetensors(path, {{"__metadata__", ones({1})}}), "save_safetensors",
                        "\"__metadata__\" is reserved");
  CHECK_THROWS_WITH_ALL(nn::save_safetensors(path, {{"bad\xff name", ones({1})}}), "save_safetensors",
                        "not valid UTF-8");
  CHECK(dir.entries().empty());
}

TEST_CASE("load rejects malformed files with a message naming the file, the problem and the tensor") {
  ScratchDir dir("safetensors");
  const std::string path = dir.file("bad.safetensors");
  const auto expect_error = [&](const std::string& bytes, std::initializer_list<const char*> fragments) {
    write_bytes(path, bytes);
    bool thrown = false;
    try {
      nn::load_safetensors(path);
    } catch (const Error& error) {
      thrown = true;
      const std::string message = error.what();
      CHECK_MESSAGE(message.find(path) != std::string::npos, message);
      for (const char* fragment : fragments) {
        CHECK_MESSAGE(message.find(fragment) != std::string::npos,
                      "\"" << message << "\" lacks \"" << std::string(fragment) << "\"");
      }
    }
    CHECK_MESSAGE(thrown, "no error for bytes of size " << bytes.size());
  };
  const std::string two_floats = raw<float>({1.0f, 2.0f});
  const auto one_tensor = [&](const std::string& info) { return assemble(R"({"a":)" + info + "}", two_floats); };

  SUBCASE("a missing file") {
    const std::string missing = dir.file("missing.safetensors");
    CHECK_THROWS_WITH_ALL(nn::load_safetensors(missing), "load_safetensors", "cannot open", missing.c_str(),
                          "No such file or directory");
  }
  SUBCASE("not a regular file") {
    CHECK_THROWS_WITH_ALL(nn::load_safetensors(dir.file("")), "load_safetensors", "not a regular file");
  }
  SUBCASE("shorter than the length field") {
    expect_error("", {"has 0 bytes, fewer than the 8-byte header length"});
    expect_error(std::string("\x02\x00\x00", 3), {"has 3 bytes"});
  }
  SUBCASE("a header length past the end of the file") {
    expect_error(le64(100) + "{}", {"header length 100 runs past the end of the file", "2 bytes follow"});
  }
  SUBCASE("an absurd header length") {
    expect_error(le64(uint64_t(1) << 62) + "{}", {"header length 4611686018427387904 is beyond the"});
    expect_error(std::string(8, '\xff') + "{}", {"is beyond the"});
  }
  SUBCASE("invalid JSON") {
    expect_error(assemble("{\"a\": {", ""), {"the header is not valid JSON", "parse error"});
    expect_error(assemble("garbage!", ""), {"not valid JSON"});
    expect_error(assemble("", ""), {"not valid JSON"});
    expect_error(assemble("{\"\xff\": 1}", ""), {"not valid JSON"});
  }
  SUBCASE("a header that is not an object") {
    expect_error(assemble("[1, 2]", ""), {"the header is a JSON array; expected an object"});
    expect_error(assemble(R"({"a": [1, 2]})", two_floats), {"tensor 'a' is described by a JSON array"});
  }
  SUBCASE("bad metadata") {
    expect_error(assemble(R"({"__metadata__": [1]})", ""), {"\"__metadata__\" is a JSON array"});
    expect_error(assemble(R"({"__metadata__": {"epoch": 3}})", ""),
                 {"metadata 'epoch' is a JSON number", "must be strings"});
  }
  SUBCASE("dtypes") {
    expect_error(one_tensor(R"({"dtype":"F33","shape":[2],"data_offsets":[0,8]})"),
                 {"tensor 'a' has unknown dtype \"F33\""});
    expect_error(one_tensor(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})"), {"tensor 'a' has no \"dtype\""});
    expect_error(one_tensor(R"({"shape":[2],"data_offsets":[0,8]})"), {"tensor 'a' has no \"dtype\""});
    for (const char* code : {"I32", "U8", "F8_E4M3", "I16"}) {
      INFO(code);
      write_bytes(path, one_tensor(fmt::format(R"({{"dtype":"{}","shape":[2],"data_offsets":[0,8]}})", code)));
      const std::string unsupported = std::string("unsupported dtype ") + code;
      CHECK_THROWS_WITH_ALL(nn::load_safetensors(path), "load_safetensors", path.c_str(), "tensor 'a'",
                            unsupported.c_str(), "F32, F64, BF16, F16, I64 and BOOL");
    }
  }
  SUBCASE("shapes") {
    expect_error(one_tensor(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"),
                 {"tensor 'a' has negative size -2"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"),
                 {"tensor 'a' has shape entry 2.0; expected an integer"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), {"expected an integer"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})"),
                 {"expected an integer"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), {"tensor 'a' has no \"shape\""});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                 {"tensor 'a'", "element count overflows"});
    // Element counts that fit but whose byte counts do not.
    expect_error(one_tensor(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]})"),
                 {"tensor 'a'", "needs more than 2^64"});
  }
  SUBCASE("data_offsets") {
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
                 {"tensor 'a' has data_offsets [0, 4] covering 4 bytes, but shape [2] of F32 needs 8"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), {"end before they begin"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"),
                 {"tensor 'a' needs \"data_offsets\" as two non-negative integers, got [-8,0]"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,16]})"), {"two non-negative integers"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2]})"), {"\"data_offsets\"", "got nothing"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})"),
                 {"tensor 'a' has data_offsets [8, 16] beyond the 8-byte data section"});
    expect_error(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,0]})"),
                 {"end before they begin"});
  }
  SUBCASE("overlaps, gaps and unclaimed bytes") {
    expect_error(assemble(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two_floats),
                 {"tensor 'b' (bytes [4, 8]) overlaps tensor 'a' (bytes [0, 8])"});
    expect_error(assemble(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two_floats),
                 {"4 unclaimed bytes lie before tensor 'a'"});
    expect_error(assemble(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", two_floats),
                 {"the data section holds 8 bytes but the tensors describe only 4"});
    expect_error(assemble(R"({})", two_floats), {"describe only 0"});
  }
  SUBCASE("a BOOL byte other than 0 or 1") {
    expect_error(assemble(R"({"a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\x01\x00\x02", 3)),
                 {"BOOL tensor 'a' holds byte 2 at element 2"});
  }
  SUBCASE("a valid file truncated at several points") {
    const std::string valid = dir.file("valid.safetensors");
    nn::save_safetensors(valid, sample_state(), {{"format", "pt"}});
    const std::string bytes = read_bytes(valid);
    expect_error(bytes.substr(0, 4), {"fewer than the 8-byte"});
    expect_error(bytes.substr(0, 8), {"runs past the end of the file"});
    expect_error(bytes.substr(0, 40), {"runs past the end of the file", "truncated"});
    expect_error(bytes.substr(0, bytes.size() - 1), {"tensor 'weight'", "beyond the", "truncated"});
    expect_error(bytes.substr(0, bytes.size() - 48), {"truncated"});
    expect_error(bytes + "x", {"describe only"});
  }
}

TEST_CASE("a header nested a hundred thousand levels deep is refused, not a stack overflow") {
  // Parsing such JSON works, but writing a value of it back (for an error message) recursed once
  // per level and overflowed the stack.
  ScratchDir dir("safetensors");
  const std::string path = dir.file("deep.safetensors");
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  write_bytes(path, assemble(R"({"a":{"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,8]}})",
                             raw<float>({1.0f, 2.0f})));
  CHECK_THROWS_WITH_ALL(nn::load_safetensors(path), "load_safetensors", path.c_str(), "nested deeper than");
}

TEST_CASE("flipped and truncated bytes at every position load or throw ember::Error, never crash") {
  ScratchDir dir("safetensors");
  const std::string valid = dir.file("valid.safetensors");
  const nn::StateDict state = sample_state();
  nn::save_safetensors(valid, state, {{"format", "pt"}});
  const std::string bytes = read_bytes(valid);
  const std::string path = dir.file("mutated.safetensors");
  int loaded = 0, rejected = 0;
  const auto try_load = [&](const std::string& mutated) {
    write_bytes(path, mutated);
    try {
      const nn::StateDict result = nn::load_safetensors(path);
      // Whatever loads must be usable: touch every element.
      for (const auto& [name, t] : result) (void)element_bytes(t);
      ++loaded;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& other) {
      FAIL("a non-ember exception escaped: " << other.what());
    }
  };
  for (size_t position = 0; position < bytes.size(); ++position) {
    for (unsigned char mask : {0x01, 0x10, 0x80, 0xff}) {
      std::string mutated = bytes;
      mutated[position] = static_cast<char>(static_cast<unsigned char>(mutated[position]) ^ mask);
      try_load(mutated);
    }
    for (char replacement : {'0', '9', '-', '"', '[', '}', ' '}) {
      std::string mutated = bytes;
      mutated[position] = replacement;
      try_load(mutated);
    }
    try_load(bytes.substr(0, position));
  }
  // Both outcomes occur: flips inside float data load, flips in the structure are rejected.
  CHECK(loaded > 0);
  CHECK(rejected > 0);
}
