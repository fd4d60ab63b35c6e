// The folders' layering, read from the sources' #include lines: each folder includes only the
// folders below it, so a reader can learn core/ without nn/ and a layer without the models built
// from it. (cuda/common/'s own rule, no fmt for nvcc, is test_cuda_common_headers.)
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = EMBER_SOURCE_DIR;

bool is_source(const fs::path& path) {
  static const std::set<std::string> extensions{".h", ".cpp", ".cu", ".cuh"};
  return extensions.contains(path.extension().string());
}

// Every source under `folder`, as a path relative to the repository root ("nn/modules/linear.h").
std::vector<std::string> sources_under(const std::string& folder) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / folder)) {
    if (entry.is_regular_file() && is_source(entry.path())) {
      found.push_back(fs::relative(entry.path(), kRoot).generic_string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// The targets of a file's #include lines: "nn/modules/module.h" for quoted ones, "<fmt/format.h>"
// (with the brackets) for system ones.
std::vector<std::string> includes_of(const std::string& file) {
  static const std::regex include_line(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::ifstream in(kRoot / file);
  std::vector<std::string> targets;
  std::string line;
  std::smatch match;
  while (std::getline(in, line)) {
    if (std::regex_search(line, match, include_line)) {
      targets.push_back(match[1] == "<" ? "<" + match[2].str() + ">" : match[2].str());
    }
  }
  return targets;
}

bool starts_with_any(const std::string& text, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return text.starts_with(p); });
}

// A folder and the ember folders its files may include. core/ (everything may include it) and
// the folder itself are implied; a file in a subfolder obeys the deepest rule that names it.
struct Rule {
  std::string folder;
  std::vector<std::string> may_include;
};

const std::vector<Rule> kRules = {
    {"core/", {}},
    {"cuda/", {"cuda/"}},
    {"nn/modules/", {}},
    {"nn/io/", {"nn/modules/"}},  // safetensors reads and writes a module's StateDict
    {"nn/optim/", {"nn/modules/", "nn/io/"}},
    {"nn/models/", {"nn/modules/", "nn/io/"}},
    {"nn/parallel/", {"nn/modules/"}},
    {"nn/text/", {"nn/io/"}},
    {"nn/data/", {"nn/text/", "nn/io/"}},
    {"nn/train/", {"nn/"}},
    {"nn/nn.h", {"nn/modules/", "nn/models/", "nn/optim/", "nn/io/", "nn/parallel/"}},
};

const Rule* rule_for(const std::string& file) {
  const Rule* best = nullptr;
  for (const Rule& rule : kRules) {
    if (file.starts_with(rule.folder) && (best == nullptr || rule.folder.size() > best->folder.size())) best = &rule;
  }
  return best;
}

}  // namespace

TEST_CASE("each folder includes only the folders below it") {
  std::vector<std::string> files = sources_under("core");
  for (const std::string folder : {"cuda", "nn"}) {
    const std::vector<std::string> more = sources_under(folder);
    files.insert(files.end(), more.begin(), more.end());
  }
  REQUIRE(files.size() > 100);  // the tree was found
  int checked = 0;
  for (const std::string& file : files) {
    const Rule* rule = rule_for(file);
    REQUIRE_MESSAGE(rule != nullptr, file << " is in no folder of the layering table");
    for (const std::string& target : includes_of(file)) {
      if (target.starts_with("<") || !starts_with_any(target, {"core/", "cuda/", "nn/"})) continue;
      ++checked;
      const bool allowed = target.starts_with("core/") || target.starts_with(rule->folder) ||
                           starts_with_any(target, rule->may_include);
      CHECK_MESSAGE(allowed, file << " includes " << target << ", above its layer (" << rule->folder << ")");
    }
  }
  CHECK(checked > 500);
}

TEST_CASE("the layering check sees a forbidden include") {
  // The rule table itself: a layer may not include the models built from it, and nothing but
  // train/ includes train/.
  const Rule* modules = rule_for("nn/modules/linear.h");
  REQUIRE(modules != nullptr);
  CHECK(modules->folder == "nn/modules/");
  CHECK_FALSE(starts_with_any("nn/models/transformer.h", modules->may_include));
  const Rule* models = rule_for("nn/models/bert/bert.cpp");
  REQUIRE(models != nullptr);
  CHECK_FALSE(starts_with_any("nn/train/run_files.h", models->may_include));
  CHECK(rule_for("examples/translation.cpp") == nullptr);
}
