// Minimal logging to stderr. Messages go out whole (one write per line) so that lines from
// different threads do not interleave.
#pragma once
#include <string>

#include "util/error.h"

namespace rl {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Quiet = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& line);

template <typename... Args>
void log_info(const Args&... args) {
  if (log_level() <= LogLevel::Info) log_line(LogLevel::Info, str(args...));
}
template <typename... Args>
void log_warn(const Args&... args) {
  if (log_level() <= LogLevel::Warn) log_line(LogLevel::Warn, str(args...));
}
template <typename... Args>
void log_debug(const Args&... args) {
  if (log_level() <= LogLevel::Debug) log_line(LogLevel::Debug, str(args...));
}

}  // namespace rl
