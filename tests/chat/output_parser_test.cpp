// OutputParser: reasoning / content / tool calls of both dialects, streamed with every split.
// Expected results are written out by hand from the formats in the two templates (the tool-call
// examples they print and the way they write calls back), not taken from the parser.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/chat_tool_call.h"
#include "tokenizer/output_parser.h"

namespace rl::chat {
namespace {

struct Parsed {
  std::string reasoning;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const Parsed&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Parsed& p) {
  os << "{reasoning " << Json(p.reasoning).dump() << ", content " << Json(p.content).dump();
  for (const auto& [name, args] : p.calls) os << ", call " << name << " " << args;
  return os << "}";
}

void append(Parsed& p, const OutputDelta& d) {
  p.reasoning += d.reasoning;
  p.content += d.content;
  for (const ToolCall& c : d.tool_calls) p.calls.emplace_back(c.name, c.arguments);
}

Parsed feed(const std::vector<std::string>& pieces, const OutputParserOptions& options) {
  OutputParser parser(options);
  Parsed p;
  for (const std::string& piece : pieces) append(p, parser.push(piece));
  append(p, parser.finish());
  return p;
}

// Offsets where a UTF-8 character starts (push() takes whole characters).
std::vector<size_t> char_starts(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  return starts;
}

std::vector<std::string> split_at(const std::string& text, const std::vector<size_t>& cuts) {
  std::vector<std::string> pieces;
  size_t from = 0;
  for (size_t cut : cuts) {
    pieces.push_back(text.substr(from, cut - from));
    from = cut;
  }
  pieces.push_back(text.substr(from));
  return pieces;
}

// Checks `text` parses to `expected` fed whole, one character at a time, cut once at every
// character boundary, and cut at random boundaries.
void expect_parse(const std::string& text, const Parsed& expected,
                  const OutputParserOptions& options = {}) {
  SCOPED_TRACE("text: " + Json(text).dump());
  EXPECT_EQ(feed({text}, options), expected) << "fed whole";
  const std::vector<size_t> starts = char_starts(text);
  std::vector<std::string> chars;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
    chars.push_back(text.substr(starts[i], end - starts[i]));
  }
  EXPECT_EQ(feed(chars, options), expected) << "fed one character at a time";
  for (size_t cut : starts) {
    const Parsed got = feed(split_at(text, {cut}), options);
    if (got != expected) {
      ADD_FAILURE() << "cut at byte " << cut << ": " << got;
      break;
    }
  }
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 200 && starts.size() > 1; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < starts.size(); ++i) {
      if (rng() % 4 == 0) cuts.push_back(starts[i]);
    }
    const Parsed got = feed(split_at(text, cuts), options);
    if (got != expected) {
      ADD_FAILURE() << "random split " << trial << ": " << got;
      break;
    }
  }
}

Parsed content(std::string text) {
  return {"", std::move(text), {}};
}

const std::string kWeatherCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\u00fcrich\", "
    "\"unit\": \"celsius\"}}\n</tool_call>";
const std::pair<std::string, std::string> kWeather = {
    "get_weather", "{\"city\":\"Z\u00fcrich\",\"unit\":\"celsius\"}"};

TEST(OutputParser, ContentOnly) {
  expect_parse("Hello, world!", content("Hello, world!"));
  expect_parse("", content(""));
  expect_parse("  indented\n\nlines  \n", content("  indented\n\nlines  \n"));
  expect_parse("a < b and c <tool d <think> e", content("a < b and c <tool d <think> e"));
  expect_parse("ends with a partial tag <tool_cal", content("ends with a partial tag <tool_cal"));
  expect_parse("Gr\u00fc\u00dfe aus \u6771\u4eac \U0001F600 \u2014 <\u00e9>",
               content("Gr\u00fc\u00dfe aus \u6771\u4eac \U0001F600 \u2014 <\u00e9>"));
}

