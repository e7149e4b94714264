// `redlite tokenize` and `redlite detokenize` end to end: the built binary against the golden
// vectors, exact output bytes, and exit statuses. Skipped (not passed) when the binary has not
// been built.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../common/cli_runner.h"
#include "test_util.h"

namespace rl::tokenizer {
namespace {

namespace fs = std::filesystem;

using Result = ::rl::test::CliResult;
using Cli = ::rl::test::CliTest;

std::string ids_line(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line + "\n";
}

// A sample of the golden cases (each run loads the vocab; the library test covers all 46):
// empty, white space only, newlines, Cyrillic, emoji with ZWJ, the long mixed one.
TEST_F(Cli, TokenizeAndDetokenizeTheGoldenVectors) {
  const auto cases = test::golden_cases();
  for (size_t i : {2, 5, 9, 20, 22, 33, 45}) {
    const auto& c = cases.at(i);
    const std::string text_file = write("text", c.text);
    Result r = run({"tokenize", "-m", test::kQwen2Vocab, "-f", text_file});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, ids_line(c.ids)) << testing::PrintToString(c.text);
    EXPECT_EQ(r.err, "");
    // The same through stdin.
    r = run({"tokenize", "-m", test::kQwen2Vocab, "--file", "-"}, c.text);
    EXPECT_EQ(r.out, ids_line(c.ids));
    // Back: exactly the bytes, no newline (stdout is not a terminal).
    r = run({"detokenize", "-m", test::kQwen2Vocab, "-f", write("ids", ids_line(c.ids))});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, c.text);
  }
}

TEST_F(Cli, TextAndIdsAsArguments) {
  Result r = run({"tokenize", "-m", test::kQwen2Vocab, " Hello World!"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "21927 4337 0\n");
  r = run({"detokenize", "-m", test::kQwen2Vocab, "21927 4337", "0"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, " Hello World!");
  r = run({"tokenize", "-m", test::kQwen2Vocab, ""});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "\n");
}

TEST_F(Cli, SpecialTokensOnlyWithTheFlag) {
  Result r = run({"tokenize", "-m", test::kQwen2Vocab, "--special", "<|im_start|>user"});
  EXPECT_EQ(r.out, "151644 872\n");
  r = run({"tokenize", "-m", test::kQwen2Vocab, "<|im_start|>user"});
  EXPECT_EQ(r.out, ids_line(test::qwen2().encode("<|im_start|>user", false)));
  r = run({"detokenize", "-m", test::kQwen2Vocab, "151644 872 151645"});
  EXPECT_EQ(r.out, "<|im_start|>user<|im_end|>");
}

TEST_F(Cli, WorksOnAModelFile) {
  Result r = run({"tokenize", "-m", test::kTinyModel, "--special", "<|im_start|>hi<|im_end|>"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, 4), "510 ");
  EXPECT_EQ(r.out.substr(r.out.size() - 4), "511\n");
}

TEST_F(Cli, ErrorsAreOneLineWithStatus1) {
  Result r = run({"detokenize", "-m", test::kQwen2Vocab, "9707", "151936"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("151936"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  r = run({"detokenize", "-m", test::kQwen2Vocab, "12x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("'12x'"), std::string::npos) << r.err;

  r = run({"tokenize", "-m", write("empty.gguf", ""), "x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  r = run({"tokenize", "-m", test::kQwen2Vocab, "-f", path("missing.txt")});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("missing.txt"), std::string::npos) << r.err;
}

TEST_F(Cli, UsageErrorsHaveStatus2) {
  EXPECT_EQ(run({"tokenize", "-m", test::kQwen2Vocab}).status, 2);  // no text
  EXPECT_EQ(run({"tokenize", "hello"}).status, 2);                  // no model
  EXPECT_EQ(run({"tokenize", "-m", test::kQwen2Vocab, "a", "-f", "-"}).status, 2);
  EXPECT_EQ(run({"detokenize", "-m", test::kQwen2Vocab}).status, 2);  // no ids
  EXPECT_EQ(run({"detokenize", "-m", test::kQwen2Vocab, "--bogus"}).status, 2);
  const Result help = run({"detokenize", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("terminal"), std::string::npos);  // documents the newline rule
}

}  // namespace
}  // namespace rl::tokenizer
