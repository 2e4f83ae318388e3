#include "tests/support/test_corpus.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

namespace troupe::testing {
namespace {

const std::vector<std::string> adjectives{"old", "young", "tired", "brave", "quiet", "great", "small", "dark"};
const std::vector<std::string> singular{"sailor", "captain", "whale", "ship", "king", "river", "city", "bird"};
const std::vector<std::string> plural{"sailors", "captains", "whales", "ships", "kings", "rivers", "cities", "birds"};
const std::vector<std::string> verbs_singular{"sees", "follows", "loves", "fears", "finds", "watches"};
const std::vector<std::string> verbs_plural{"see", "follow", "love", "fear", "find", "watch"};
const std::vector<std::string> places{"sea", "harbor", "north", "storm", "night", "morning"};

}  // namespace

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << text;
}

void write_toy_corpus(const std::filesystem::path& dir, int documents, int sentences_per_document, uint64_t seed) {
  std::mt19937_64 random(seed);
  auto pick = [&](const std::vector<std::string>& words) { return words[random() % words.size()]; };
  for (int d = 0; d < documents; ++d) {
    std::string text;
    for (int s = 0; s < sentences_per_document; ++s) {
      const bool many = random() % 2 == 0;
      std::string sentence = "The " + pick(adjectives) + " " + (many ? pick(plural) : pick(singular)) + " " +
                             (many ? pick(verbs_plural) : pick(verbs_singular)) + " the " + pick(singular) +
                             " in the " + pick(places) + ".";
      text += sentence + (s % 4 == 3 ? "\n" : " ");
    }
    char name[32];
    std::snprintf(name, sizeof name, "doc-%03d.txt", d);
    write_text(dir / name, text + "\n");
  }
}

void write_toy_vocab(const std::filesystem::path& file) {
  std::vector<std::string> vocab{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", "the", "in",
                                 "a", "##s", "##ing", "##ed", "un", "##able"};
  for (const auto* list : {&adjectives, &singular, &plural, &verbs_singular, &verbs_plural, &places})
    for (const auto& word : *list) vocab.push_back(word);
  std::string text;
  for (const auto& token : vocab) text += token + "\n";
  write_text(file, text);
}

std::string troupe_binary() {
  const char* path = std::getenv("TROUPE_BINARY");
  if (path == nullptr) throw std::runtime_error("TROUPE_BINARY is not set (run the tests through ctest)");
  return path;
}

command_result run_command(const std::string& command, int timeout_seconds) {
  const std::string wrapped = "timeout -k 5 " + std::to_string(timeout_seconds) + " " + command + " 2>&1";
  FILE* pipe = ::popen(wrapped.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::string output;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

}  // namespace troupe::testing

namespace troupe::testing {

command_result prepare_toy_dataset(const std::filesystem::path& dir, int documents, int sentences_per_document,
                                   uint64_t seed, double validation_fraction) {
  write_toy_corpus(dir / "corpus", documents, sentences_per_document, seed);
  write_toy_vocab(dir / "vocab.txt");
  return run_command(troupe_binary() + " prepare --input " + (dir / "corpus").string() + " --tokenizer wordpiece:" +
                     (dir / "vocab.txt").string() + " --out " + (dir / "data").string() +
                     " --max-seq-length 32 --validation-fraction " + std::to_string(validation_fraction));
}

}  // namespace troupe::testing