TEST(OutputParser, Qwen3JsonCalls) {
  expect_parse(kWeatherCall, {"", "", {kWeather}});
  expect_parse("Let me check.\n" + kWeatherCall + "\n", {"", "Let me check.", {kWeather}});
  // Parallel calls, as the template writes them back (joined by one newline).
  expect_parse(kWeatherCall + "\n" + kWeatherCall, {"", "", {kWeather, kWeather}});
  // No arguments; arguments as a JSON string holding an object; nested values and key order.
  expect_parse("<tool_call>\n{\"name\": \"list_tabs\"}\n</tool_call>",
               {"", "", {{"list_tabs", "{}"}}});
  expect_parse(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"b\\\": 1, \\\"a\\\": [2]}\"}\n"
      "</tool_call>",
      {"", "", {{"f", "{\"b\":1,\"a\":[2]}"}}});
  expect_parse(
      "<tool_call>{\"name\": \"set\", \"arguments\": {\"z\": {\"list\": [1, \"two\", [3.0, "
      "{\"four\": false}]], \"ok\": true}, \"a\": null, \"tiny\": 1e-07}}</tool_call>",
      {"",
       "",
       {{"set",
         "{\"z\":{\"list\":[1,\"two\",[3.0,{\"four\":false}]],\"ok\":true},"
         "\"a\":null,\"tiny\":1e-07}"}}});
}

TEST(OutputParser, CloseTagInsideJsonStringDoesNotEndTheCall) {
  expect_parse(
      "<tool_call>\n{\"name\": \"write\", \"arguments\": {\"text\": \"end: </tool_call> \\\" "
      "<tool_call>\"}}\n</tool_call>after",
      {"", "after", {{"write", "{\"text\":\"end: </tool_call> \\\" <tool_call>\"}"}}});
}

TEST(OutputParser, TextAroundCallsIsContentWithoutTheBorderingWhitespace) {
  expect_parse("First.\n\n" + kWeatherCall + "\n\nThen " + kWeatherCall + " done. \n",
               {"", "First.\n\nThen done. \n", {kWeather, kWeather}});
  expect_parse(kWeatherCall + "\n\nDone.", {"", "Done.", {kWeather}});
  expect_parse("   \n" + kWeatherCall + "  \n  ", {"", "", {kWeather}});
}

TEST(OutputParser, ReasoningThenCallOrContent) {
  expect_parse("<think>\nI should call the tool.\n</think>\n\n" + kWeatherCall,
               {"I should call the tool.", "", {kWeather}});
  expect_parse("\n<think>\n\nStep 1.\n\nStep 2.\n\n</think>\n\nThe answer is 4.",
               {"Step 1.\n\nStep 2.", "The answer is 4.", {}});
  expect_parse("<think>\n\n</think>\n\nNo thinking.", content("No thinking."));
  // Unclosed at the end: still reasoning.
  expect_parse("<think>\nstill thinking <tool_call>\n", {"still thinking <tool_call>", "", {}});
  // <think> only counts at the start; </think> without it is content.
  expect_parse("Hi <think>x</think> y", content("Hi <think>x</think> y"));
  expect_parse("x</think>y", content("x</think>y"));
}

TEST(OutputParser, StartsInReasoning) {
  OutputParserOptions options;
  options.starts_in_reasoning = true;
  expect_parse("Plan: call it.\n</think>\n\n" + kWeatherCall, {"Plan: call it.", "", {kWeather}},
               options);
  expect_parse("\nonly reasoning, cut off", {"only reasoning, cut off", "", {}}, options);
  expect_parse("</think>answer", content("answer"), options);
}

TEST(OutputParser, ParsingSwitchedOff) {
  OutputParserOptions options;
  options.parse_tool_calls = false;
  options.parse_reasoning = false;
  const std::string text = "<think>\nx\n</think>\n\n  " + kWeatherCall + "\n";
  expect_parse(text, content(text), options);
  options.parse_reasoning = true;
  expect_parse("<think>r</think>\n " + kWeatherCall + " \n", {"r", " " + kWeatherCall + " \n", {}},
               options);
}

