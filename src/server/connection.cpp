#include "server/connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rl::server {
namespace {

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

bool same_host(const sockaddr_storage& a, socklen_t len, const std::string& host) {
  char name[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, name, sizeof(name), nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return false;
  return host == name;
}

bool matches(int fd, const std::string& remote_addr, int remote_port, int local_port) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  return port_of(peer) == remote_port && port_of(local) == local_port &&
         same_host(peer, peer_len, remote_addr);
}

}  // namespace

ConnectionWatch::ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_port <= 0 || local_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (matches(int(fd), remote_addr, remote_port, local_port)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(dir);
}

bool ConnectionWatch::alive() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return true;  // nothing to report
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return false;
  if (p.revents & POLLIN) {
    char byte;
    // 0: orderly close. Data: a pipelined request, the client is still there.
    const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  }
  return true;
}

}  // namespace rl::server
