// Notices a client that went away while its request is still being worked on.
//
// cpp-httplib 0.11 does not hand request handlers their socket, and a non-streaming handler
// writes nothing until the answer is complete, so a vanished client would otherwise keep a
// session busy to the end. ConnectionWatch finds the handler's socket by its address pair
// (local and remote address and port are unique per live TCP connection) among this process's
// descriptors, once per request, and then polls it without reading.
#pragma once
#include <string>

namespace rl::server {

class ConnectionWatch {
 public:
  ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port);
  // False once the peer has closed or reset the connection. True when the socket could not be
  // identified (then only timeouts end the request).
  bool alive() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace rl::server
