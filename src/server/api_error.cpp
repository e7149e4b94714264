#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace rl::server {
namespace {

using Json = nlohmann::ordered_json;

const char* openai_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

const char* openai_code(int status) {
  switch (status) {
    case 401:
      return "invalid_api_key";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_exceeded";
    case 503:
      return "server_unavailable";
    case 504:
      return "timeout";
    default:
      return status >= 500 ? "internal_error" : "invalid_request";
  }
}

// https://docs.anthropic.com/en/api/errors lists these types.
const char* anthropic_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string openai_error_body(int status, const std::string& message, const std::string& param,
                              const std::string& code) {
  Json error = {{"message", message},
                {"type", openai_type(status)},
                {"param", param.empty() ? Json(nullptr) : Json(param)},
                {"code", code.empty() ? openai_code(status) : code}};
  return dump(Json{{"error", error}});
}

std::string anthropic_error_body(int status, const std::string& message) {
  return dump(
      Json{{"type", "error"}, {"error", {{"type", anthropic_type(status)}, {"message", message}}}});
}

std::string error_body(ApiStyle style, const ApiError& error) {
  if (style == ApiStyle::Anthropic) return anthropic_error_body(error.status(), error.what());
  return openai_error_body(error.status(), error.what(), error.param(), error.code());
}

std::string error_body(ApiStyle style, int status, const std::string& message) {
  return error_body(style, ApiError(status, message));
}

const char* status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

}  // namespace rl::server
