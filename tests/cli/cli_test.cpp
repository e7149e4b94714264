// The `redlite` commands end to end, as a user runs them: exit statuses (0, 1 for errors, 2 for
// usage), one clear line on stderr, never a signal; and eval's output against the goldens.
#include <cmath>
#include <cstring>

#include "../common/cli_runner.h"

namespace {

using rl::test::CliResult;
using Cli = rl::test::CliTest;

const std::string kTiny = std::string(RL_SHARED_DIR) + "/testdata/tiny/";
const std::string kVocab = std::string(RL_SHARED_DIR) + "/testdata/tokenizer/ggml-vocab-qwen2.gguf";

// An error: status 1 and one message on stderr, "redlite <command>: ...", mentioning `needle`
// (a message may list several problems on indented lines below the first).
void expect_error(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.rfind("redlite ", 0), 0u) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  size_t lines = 0;
  for (size_t at = 0; (at = r.err.find('\n', at)) != std::string::npos; ++at)
    if (at + 1 < r.err.size() && r.err[at + 1] != ' ') ++lines;
  EXPECT_EQ(lines, 0u) << "continuation lines must be indented: " << r.err;
}

TEST_F(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run({}).status, 2);
  EXPECT_EQ(run({"frobnicate"}).status, 2);
  EXPECT_EQ(run({"run", "--temp", "abc"}).status, 2);
  EXPECT_EQ(run({"run", "--top-p", "1.5"}).status, 2);
  EXPECT_EQ(run({"run", "--backend", "tpu"}).status, 2);
  EXPECT_EQ(run({"eval", "-m", kTiny + "tiny-f32.gguf"}).status, 2);  // --tokens missing
  const auto help = run({"run", "--help"});
  EXPECT_EQ(help.status, 0);
  for (const char* flag : {"--model", "--prompt", "--max-tokens", "--temp", "--top-k", "--top-p",
                           "--min-p", "--seed", "--ctx", "--kv-type", "--backend", "--chat"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

// Both benchmarks take their list of KV cache types by the same name (--kv-type is kept as an
// alias on `bench kernel`, where it was the name first).
TEST_F(Cli, BenchesNameTheirKvTypesAlike) {
  for (const char* bench : {"kernel", "decode"}) {
    const auto help = run({"bench", bench, "--help"});
    EXPECT_EQ(help.status, 0) << bench;
    EXPECT_NE(help.out.find("--kv-types"), std::string::npos) << bench;
  }
  // Both spellings parse: the run fails later (exit 1: a bad position, or no CUDA backend in
  // this build), not as a usage error (exit 2) as a misspelt flag does.
  for (const char* flag : {"--kv-types", "--kv-type"}) {
    const auto r = run({"bench", "kernel", flag, "f32", "--positions", "abc"});
    EXPECT_EQ(r.status, 1) << flag << ": " << r.err;
  }
  EXPECT_EQ(run({"bench", "kernel", "--kv-typez", "f32"}).status, 2);
}

TEST_F(Cli, MissingFileWrongArchitectureAndBadGguf) {
  expect_error(run({"run", "-m", path("nope.gguf"), "-p", "hi"}), "nope.gguf");
  // A valid GGUF that is not a model: the vocab-only file.
  expect_error(run({"run", "-m", kVocab, "-p", "hi"}), "architecture");
  // Not a GGUF at all.
  const auto junk = write("junk.gguf", "this is not a gguf file at all, just text");
  expect_error(run({"run", "-m", junk, "-p", "hi"}), "junk.gguf");
  expect_error(run({"info", junk}), "junk.gguf");
}

TEST_F(Cli, PromptLongerThanTheContext) {
  std::string prompt;
  for (int i = 0; i < 50; ++i) prompt += "hello world ";
  const auto r = run({"run", "-m", kTiny + "tiny-f32.gguf", "--ctx", "16", "-p", prompt, "-q"});
  expect_error(r, "context");
}

TEST_F(Cli, EvalBadTokenFiles) {
  const auto model = kTiny + "tiny-f32.gguf";
  expect_error(
      run({"eval", "-m", model, "--tokens", write("t1", "1 2 x3"), "--logits-out", path("o")}),
      "token 2");
  expect_error(run({"eval", "-m", model, "--tokens", write("t2", "1 2 512"), "--logits-out",
                    path("o"), "-q"}),
               "512");
  expect_error(
      run({"eval", "-m", model, "--tokens", write("t3", " \n"), "--logits-out", path("o")}),
      "no token ids");
  std::string many;
  for (int i = 0; i < 40; ++i) many += "7 ";
  expect_error(run({"eval", "-m", model, "--tokens", write("t4", many), "--logits-out", path("o"),
                    "--ctx", "32", "-q"}),
               "context");
}

// eval writes [positions x vocab] float32 rows; check them against the float64 goldens, both
// chunked and through decode.
TEST_F(Cli, EvalWritesLogitsMatchingTheGoldens) {
  const auto ref = read(kTiny + "tiny-quant.seq96.ref64.logits.f32");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--chunk", "13"}, std::vector<std::string>{"--decode"}}) {
    std::vector<std::string> args = {"eval",
                                     "-m",
                                     kTiny + "tiny-quant.gguf",
                                     "--tokens",
                                     kTiny + "tiny-quant.seq96.tokens.txt",
                                     "--logits-out",
                                     path("logits.f32"),
                                     "--backend",
                                     "cpu",
                                     "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    const auto out = read(path("logits.f32"));
    ASSERT_EQ(out.size(), ref.size());
    double max_abs = 0;
    for (size_t i = 0; i < out.size() / 4; ++i) {
      float a, b;
      std::memcpy(&a, out.data() + 4 * i, 4);
      std::memcpy(&b, ref.data() + 4 * i, 4);
      max_abs = std::max(max_abs, std::isfinite(a) ? std::abs(double(a) - b) : 1e9);
    }
    EXPECT_LE(max_abs, 2e-3) << extra[0];
  }
}

TEST_F(Cli, RunGeneratesAndReportsSpeed) {
  const auto r = run({"run", "-m", kTiny + "tiny-f32.gguf", "-p", "ab", "-n", "8", "--temp", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ab", 0), 0u) << "the prompt is echoed first";
  EXPECT_NE(r.err.find("generation:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
  // Greedy is deterministic.
  const auto again =
      run({"run", "-m", kTiny + "tiny-f32.gguf", "-p", "ab", "-n", "8", "--temp", "0"});
  EXPECT_EQ(again.out, r.out);
}

TEST_F(Cli, ChatKeepsTheConversationInTheSession) {
  // Two turns over stdin; the second turn's context must include the first.
  const auto r =
      run({"chat", "-m", kTiny + "tiny-f32.gguf", "-n", "4", "--temp", "0"}, "hello\nagain\n");
  ASSERT_EQ(r.status, 0) << r.err;
  // "[... | context N]" after each turn: N grows by more than the second prompt alone.
  const auto first = r.err.find("context ");
  const auto second = r.err.find("context ", first + 1);
  ASSERT_NE(second, std::string::npos) << r.err;
  const int c1 = std::stoi(r.err.substr(first + 8)), c2 = std::stoi(r.err.substr(second + 8));
  EXPECT_GT(c1, 0);
  EXPECT_GT(c2, c1);
}

TEST_F(Cli, MkmodelThenInfoThenRun) {
  const auto model = path("m.gguf");
  auto r = run({"mkmodel", "--preset", "tiny", "--layers", "4", "-o", model});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"info", model, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("qwen3next"), std::string::npos);
  r = run({"run", "-m", model, "-p", "hi", "-n", "4", "-q"});
  EXPECT_EQ(r.status, 0) << r.err;
  expect_error(run({"mkmodel", "--preset", "huge", "-o", path("x.gguf")}), "huge");
}

TEST_F(Cli, MkmodelSharedDownType) {
  const auto model = path("shexp.gguf");
  auto r = run({"mkmodel", "--preset", "tiny-quant", "--shexp-down", "q6_K", "-o", model});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"info", model, "--tensors"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto row = r.out.find("blk.0.ffn_down_shexp.weight");
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(row, r.out.find('\n', row) - row).find("q6_K"), std::string::npos)
      << r.out;
  expect_error(run({"mkmodel", "--preset", "tiny", "--shexp-down", "q9_K", "-o", path("y.gguf")}),
               "--shexp-down: unknown tensor type 'q9_K'");
}

}  // namespace
