// The main() of every fuzz target when it is not built with libFuzzer
// (`--config=fuzz`): replays a corpus through LLVMFuzzerTestOneInput and then
// feeds it a fixed number of deterministic mutations of that corpus, so that
// `bazel test //...` runs each target briefly under any compiler and any
// sanitizer config. Real fuzzing runs the same target under libFuzzer
// (tests/fuzz/run_fuzzers.sh).
//
// Thread-safety: a program's main.
//
//   wire_codec_fuzz_test proto/corpus/wire_codec --mutations=20000
//   (a path is a file, or a directory whose files are all inputs)
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The input being run, written out if the target crashes (as libFuzzer
// writes crash-* files), under $TEST_UNDECLARED_OUTPUTS_DIR when Bazel sets
// it.
const std::string* current_input = nullptr;

void SaveCurrentInput(int signal) {
  if (current_input != nullptr) {
    const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    const std::string path =
        std::string(dir != nullptr ? dir : ".") + "/crash-input";
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(current_input->data(), 1, current_input->size(), f);
      std::fclose(f);
      std::fprintf(stderr, "the failing input is in %s\n", path.c_str());
    }
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void Run(const std::string& input) {
  current_input = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()),
                         input.size());
  current_input = nullptr;
}

// One of libFuzzer's simple mutations: flip a bit, set a byte, insert or
// erase bytes, truncate, or splice in part of another input.
std::string Mutate(const std::vector<std::string>& corpus,
                   std::mt19937_64& rng) {
  std::string s = corpus[rng() % corpus.size()];
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < steps; ++i) {
    const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 6) {
      case 0:
        if (at < s.size()) s[at] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (at < s.size()) s[at] = static_cast<char>(rng());
        break;
      case 2:
        s.insert(at, 1 + rng() % 4, static_cast<char>(rng()));
        break;
      case 3:
        if (at < s.size()) s.erase(at, 1 + rng() % 4);
        break;
      case 4:
        s.resize(at);
        break;
      default: {
        const std::string& other = corpus[rng() % corpus.size()];
        if (other.empty()) break;
        const size_t from = rng() % other.size();
        s.insert(at, other, from, 1 + rng() % (other.size() - from));
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGABRT, SaveCurrentInput);
  std::signal(SIGSEGV, SaveCurrentInput);
  std::vector<std::string> corpus;
  long mutations = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--mutations=", 0) == 0) {
      mutations = std::strtol(arg.c_str() + 12, nullptr, 10);
      continue;
    }
    const std::filesystem::path path(arg);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) corpus.push_back(ReadFile(entry.path()));
      }
    } else {
      corpus.push_back(ReadFile(path));
    }
  }
  if (corpus.empty()) corpus.push_back("");
  for (const std::string& input : corpus) Run(input);
  std::mt19937_64 rng(20261201);
  for (long i = 0; i < mutations; ++i) Run(Mutate(corpus, rng));
  std::printf("%zu corpus inputs and %ld mutations ran without a failure\n",
              corpus.size(), mutations);
  return 0;
}