TEST(OutputParser, MalformedCallsAreContent) {
  const std::vector<std::string> malformed = {
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>",   // bad JSON
      "<tool_call>\n{\"arguments\": {\"a\": 1}}\n</tool_call>",                   // no name
      "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",              // name not text
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",         // not an object
      "<tool_call>\n{\"name\": \"f\"} trailing\n</tool_call>",                    // stray text
      "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>",  // no </function>
      "<tool_call>\n<function=f>\nstray\n</function>\n</tool_call>",              // stray text
      "<tool_call>\n<function=>\n</function>\n</tool_call>",                      // empty name
      "<tool_call>\n</tool_call>",                                                // empty
  };
  for (const std::string& call : malformed) {
    expect_parse(call, content(call));
    expect_parse("Before.\n" + call + "\nAfter.", content("Before.\n" + call + "\nAfter."));
  }
  // Unterminated at the end.
  const std::string unterminated =
      "Text <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n";
  expect_parse(unterminated, content(unterminated));
  const std::string unterminated_xml = "<tool_call>\n<function=f>\n<parameter=a>\n</tool_call>";
  expect_parse(unterminated_xml, content(unterminated_xml));
  // Not a call at all: the tag is text and what follows is read again (a real call later works).
  expect_parse("Use <tool_call> tags. " + kWeatherCall, {"", "Use <tool_call> tags.", {kWeather}});
  // A malformed call, then a good one.
  const std::string bad = "<tool_call>\n{bad}\n</tool_call>";
  expect_parse(bad + "\n" + kWeatherCall, {"", bad, {kWeather}});
  // A good one, then a malformed one: the whitespace between borders the good call.
  expect_parse(kWeatherCall + "\n" + bad, {"", bad, {kWeather}});
}

TEST(OutputParser, TagsSplitAcrossPushes) {
  OutputParser parser({});
  Parsed p;
  append(p, parser.push("Answer <tool_"));
  EXPECT_EQ(p.content, "Answer");  // the space may border a call, "<tool_" may become one
  append(p, parser.push("call>\n{\"name\": \"get_weather\", \"arguments\": "));
  append(p, parser.push("{\"city\": \"Z\u00fcrich\", \"unit\": \"celsius\"}}\n</tool_"));
  EXPECT_TRUE(p.calls.empty());
  append(p, parser.push("call>"));
  EXPECT_EQ(p.calls, (std::vector<std::pair<std::string, std::string>>{kWeather}));
  append(p, parser.push("<thi"));
  append(p, parser.push("nk> <tool"));
  EXPECT_EQ(p.content, "Answer<think>");  // " <tool" may still become " <tool_call>"
  append(p, parser.finish());
  EXPECT_EQ(p.content, "Answer<think> <tool");
}

TEST(OutputParser, PlainTextIsEmittedPromptly) {
  OutputParser parser({});
  std::string seen;
  const std::string text = "The quick <b>brown</b> fox";
  for (size_t i = 0; i < text.size(); ++i) {
    seen += parser.push(text.substr(i, 1)).content;
    // Everything but trailing whitespace and a trailing "<tool_call>" prefix is out.
    std::string expected = text.substr(0, i + 1);
    const size_t lt = expected.rfind('<');
    if (lt != std::string::npos && std::string("<tool_call>").starts_with(expected.substr(lt))) {
      expected.resize(lt);
    }
    while (!expected.empty() && expected.back() == ' ') expected.pop_back();
    EXPECT_EQ(seen, expected) << "after " << i + 1 << " characters";
  }
  OutputParser thinking({});
  EXPECT_EQ(thinking.push("<think>Let me").reasoning, "Let me");
  EXPECT_EQ(thinking.push(" see</thi").reasoning, " see");
}

// --- Qwen3-Coder XML -------------------------------------------------------------------------

