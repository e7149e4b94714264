// The errors an API request can end with: an HTTP status, a message meant for the client, and
// the parameter at fault. Rendered as OpenAI-style or Anthropic-style JSON by the routes.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rl::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {})
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }  // empty: not about one parameter
  const std::string& code() const { return code_; }    // empty: derived from the status

  // Extra response headers (Retry-After on 429, Allow on 405).
  std::vector<std::pair<std::string, std::string>> headers;

 private:
  int status_;
  std::string param_;
  std::string code_;
};

[[noreturn]] inline void bad_request(const std::string& message, std::string param = {}) {
  throw ApiError(400, message, std::move(param));
}

enum class ApiStyle { OpenAI, Anthropic };

// {"error": {"message", "type", "param", "code"}}
std::string openai_error_body(int status, const std::string& message, const std::string& param,
                              const std::string& code);
// {"type": "error", "error": {"type", "message"}}
std::string anthropic_error_body(int status, const std::string& message);

std::string error_body(ApiStyle style, const ApiError& error);
std::string error_body(ApiStyle style, int status, const std::string& message);

// The standard reason phrase ("Not Found"); "Error" for codes this server does not use.
const char* status_text(int status);

}  // namespace rl::server
