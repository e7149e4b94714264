#include "tokenizer/tokenizer.h"

#include <limits>
#include <unordered_map>

#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace rl::tokenizer {

namespace {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kPreKey = "tokenizer.ggml.pre";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";

// Many short strings in one allocation.
class StringTable {
 public:
  void reserve(size_t n, size_t bytes) {
    offsets_.reserve(n + 1);
    data_.reserve(bytes);
  }
  void push_back(std::string_view s) {
    data_.append(s);
    offsets_.push_back(data_.size());
  }
  size_t size() const { return offsets_.size() - 1; }
  std::string_view operator[](size_t i) const {
    return std::string_view(data_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }

 private:
  std::string data_;
  std::vector<size_t> offsets_{0};
};

// "<0x41>" -> 0x41, as byte tokens are spelled in SentencePiece-style vocabs; -1 otherwise.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  constexpr std::string_view kDigits = "0123456789ABCDEF";
  const size_t high = kDigits.find(text[3]), low = kDigits.find(text[4]);
  if (high == std::string_view::npos || low == std::string_view::npos) return -1;
  return static_cast<int>(high * 16 + low);
}

const gguf::Array& required_string_array(const gguf::File& file, const char* key) {
  const gguf::Array* array = file.get_array(key);
  if (array == nullptr) fail(file.path(), ": ", key, ": missing (the file carries no tokenizer)");
  bool all_strings = array->element_type == gguf::ValueType::STRING;
  for (const auto& item : array->items) all_strings = all_strings && item.as_string() != nullptr;
  if (!all_strings) {
    fail(file.path(), ": ", key, ": expected an array of strings, found an array of ",
         gguf::value_type_name(array->element_type));
  }
  return *array;
}

}  // namespace

struct Tokenizer::Impl {
  StringTable texts;  // as stored in tokenizer.ggml.tokens
  StringTable bytes;  // what each token stands for
  std::vector<int32_t> types;
  std::unordered_map<std::string_view, int32_t> by_text;  // views into texts; first id wins
  BpeModel bpe;
  SpecialTokenMatcher specials;
  Qwen2PreTokenizer pre_tokenizer;
  int32_t bos = -1, eos = -1;
  bool add_bos = false;
  std::vector<int32_t> end_of_generation;

  int32_t n_vocab() const { return static_cast<int32_t>(texts.size()); }

  void check_id(int32_t id) const {
    if (id < 0 || id >= n_vocab()) {
      fail("token id ", id, " is out of range (the vocab has ", n_vocab(), " tokens: 0..",
           n_vocab() - 1, ")");
    }
  }

  void encode_plain(std::string_view text, std::vector<int32_t>& out,
                    std::vector<std::string_view>& pieces, BpeModel::Workspace& ws) const {
    pieces.clear();
    pre_tokenizer.split(text, pieces);
    for (std::string_view piece : pieces) bpe.encode(piece, out, ws);
  }

  void load_vocab(const gguf::File& file);
  void load_merges(const gguf::File& file);
  void load_special_ids(const gguf::File& file);
};

void Tokenizer::Impl::load_vocab(const gguf::File& file) {
  const gguf::Array& tokens = required_string_array(file, kTokensKey);
  if (tokens.items.empty()) fail(file.path(), ": ", kTokensKey, ": empty");
  if (tokens.items.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail(file.path(), ": ", kTokensKey, ": ", tokens.items.size(), " tokens is too many");
  }
  const gguf::Array* type_array = file.get_array(kTypesKey);
  if (type_array == nullptr) fail(file.path(), ": ", kTypesKey, ": missing");
  if (type_array->items.size() != tokens.items.size()) {
    fail(file.path(), ": ", kTypesKey, ": ", type_array->items.size(), " entries for ",
         tokens.items.size(), " tokens");
  }

  const size_t n = tokens.items.size();
  size_t total = 0;
  for (const auto& item : tokens.items) total += item.as_string()->size();
  texts.reserve(n, total);
  bytes.reserve(n, total);
  types.resize(n);
  by_text.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::optional<int64_t> type = type_array->items[i].as_int();
    if (!type || *type < kUndefined || *type > kByte) {
      fail(file.path(), ": ", kTypesKey, "[", i, "]: not a token type (0..6)");
    }
    types[i] = static_cast<int32_t>(*type);
    const std::string_view text = *tokens.items[i].as_string();
    texts.push_back(text);
    if (types[i] == kControl || types[i] == kUserDefined) {
      bytes.push_back(text);  // written in the text as they are
      specials.add(text, static_cast<int32_t>(i));
    } else if (const int byte = types[i] == kByte ? parse_byte_token(text) : -1; byte >= 0) {
      bytes.push_back(std::string(1, static_cast<char>(byte)));
    } else {
      bytes.push_back(byte_level::decode(text));
    }
  }
  for (size_t i = 0; i < n; ++i) by_text.emplace(texts[i], static_cast<int32_t>(i));

  for (int b = 0; b < 256; ++b) {
    const auto it = by_text.find(byte_level::encode(std::string(1, static_cast<char>(b))));
    if (it != by_text.end()) bpe.set_byte_token(static_cast<uint8_t>(b), it->second);
  }
}

