/// troupe-sentencepiece: SentencePiece in its own process.
///
/// Why a separate process: Debian's libsentencepiece embeds protobuf-lite 3.14 and exports its
/// symbols, while LibTorch loads libprotobuf 3.21. In one process either library's protobuf
/// calls resolve into the other's copy and the process crashes at start-up or aborts in the
/// version check (RTLD_DEEPBIND fails too: it breaks libstdc++'s copy-relocated streams).
///
///   troupe-sentencepiece train ARGUMENTS...   SentencePieceTrainer::Train; exit 0 or 1
///   troupe-sentencepiece encode MODEL          first line: "ok <pieces> <piece 0> ... <piece 4>";
///                                              then one line of ids per line of text on stdin
///   troupe-sentencepiece pieces MODEL          "ok <pieces>", then every piece, one per line, by id

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: troupe-sentencepiece train ARGS... | encode MODEL | pieces MODEL\n");
    return 2;
  }
  const std::string command = argv[1];
  if (command == "train") {
    std::string arguments;
    for (int i = 2; i < argc; ++i) arguments += std::string(i > 2 ? " " : "") + argv[i];
    auto status = sentencepiece::SentencePieceTrainer::Train(arguments);
    if (!status.ok()) {
      std::fprintf(stderr, "troupe-sentencepiece: %s\n", status.ToString().c_str());
      return 1;
    }
    return 0;
  }
  if (command == "pieces") {
    sentencepiece::SentencePieceProcessor processor;
    if (auto loaded = processor.Load(argv[2]); !loaded.ok()) {
      std::fprintf(stderr, "troupe-sentencepiece: %s\n", loaded.ToString().c_str());
      return 1;
    }
    std::cout << "ok " << processor.GetPieceSize() << '\n';
    for (int id = 0; id < processor.GetPieceSize(); ++id) std::cout << processor.IdToPiece(id) << '\n';
    std::cout << std::flush;
    return 0;
  }
  if (command != "encode") {
    std::fprintf(stderr, "troupe-sentencepiece: unknown command %s\n", command.c_str());
    return 2;
  }
  sentencepiece::SentencePieceProcessor processor;
  auto status = processor.Load(argv[2]);
  if (!status.ok()) {
    std::fprintf(stderr, "troupe-sentencepiece: %s\n", status.ToString().c_str());
    return 1;
  }
  std::string header = "ok " + std::to_string(processor.GetPieceSize());
  for (int id = 0; id < 5 && id < processor.GetPieceSize(); ++id) header += " " + processor.IdToPiece(id);
  std::cout << header << std::endl;
  std::string line;
  std::vector<int> ids;
  while (std::getline(std::cin, line)) {
    ids.clear();
    status = processor.Encode(line, &ids);
    if (!status.ok()) {
      std::fprintf(stderr, "troupe-sentencepiece: %s\n", status.ToString().c_str());
      return 1;
    }
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
    std::cout << out << '\n' << std::flush;
  }
  return 0;
}
