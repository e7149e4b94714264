// chat::render against the golden renderings made by jinja2 from the two template files
// (testdata/README.md §3.1), plus the inputs on which the templates raise.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/chat.h"
#include "util/error.h"

namespace rl::chat {
namespace {

const std::string kDir = std::string(RL_SHARED_DIR) + "/testdata/tokenizer/";

// A piece of text as a JSON string literal, safe for a cut through a UTF-8 character.
std::string quoted(const std::string& text) {
  return Json(text).dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Family family_of(const std::string& template_file) {
  if (template_file == "Qwen-Qwen3-0.6B.jinja") return Family::Qwen3;
  if (template_file == "Qwen3-Coder.jinja") return Family::Qwen3Coder;
  ADD_FAILURE() << "unknown template " << template_file;
  return Family::Qwen3;
}

TEST(ChatRender, AllGoldenCasesByteIdentical) {
  std::ifstream in(kDir + "chat-renderings.jsonl", std::ios::binary);
  ASSERT_TRUE(in.good());
  std::string line;
  int n_cases = 0, n_qwen3 = 0, n_coder = 0;
  while (std::getline(in, line)) {
    const Json c = Json::parse(line);
    const std::string name =
        c["template"].get<std::string>() + " / " + c["case"].get<std::string>();
    const Family family = family_of(c["template"]);
    (family == Family::Qwen3 ? n_qwen3 : n_coder)++;
    ++n_cases;
    RenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (!c["enable_thinking"].is_null()) options.enable_thinking = c["enable_thinking"].get<bool>();
    const std::string expected = c["rendered"];
    std::string got;
    try {
      got = render(family, c["messages"], c["tools"], options);
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": threw " << e.what();
      continue;
    }
    if (got == expected) continue;
    size_t offset = 0;
    while (offset < got.size() && offset < expected.size() && got[offset] == expected[offset]) {
      ++offset;
    }
    const size_t from = offset > 40 ? offset - 40 : 0;
    ADD_FAILURE() << name << ": first difference at byte " << offset << " (lengths " << got.size()
                  << " vs expected " << expected.size()
                  << ")\n  got:      " << quoted(got.substr(from, 100))
                  << "\n  expected: " << quoted(expected.substr(from, 100));
  }
  EXPECT_EQ(n_cases, 103);
  EXPECT_EQ(n_qwen3, 58);
  EXPECT_EQ(n_coder, 45);
}

TEST(ChatRender, DetectFamilyFromTemplateFiles) {
  EXPECT_EQ(detect_family(read_file(kDir + "Qwen-Qwen3-0.6B.jinja")), Family::Qwen3);
  EXPECT_EQ(detect_family(read_file(kDir + "Qwen3-Coder.jinja")), Family::Qwen3Coder);
  EXPECT_EQ(detect_family(""), Family::Qwen3);
  EXPECT_STREQ(family_name(Family::Qwen3Coder), "Qwen3-Coder");
}

// Each of these makes jinja2 raise (checked against the template source: string concatenation
// with a non-string, `|items` on a non-mapping, messages[0] of an empty list).
struct BadInput {
  const char* what;
  Family family;
  const char* messages;
  const char* expected_fragment;  // part of the error message
};

class ChatRenderRejects : public ::testing::TestWithParam<BadInput> {};

TEST_P(ChatRenderRejects, WithClearError) {
  const BadInput& bad = GetParam();
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  try {
    render(bad.family, Json::parse(bad.messages), tools, RenderOptions{});
    FAIL() << bad.what << ": no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad.expected_fragment), std::string::npos)
        << bad.what << ": " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ChatRenderRejects,
    ::testing::Values(
        BadInput{"empty messages", Family::Qwen3, "[]", "non-empty array"},
        BadInput{"empty messages", Family::Qwen3Coder, "[]", "non-empty array"},
        BadInput{"messages not an array", Family::Qwen3, R"({"role": "user"})", "non-empty array"},
        BadInput{"message not an object", Family::Qwen3Coder, R"(["hi"])", "messages[0]"},
        BadInput{"coder arguments as a JSON string", Family::Qwen3Coder,
                 R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1}"}}]}])",
                 "messages[1] (assistant): tool_calls[0] arguments must be a JSON object"},
        BadInput{"coder arguments null", Family::Qwen3Coder,
                 R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "f", "arguments": null}}]}])",
                 "arguments must be a JSON object"},
        BadInput{"coder call without a name", Family::Qwen3Coder,
                 R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"arguments": {}}}]}])",
                 "string function name"},
        BadInput{"coder user content null", Family::Qwen3Coder,
                 R"([{"role": "user", "content": null}])", "content must be a string"},
        BadInput{"coder assistant content null without calls", Family::Qwen3Coder,
                 R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": null}])",
                 "messages[1] (assistant): content must be a string"},
        BadInput{"coder system content list", Family::Qwen3Coder,
                 R"([{"role": "system", "content": [{"type": "text", "text": "x"}]}])",
                 "content must be a string, got array"},
        BadInput{"coder unknown role without content", Family::Qwen3Coder,
                 R"([{"role": "developer"}])", "missing content"},
        BadInput{"coder tool_calls as an object", Family::Qwen3Coder,
                 R"([{"role": "assistant", "content": "", "tool_calls": {"a": 1}}])",
                 "tool_calls must be an array"},
        BadInput{"qwen3 user content number", Family::Qwen3, R"([{"role": "user", "content": 5}])",
                 "content must be a string, got number"},
        BadInput{"qwen3 assistant content null with calls", Family::Qwen3,
                 R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
                    "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}])",
                 "messages[1] (assistant): content must be a string, got null"},
        BadInput{"qwen3 call without arguments", Family::Qwen3,
                 R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "f"}}]}])",
                 "tool_calls[0] has no arguments"},
        BadInput{"qwen3 system content missing", Family::Qwen3,
                 R"([{"role": "system"}, {"role": "user", "content": "x"}])",
                 "messages[0] (system): missing content"},
        BadInput{"qwen3 reasoning_content not a string", Family::Qwen3,
                 R"([{"role": "user", "content": "x"},
                    {"role": "assistant", "content": "", "reasoning_content": 3}])",
                 "reasoning_content must be a string"}));

