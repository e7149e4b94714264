// Byte-level BPE from a GGUF's tokenizer.ggml.* metadata, with the qwen2 pre-tokenizer and
// special/control tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rl::gguf {
class File;
}

namespace rl::tokenizer {

class Tokenizer {
 public:
  // Throws rl::Error if the file carries no usable tokenizer (names the missing/bad key).
  static Tokenizer from_gguf(const gguf::File& file);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // parse_special: text such as "<|im_start|>" becomes its token (every control and
  // user-defined token; leftmost, then longest match); otherwise it is plain text.
  // add_bos follows tokenizer.ggml.add_bos_token when true. Never adds EOS.
  // Any bytes are accepted: ill-formed UTF-8 is encoded byte by byte, so decode(encode(s)) == s.
  // Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool parse_special,
                              bool add_bos = false) const;
  // The exact bytes of the tokens (byte-level BPE undone; control tokens as their text).
  std::string decode(std::span<const int32_t> tokens) const;
  std::string token_bytes(int32_t id) const;  // bytes of one token

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 if none
  int32_t eos() const;  // -1 if none
  bool add_bos() const;
  // Exact vocab entry as stored in tokenizer.ggml.tokens, i.e. in the byte-level spelling for
  // normal tokens ("\xc4\xa0Hello" for " Hello"); special tokens are stored as their text.
  std::optional<int32_t> find_token(std::string_view text) const;
  bool is_control(int32_t id) const;
  // End-of-generation tokens: eos, eot (tokenizer.ggml.eot_token_id), <|im_end|>,
  // <|endoftext|> where present.
  bool is_end_of_generation(int32_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of tokens into text without ever emitting a broken UTF-8 sequence: bytes of an
// incomplete character are held until it completes. Invalid sequences are emitted as U+FFFD.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(int32_t token);  // complete characters now available
  std::string flush();              // whatever is held (incomplete tail as U+FFFD)

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace rl::tokenizer
