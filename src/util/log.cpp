#include "util/log.h"

#include <unistd.h>

#include <atomic>

namespace rl {

namespace {
std::atomic<LogLevel> g_level{LogLevel::Info};
}

void set_log_level(LogLevel level) {
  g_level.store(level);
}
LogLevel log_level() {
  return g_level.load();
}

void log_line(LogLevel level, const std::string& line) {
  static const char* const kPrefix[] = {"debug: ", "", "warning: ", "error: ", ""};
  std::string out = kPrefix[static_cast<int>(level)] + line + "\n";
  // One write(2) per line keeps lines whole across threads.
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::write(2, out.data() + done, out.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace rl
