// Errors: one exception type carrying a complete, user-facing message.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace rl {

// Thrown for every recoverable failure (bad file, bad flag, bad request). The message is meant
// to be printed as-is: it names what went wrong and where.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates anything streamable: str("tensor ", name, " at offset ", off).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str(args...));
}

}  // namespace rl
