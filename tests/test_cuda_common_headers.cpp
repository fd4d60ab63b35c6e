// The folder rule of cuda/common/: its headers are read by nvcc, so none of them reaches, through
// any chain of the repository's own includes, fmt (nvcc cannot evaluate its consteval format
// strings), core/tensor.h (which includes fmt) or nn/ (cuda/ knows no layer above core/). Reads
// the source files; needs no GPU and no nvcc.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = EMBER_SOURCE_DIR;

// The includes of a file: quoted ones (the repository's, from its root) and angled ones.
struct Includes {
  std::vector<std::string> quoted;
  std::vector<std::string> angled;
};

Includes includes_of(const fs::path& file) {
  static const std::regex include_line(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  Includes found;
  std::ifstream in(file);
  REQUIRE_MESSAGE(in, "cannot read " << file.string());
  std::string line;
  std::smatch match;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, match, include_line)) continue;
    (match[1] == "\"" ? found.quoted : found.angled).push_back(match[2]);
  }
  return found;
}

// What is wrong with one header of cuda/common/: every forbidden include reachable from it, as
// "chain -> include".
std::vector<std::string> forbidden_reach(const std::string& header) {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  std::vector<std::pair<std::string, std::string>> pending{{header, header}};  // file, chain to it
  while (!pending.empty()) {
    const auto [file, chain] = pending.back();
    pending.pop_back();
    if (!seen.insert(file).second) continue;
    const Includes includes = includes_of(kRoot / file);
    for (const std::string& system : includes.angled) {
      if (system.starts_with("fmt/")) problems.push_back(chain + " -> <" + system + ">");
    }
    for (const std::string& own : includes.quoted) {
      if (own.starts_with("fmt/") || own == "core/tensor.h" || own.starts_with("nn/")) {
        problems.push_back(chain + " -> \"" + own + "\"");
        continue;
      }
      if (fs::exists(kRoot / own)) pending.emplace_back(own, chain + " -> " + own);
    }
  }
  return problems;
}

}  // namespace

TEST_CASE("no header of cuda/common/ reaches fmt, core/tensor.h or nn/") {
  int headers = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(kRoot / "cuda/common")) {
    const std::string name = "cuda/common/" + entry.path().filename().string();
    ++headers;
    for (const std::string& problem : forbidden_reach(name)) FAIL_CHECK(problem);
  }
  CHECK(headers > 0);
}

TEST_CASE("the include walk finds a forbidden include through a chain") {
  // core/ops/reduce.h includes core/tensor.h: the walk must report it, or the case above
  // would pass for a walk that reads nothing.
  const std::vector<std::string> problems = forbidden_reach("core/ops/reduce.h");
  REQUIRE(!problems.empty());
  CHECK(problems.front().find("core/tensor.h") != std::string::npos);
}
