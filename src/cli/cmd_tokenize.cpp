// redlite tokenize: the token ids of a text, from any GGUF that carries a tokenizer (vocab-only
// files included; no weights are loaded).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
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
  if (!in) fail(path, ": cannot open the text file");
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) fail(path, ": read error");
  return text;
}

}  // namespace

int cmd_tokenize(const Args& args) {
  CLI::App app{
      "Print the token ids of a text on one line, separated by spaces. The text is "
      "plain text unless --special is given. A BOS token is added only when the file "
      "sets tokenizer.ggml.add_bos_token; EOS never. Works on any GGUF that carries a "
      "tokenizer, vocab-only files included.",
      "tokenize"};
  std::string model, text, text_file;
  bool special = false;
  app.add_option("-m,--model", model, "GGUF file with a tokenizer")->required();
  app.add_flag("--special", special,
               "recognise control and user-defined tokens written in the text (<|im_start|>, "
               "<think>, ...)");
  auto* file_option =
      app.add_option("-f,--file", text_file, "read the text from a file ('-' for stdin)");
  auto* text_option = app.add_option("text", text, "the text (exactly these bytes)");
  text_option->excludes(file_option);
  if (auto status = parse_args(app, args)) return *status;
  if (text_option->count() == 0 && file_option->count() == 0) {
    std::fprintf(stderr, "redlite tokenize: give the text, or --file (see --help)\n");
    return 2;
  }
  if (file_option->count() > 0) text = read_all(text_file);

  const gguf::File file = gguf::File::open(model);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  const std::vector<int32_t> ids = tok.encode(text, special, /*add_bos=*/true);

  std::string line;
  line.reserve(ids.size() * 7);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() || std::fflush(stdout) != 0)
    fail("cannot write to stdout");
  return 0;
}

}  // namespace rl::cli