const Json kCoderTools = Json::parse(R"([
  {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}, "timeout": {"type": ["integer", "null"]},
    "count": {"type": "integer"}, "ratio": {"type": "number"}, "force": {"type": "boolean"},
    "env": {"type": "object"}, "args": {"type": "array"}, "note": {"type": ["string", "null"]},
    "any": {"description": "no type"}}}}}])");

TEST(OutputParser, CoderXmlCall) {
  OutputParserOptions options;
  options.family = Family::Qwen3Coder;
  options.tools = kCoderTools;
  const std::string call =
      "<tool_call>\n<function=run>\n<parameter=command>\n42\n</parameter>\n"
      "<parameter=timeout>\n30\n</parameter>\n<parameter=count>\nabc\n</parameter>\n"
      "<parameter=ratio>\n0.5\n</parameter>\n<parameter=force>\nTrue\n</parameter>\n"
      "<parameter=env>\n{\"A\": \"1\"}\n</parameter>\n<parameter=args>\n[\"-l\", 2]\n</parameter>\n"
      "<parameter=note>\nnull\n</parameter>\n<parameter=any>\n[1]\n</parameter>\n"
      "<parameter=unknown>\ntrue\n</parameter>\n</function>\n</tool_call>";
  const std::string args =
      "{\"command\":\"42\",\"timeout\":30,\"count\":\"abc\",\"ratio\":0.5,\"force\":true,"
      "\"env\":{\"A\":\"1\"},\"args\":[\"-l\",2],\"note\":null,\"any\":[1],\"unknown\":true}";
  expect_parse("I will run it.\n\n" + call, {"", "I will run it.", {{"run", args}}}, options);
}

TEST(OutputParser, CoderXmlValuesKeepTheirText) {
  OutputParserOptions options;
  options.family = Family::Qwen3Coder;
  options.tools = kCoderTools;
  // Multi-line code holding tags of the format itself; only one newline is removed per side.
  const std::string code = "\nint main() {\n  // </tool_call> <parameter=x> </function>\n}\n";
  const std::string call =
      "<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/\u00e9.cpp\n"
      "</parameter>\n<parameter=content>\n" +
      code + "\n</parameter>\n</function>\n</tool_call>";
  const std::string args = "{\"path\":\"src/\u00e9.cpp\",\"content\":" + Json(code).dump() + "}";
  expect_parse(call, {"", "", {{"write_file", args}}}, options);
  // Without tools: JSON-looking values are parsed, other text and quoted strings stay text.
  expect_parse(
      "<tool_call>\n<function=f>\n<parameter=a>\n12\n</parameter>\n<parameter=b>\nhello\n"
      "</parameter>\n<parameter=c>\n\"quoted\"\n</parameter>\n<parameter=d>\n\n</parameter>\n"
      "</function>\n</tool_call>",
      {"", "", {{"f", "{\"a\":12,\"b\":\"hello\",\"c\":\"\\\"quoted\\\"\",\"d\":\"\"}"}}});
}

TEST(OutputParser, CoderParallelCalls) {
  const std::string one =
      "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>";
  const std::string two = "<tool_call>\n<function=b>\n</function>\n</tool_call>";
  expect_parse(one + "\n" + two, {"", "", {{"a", "{\"x\":1}"}, {"b", "{}"}}});
  // Two functions inside one block.
  expect_parse("<tool_call>\n<function=a>\n</function>\n<function=b>\n</function>\n</tool_call>",
               {"", "", {{"a", "{}"}, {"b", "{}"}}});
  // A Qwen3 JSON call and a Coder XML call in one output, with reasoning first.
  expect_parse("<think>both</think>" + kWeatherCall + two, {"both", "", {kWeather, {"b", "{}"}}});
}