void Tokenizer::Impl::load_merges(const gguf::File& file) {
  const gguf::Array& merges = required_string_array(file, kMergesKey);
  std::string joined;
  for (size_t i = 0; i < merges.items.size(); ++i) {
    const std::string_view merge = *merges.items[i].as_string();
    // Byte-level vocab text never contains ' ' (it is spelled U+0120), so the one space is the
    // separator.
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos || merge.find(' ', space + 1) != std::string_view::npos) {
      fail(file.path(), ": ", kMergesKey, "[", i, "]: '", merge,
           "' is not two tokens separated by one space");
    }
    const std::string_view left = merge.substr(0, space), right = merge.substr(space + 1);
    joined.assign(left).append(right);
    const auto l = by_text.find(left), r = by_text.find(right), m = by_text.find(joined);
    // A merge that involves text outside the vocab can never produce a token; it is ignored
    // rather than refused so that a trimmed vocab still loads.
    if (l == by_text.end() || r == by_text.end() || m == by_text.end()) continue;
    bpe.add_merge(l->second, r->second, m->second);
  }
}

void Tokenizer::Impl::load_special_ids(const gguf::File& file) {
  const auto optional_id = [&](const char* key) -> int32_t {
    const std::optional<int64_t> id = file.get_int(key);
    if (!id) return -1;
    if (*id < 0 || *id >= n_vocab()) {
      fail(file.path(), ": ", key, ": ", *id, " is not a token id (the vocab has ", n_vocab(),
           " tokens)");
    }
    return static_cast<int32_t>(*id);
  };
  bos = optional_id("tokenizer.ggml.bos_token_id");
  eos = optional_id("tokenizer.ggml.eos_token_id");
  optional_id("tokenizer.ggml.padding_token_id");  // validated; nothing here uses it
  const int32_t eot = optional_id("tokenizer.ggml.eot_token_id");
  add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  if (add_bos && bos < 0) {
    fail(file.path(), ": tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id ",
         "is missing");
  }

  for (int32_t id : {eos, eot}) {
    if (id >= 0) end_of_generation.push_back(id);
  }
  for (std::string_view text : {"<|im_end|>", "<|endoftext|>"}) {
    const auto it = by_text.find(text);
    if (it != by_text.end()) end_of_generation.push_back(it->second);
  }
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  const std::optional<std::string> model = file.get_string(kModelKey);
  if (!model) fail(file.path(), ": ", kModelKey, ": missing (the file carries no tokenizer)");
  if (*model != "gpt2") {
    fail(file.path(), ": ", kModelKey, ": '", *model,
         "' is not supported (only byte-level BPE, 'gpt2')");
  }
  const std::optional<std::string> pre = file.get_string(kPreKey);
  if (!pre) fail(file.path(), ": ", kPreKey, ": missing");
  if (*pre != "qwen2") {
    fail(file.path(), ": ", kPreKey, ": '", *pre, "' is not supported (only 'qwen2')");
  }

  auto impl = std::make_unique<Impl>();
  impl->load_vocab(file);
  impl->load_merges(file);
  impl->load_special_ids(file);
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special,
                                       bool add_bos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  if (add_bos && impl_->add_bos) out.push_back(impl_->bos);

  std::vector<std::string_view> pieces;
  BpeModel::Workspace ws;
  if (!parse_special) {
    impl_->encode_plain(text, out, pieces, ws);
    return out;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    const SpecialTokenMatcher::Match match = impl_->specials.find(text, pos);
    if (match.id < 0) break;
    impl_->encode_plain(text.substr(pos, match.pos - pos), out, pieces, ws);
    out.push_back(match.id);
    pos = match.pos + match.length;
  }
  impl_->encode_plain(text.substr(pos), out, pieces, ws);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> tokens) const {
  std::string out;
  for (int32_t id : tokens) {
    impl_->check_id(id);
    out.append(impl_->bytes[id]);
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  impl_->check_id(id);
  return std::string(impl_->bytes[id]);
}

int32_t Tokenizer::n_vocab() const {
  return impl_->n_vocab();
}
int32_t Tokenizer::bos() const {
  return impl_->bos;
}
int32_t Tokenizer::eos() const {
  return impl_->eos;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const auto it = impl_->by_text.find(text);
  if (it == impl_->by_text.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->types[id] == kControl;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  for (int32_t eog : impl_->end_of_generation) {
    if (id == eog) return true;
  }
  return false;
}

// ---- StreamDecoder -----------------------------------------------------------------------

namespace {

// Moves the complete characters at the front of pending to out (ill-formed sequences as
// U+FFFD). A well-formed but unfinished character at the end stays in pending unless
// final is set, when it too becomes U+FFFD.
void drain(std::string& pending, std::string& out, bool final) {
  size_t pos = 0;
  while (pos < pending.size()) {
    const utf8::Step step = utf8::decode(pending, pos);
    if (step.status == utf8::Status::Truncated && !final) break;
    if (step.status == utf8::Status::Ok) {
      out.append(pending, pos, step.length);
    } else {
      out.append(utf8::kReplacement);
    }
    pos += step.length;
  }
  pending.erase(0, pos);
}

}  // namespace

std::string StreamDecoder::push(int32_t token) {
  pending_ += tokenizer_.token_bytes(token);
  std::string out;
  drain(pending_, out, /*final=*/false);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  drain(pending_, out, /*final=*/true);
  return out;
}

}  // namespace rl::tokenizer
