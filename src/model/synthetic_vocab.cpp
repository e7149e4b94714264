// The built-in vocabulary of synthetic models: GPT-2 style byte-level BPE with a handful of
// merges and the Qwen3 control tokens, enough for the tokenizer and chat formatting to work on
// demo models.
#include <string>
#include <vector>

#include "model/synthetic.h"
#include "util/error.h"

namespace rl::model::synthetic {
namespace {

using gguf::Value;
using gguf::ValueType;

// llama.cpp token types.
constexpr int32_t kNormal = 1;
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;
constexpr int32_t kUnused = 5;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's byte-to-unicode table in vocabulary order: the printable bytes ('!'..'~', U+00A1..
// U+00AC, U+00AE..U+00FF) stand for themselves and come first; the other 68 bytes follow in
// byte order, mapped to U+0100 upwards.
std::vector<std::string> byte_tokens() {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    if (printable(b)) tokens.push_back(utf8(static_cast<uint32_t>(b)));
  }
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    if (!printable(b)) tokens.push_back(utf8(next++));
  }
  return tokens;
}

// A few English merges; each pair's halves are tokens by the time the merge is listed. "Ġ" is
// the space byte and "Ċ" the newline byte in the byte-to-unicode alphabet.
constexpr const char* kMerges[] = {"Ġ t",   "Ġ a",  "h e", "i n", "r e", "o n", "e r", "Ġt h",
                                   "Ġth e", "in g", "Ġ s", "a t", "e n", "o r", "i t", "a n",
                                   "Ġ w",   "Ġ o",  "e s", "Ġ c", "Ġ b", "Ġ f", "Ġ m", "Ġ p",
                                   "o u",   "l l",  "Ġ i", "Ġ Ġ", "Ċ Ċ"};

struct Special {
  const char* text;
  int32_t type;
};
constexpr Special kSpecials[] = {{"<|endoftext|>", kControl},   {"<|im_start|>", kControl},
                                 {"<|im_end|>", kControl},      {"<think>", kUserDefined},
                                 {"</think>", kUserDefined},    {"<tool_call>", kUserDefined},
                                 {"</tool_call>", kUserDefined}};

// A short ChatML template; the chat module recognises the Qwen3 family from it.
constexpr const char* kChatTemplate =
    "{#- Qwen3 ChatML (built-in template of redlite mkmodel) -#}\n"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

int64_t natural_size() {
  return 256 + static_cast<int64_t>(std::size(kMerges)) +
         static_cast<int64_t>(std::size(kSpecials));
}

}  // namespace

int64_t builtin_vocab_size() {
  return natural_size();
}

std::vector<std::pair<std::string, Value>> builtin_vocab(int64_t n_vocab) {
  if (n_vocab == 0) n_vocab = natural_size();
  if (n_vocab < natural_size()) {
    fail("the built-in vocabulary has ", natural_size(), " tokens; --vocab ", n_vocab,
         " is too small (use --vocab-from FILE for another vocabulary)");
  }
  std::vector<Value> tokens, types, merges;
  for (auto& t : byte_tokens()) {
    tokens.push_back(Value::string(t));
    types.push_back(Value::i32(kNormal));
  }
  for (const char* m : kMerges) {
    std::string pair = m;
    const size_t space = pair.find(' ');
    tokens.push_back(Value::string(pair.substr(0, space) + pair.substr(space + 1)));
    types.push_back(Value::i32(kNormal));
    merges.push_back(Value::string(pair));
  }
  const uint32_t first_special = static_cast<uint32_t>(tokens.size());
  for (const auto& s : kSpecials) {
    tokens.push_back(Value::string(s.text));
    types.push_back(Value::i32(s.type));
  }
  while (static_cast<int64_t>(tokens.size()) < n_vocab) {
    tokens.push_back(Value::string(str("[PAD", tokens.size(), "]")));
    types.push_back(Value::i32(kUnused));
  }
  const uint32_t endoftext = first_special, im_end = first_special + 2;
  std::vector<std::pair<std::string, Value>> kv;
  kv.emplace_back("tokenizer.ggml.model", Value::string("gpt2"));
  kv.emplace_back("tokenizer.ggml.pre", Value::string("qwen2"));
  kv.emplace_back("tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens)));
  kv.emplace_back("tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types)));
  kv.emplace_back("tokenizer.ggml.merges", Value::array(ValueType::STRING, std::move(merges)));
  kv.emplace_back("tokenizer.ggml.eos_token_id", Value::u32(im_end));
  kv.emplace_back("tokenizer.ggml.padding_token_id", Value::u32(endoftext));
  kv.emplace_back("tokenizer.ggml.bos_token_id", Value::u32(endoftext));
  kv.emplace_back("tokenizer.ggml.add_bos_token", Value::boolean(false));
  kv.emplace_back("tokenizer.chat_template", Value::string(kChatTemplate));
  return kv;
}

}  // namespace rl::model::synthetic
