#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <memory>
#include <string>

#include "util/error.h"

namespace rl::tokenizer {

namespace {

// clang-format off
// Unicode White_Space (stable since Unicode 6.3), for use inside a character class.
#define RL_WHITE_SPACE \
  "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}"
    "| ?[^" RL_WHITE_SPACE "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" RL_WHITE_SPACE "]*[\\r\\n]+"
    "|[" RL_WHITE_SPACE "]+(?![^" RL_WHITE_SPACE "])"
    "|[" RL_WHITE_SPACE "]+";

#undef RL_WHITE_SPACE
// clang-format on

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return str("PCRE2 error ", code);
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

Qwen2PreTokenizer::Qwen2PreTokenizer() {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kQwen2Pattern), PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset,
                        nullptr);
  if (code_ == nullptr) {
    fail("qwen2 pre-tokenizer: PCRE2 rejects the pattern at offset ", error_offset, ": ",
         pcre2_message(error));
  }
  // JIT is only a speed-up; the interpreter gives the same matches where JIT is unavailable.
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Qwen2PreTokenizer::~Qwen2PreTokenizer() {
  pcre2_code_free(code_);
}

void Qwen2PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  if (!match) fail("qwen2 pre-tokenizer: out of memory");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, 0, match.get(), nullptr)
                        : pcre2_match(code_, subject, text.size(), pos, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {  // only ill-formed bytes are left
      pieces.push_back(text.substr(pos));
      return;
    }
    if (rc < 0) fail("qwen2 pre-tokenizer: at byte ", pos, ": ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end <= begin || begin < pos) {  // every alternative consumes a character
      fail("qwen2 pre-tokenizer: empty match at byte ", begin);
    }
    if (begin > pos) pieces.push_back(text.substr(pos, begin - pos));  // ill-formed bytes
    pieces.push_back(text.substr(begin, end - begin));
    pos = end;
  }
}

}  // namespace rl::tokenizer
