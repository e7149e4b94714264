// redlite eval: float32 logits of every position of a token file, for parity checks.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/common.h"
#include "cli/engine_flags.h"
#include "util/error.h"
#include "util/timer.h"

namespace rl::cli {

namespace {

std::vector<int32_t> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the token file");
  std::vector<int32_t> tokens;
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(word.c_str(), &end, 10);
    if (errno != 0 || end != word.c_str() + word.size() || v < 0 || v > INT32_MAX)
      fail(path, ": token ", tokens.size(), " is not a token id: '", word.substr(0, 32), "'");
    tokens.push_back(static_cast<int32_t>(v));
  }
  if (tokens.empty()) fail(path, ": no token ids in the file");
  return tokens;
}

}  // namespace

int cmd_eval(const Args& args) {
  CLI::App app{
      "Write the float32 logits of every position of a token sequence: row-major "
      "[positions x vocab], little-endian, row i after consuming tokens 0..i.",
      "eval"};
  EngineFlags flags;
  flags.add_to(app, true);
  std::string tokens_path, out_path;
  bool token_by_token = false;
  app.add_option("--tokens", tokens_path, "file of whitespace-separated token ids")->required();
  app.add_option("--logits-out", out_path, "output file for the logits")->required();
  app.add_flag("--decode", token_by_token,
               "feed the tokens one at a time through decode() instead of chunked prefill");
  if (auto status = parse_args(app, args)) return *status;

  const auto tokens = read_token_file(tokens_path);
  auto engine = load_with_progress(flags);
  const int64_t vocab = engine->config().n_vocab;
  auto options = flags.session_options();
  if (options.max_context == 0)
    options.max_context = std::max<int64_t>(engine->config().context_length, tokens.size());
  auto session = engine->new_session(options);

  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (!out) fail(out_path, ": cannot open for writing");
  auto write_rows = [&](const float* rows, int64_t n) {
    if (std::fwrite(rows, sizeof(float) * vocab, n, out) != size_t(n)) {
      std::fclose(out);
      fail(out_path, ": write failed (disk full?)");
    }
  };
  Timer timer;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (token_by_token) {
    for (int64_t i = 0; i < n; ++i) write_rows(session->decode(tokens[i]).data(), 1);
  } else {
    // One chunk at a time, so a long sequence never needs all its logits in memory.
    std::vector<float> rows;
    auto progress = prefill_progress(!flags.quiet);
    for (int64_t done = 0; done < n;) {
      const int64_t take = std::min<int64_t>(flags.chunk, n - done);
      rows.resize(take * vocab);
      session->prefill(std::span(tokens).subspan(done, take), {}, rows);
      write_rows(rows.data(), take);
      done += take;
      if (progress) progress(done, n);
    }
  }
  if (std::fclose(out) != 0) fail(out_path, ": write failed");
  if (!flags.quiet)
    std::fprintf(stderr, "eval: %lld positions in %.2f s (%.1f tok/s) -> %s\n",
                 static_cast<long long>(n), timer.seconds(), n / timer.seconds(), out_path.c_str());
  return 0;
}

}  // namespace rl::cli
