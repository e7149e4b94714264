// Parameter parsing shared by the OpenAI and Anthropic request parsers.
#include <charconv>
#include <random>

#include "server/api_error.h"
#include "server/requests.h"
#include "util/error.h"

namespace rl::server {

uint64_t random_seed() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

std::vector<std::string> parse_stop(const Json& body, std::string_view key, size_t max_count,
                                    bool allow_string) {
  const Json* v = find_field(body, key);
  if (!v) return {};
  const std::string name(key);
  std::vector<std::string> stops;
  auto add = [&](const Json& s, const std::string& where) {
    if (!s.is_string())
      bad_request(str("'", where, "' must be a string, not ", json_type_name(s)), where);
    std::string text = s.get<std::string>();
    if (text.empty()) bad_request(str("'", where, "' must not be empty"), where);
    if (text.size() > 1024) bad_request(str("'", where, "' is longer than 1024 bytes"), where);
    stops.push_back(std::move(text));
  };
  if (v->is_string() && allow_string) {
    add(*v, name);
  } else if (v->is_array()) {
    if (v->size() > max_count)
      bad_request(str("'", name, "' may hold at most ", max_count, " strings, got ", v->size()),
                  name);
    for (size_t i = 0; i < v->size(); ++i) add((*v)[i], index_path(name, i));
  } else {
    bad_request(str("'", name, "' must be ", allow_string ? "a string or " : "",
                    "an array of strings, not ", json_type_name(*v)),
                name);
  }
  return stops;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const Json& body, int32_t n_vocab) {
  const Json* v = read_object(body, "logit_bias");
  if (!v) return {};
  std::vector<std::pair<int32_t, float>> bias;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    const std::string where = str("logit_bias.", key);
    int64_t id = -1;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= n_vocab)
      bad_request(
          str("'logit_bias' keys must be token ids from 0 to ", n_vocab - 1, ", got '", key, "'"),
          "logit_bias");
    if (!it->is_number())
      bad_request(str("'", where, "' must be a number, not ", json_type_name(*it)), "logit_bias");
    const double b = it->get<double>();
    if (!(b >= -100.0 && b <= 100.0))
      bad_request(str("'", where, "' must be between -100 and 100, got ", brief_json(*it)),
                  "logit_bias");
    bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return bias;
}

TokenizeRequest parse_tokenize(const Json& body) {
  TokenizeRequest r;
  r.content = require_string(body, "content");
  r.add_special = read_bool(body, "add_special").value_or(false);
  r.parse_special = read_bool(body, "parse_special").value_or(true);
  r.with_pieces = read_bool(body, "with_pieces").value_or(false);
  return r;
}

std::vector<int32_t> parse_detokenize(const Json& body, int32_t n_vocab) {
  const Json& tokens = require_array(body, "tokens");
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Json& t = tokens[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      const std::string where = index_path("tokens", i);
      bad_request(
          str("'", where, "' must be a token id from 0 to ", n_vocab - 1, ", got ", brief_json(t)),
          "tokens");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace rl::server
