// redlite detokenize: the exact text of token ids, from any GGUF that carries a tokenizer
// (vocab-only files included; no weights are loaded).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>

#include "cli/common.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace rl::cli {

namespace {

std::string read_all(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the token id file");
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) fail(path, ": read error");
  return text;
}

// Appends the whitespace-separated ids in text; `where` names the source in errors.
void parse_ids(const std::string& text, const std::string& where, std::vector<int32_t>& ids) {
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(word.c_str(), &end, 10);
    if (errno != 0 || end != word.c_str() + word.size() ||
        v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      fail(where, ": '", word.substr(0, 40), "' is not a token id");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
}

}  // namespace

int cmd_detokenize(const Args& args) {
  CLI::App app{
      "Print the text of token ids: exactly the bytes the tokens stand for (control "
      "tokens as their text, byte-level BPE undone, nothing repaired). A newline is "
      "added only when stdout is a terminal, so redirected output is the bytes alone. "
      "Works on any GGUF that carries a tokenizer, vocab-only files included.",
      "detokenize"};
  std::string model, ids_file;
  std::vector<std::string> id_args;
  app.add_option("-m,--model", model, "GGUF file with a tokenizer")->required();
  auto* file_option = app.add_option("-f,--file", ids_file,
                                     "read whitespace-separated ids from a file ('-' for stdin)");
  auto* ids_option =
      app.add_option("ids", id_args, "token ids (an argument may hold several, space-separated)");
  ids_option->excludes(file_option);
  if (auto status = parse_args(app, args)) return *status;
  if (ids_option->count() == 0 && file_option->count() == 0) {
    std::fprintf(stderr, "redlite detokenize: give token ids, or --file (see --help)\n");
    return 2;
  }

  std::vector<int32_t> ids;
  if (file_option->count() > 0) {
    parse_ids(read_all(ids_file), ids_file == "-" ? "stdin" : ids_file, ids);
  } else {
    for (const std::string& arg : id_args) parse_ids(arg, "argument", ids);
  }

  const gguf::File file = gguf::File::open(model);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  std::string text = tok.decode(ids);  // names an out-of-range id
  if (isatty(STDOUT_FILENO)) text += '\n';
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    fail("cannot write to stdout");
  return 0;
}

}  // namespace rl::cli