TEST(CoderParameterValue, TypedBySchema) {
  const auto typed = [](const char* value, const char* schema) {
    const Json s = Json::parse(schema);
    return detail::coder_parameter_value(value, &s).dump();
  };
  EXPECT_EQ(typed("007", R"({"type": "string"})"), "\"007\"");
  EXPECT_EQ(typed("true", R"({"type": "string"})"), "\"true\"");
  EXPECT_EQ(typed("7", R"({"type": "integer"})"), "7");
  EXPECT_EQ(typed("7.5", R"({"type": "integer"})"), "7.5");  // valid JSON is taken as written
  EXPECT_EQ(typed("seven", R"({"type": "integer"})"), "\"seven\"");
  EXPECT_EQ(typed("-1e3", R"({"type": "number"})"), "-1000.0");
  EXPECT_EQ(typed("False", R"({"type": "boolean"})"), "false");
  EXPECT_EQ(typed("None", R"({"type": ["integer", "null"]})"), "null");
  EXPECT_EQ(typed("{\"a\": [1]}", R"({"type": "object"})"), "{\"a\":[1]}");
  EXPECT_EQ(typed("{broken", R"({"type": "object"})"), "\"{broken\"");
  EXPECT_EQ(typed("null", R"({"type": ["string", "null"]})"), "null");
  EXPECT_EQ(typed("5", R"({"type": ["string", "null"]})"), "\"5\"");
  EXPECT_EQ(typed("5", R"({"anyOf": [{"type": "integer"}]})"), "5");  // no usable type
  EXPECT_EQ(detail::coder_parameter_value("text", nullptr).dump(), "\"text\"");
  EXPECT_EQ(detail::coder_parameter_value("[1, 2]", nullptr).dump(), "[1,2]");
}

// Random outputs built from pieces of every tag, JSON and XML: whatever the text, the result must
// not depend on how it is split (fed whole vs one character at a time vs random cuts).
TEST(OutputParser, RandomTextsSplitAnyWay) {
  const std::vector<std::string> alphabet = {"<tool_call>",
                                             "</tool_call>",
                                             "<think>",
                                             "</think>",
                                             "<function=f>",
                                             "</function>",
                                             "<parameter=a>",
                                             "</parameter>",
                                             "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
                                             "\"",
                                             "\\",
                                             "{",
                                             "}",
                                             "<",
                                             ">",
                                             "/",
                                             "\n",
                                             " ",
                                             "x",
                                             "\u00e9",
                                             "\U0001F600",
                                             "<tool_",
                                             "</thi"};
  std::mt19937 rng(2024);
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const size_t n = 1 + rng() % 12;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    for (int variant = 0; variant < 3; ++variant) {
      OutputParserOptions options;
      options.starts_in_reasoning = variant == 1;
      options.parse_reasoning = variant != 2;
      const Parsed whole = feed({text}, options);
      const std::vector<size_t> starts = char_starts(text);
      std::vector<size_t> every(starts.begin() + 1, starts.end());
      EXPECT_EQ(feed(split_at(text, every), options), whole) << Json(text).dump();
      std::vector<size_t> cuts;
      for (size_t i = 1; i < starts.size(); ++i) {
        if (rng() % 3 == 0) cuts.push_back(starts[i]);
      }
      EXPECT_EQ(feed(split_at(text, cuts), options), whole) << Json(text).dump();
    }
  }
}

// A long argument streamed token by token must not make the parser quadratic.
TEST(OutputParser, LongCallStreamsInLinearTime) {
  std::string value;
  for (int i = 0; i < 20000; ++i) value += "line " + std::to_string(i) + " <x> \"q\"\n";
  const std::string text = "<tool_call>\n<function=write>\n<parameter=content>\n" + value +
                           "\n</parameter>\n</function>\n</tool_call>";
  OutputParser parser({});
  Parsed p;
  for (size_t i = 0; i < text.size(); i += 3) append(p, parser.push(text.substr(i, 3)));
  append(p, parser.finish());
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(Json::parse(p.calls[0].second)["content"], value);
}

}  // namespace
}  // namespace rl::chat