TEST(ChatRender, ToolsMustBeAnArray) {
  const Json messages = Json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_THROW(render(Family::Qwen3, messages, Json::parse(R"({"a": 1})"), {}), Error);
  EXPECT_THROW(render(Family::Qwen3Coder, messages, Json("tools"), {}), Error);
}

// What jinja2 prints for inputs the goldens do not cover, worked out from the template text:
// a tool result's non-string content goes through str(), the Coder template prints no
// "<|im_start|>user" for a tool result that is the first message of its loop, and a Coder
// tool-call turn accepts null content.
TEST(ChatRender, EdgesOutsideTheGoldens) {
  const Json tool_first = Json::parse(
      R"([{"role": "system", "content": "S"}, {"role": "tool", "content": {"a": [true, null]}},
          {"role": "user", "content": "u"}])");
  EXPECT_EQ(render(Family::Qwen3Coder, tool_first, nullptr, {false, std::nullopt}),
            "<|im_start|>system\nS<|im_end|>\n<tool_response>\n{'a': [True, None]}\n"
            "</tool_response>\n<|im_end|>\n<|im_start|>user\nu<|im_end|>\n");
  EXPECT_EQ(render(Family::Qwen3, tool_first, nullptr, {false, std::nullopt}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n<tool_response>\n"
            "{'a': [True, None]}\n</tool_response><|im_end|>\n<|im_start|>user\nu<|im_end|>\n");
  const Json null_content = Json::parse(
      R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
          "tool_calls": [{"function": {"name": "f", "arguments": {"n": 1e16, "s": "it's"}}}]}])");
  EXPECT_EQ(render(Family::Qwen3Coder, null_content, nullptr, {false, std::nullopt}),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<tool_call>\n<function=f>\n"
            "<parameter=n>\n1e+16\n</parameter>\n<parameter=s>\nit's\n</parameter>\n</function>\n"
            "</tool_call><|im_end|>\n");
}

}  // namespace
}  // namespace rl::chat
