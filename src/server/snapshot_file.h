// The on-disk form of a prefix-cache entry: a header (magic, model fingerprint, sizes, checksum),
// the prompt tokens, then the snapshot bytes. Files are written to a temporary name and renamed,
// so a crash never leaves a half-written entry under a valid name.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace rl::server {

struct SnapshotFileHeader {
  std::string fingerprint;  // which model/backend/KV type the state belongs to
  std::vector<int32_t> tokens;
  int64_t position = 0;
  uint64_t recurrent_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t checksum = 0;
  uint64_t file_bytes = 0;
};

// Throws rl::Error naming the file on any I/O failure.
void write_snapshot_file(const std::string& path, const std::string& fingerprint,
                         const std::vector<int32_t>& tokens, const engine::StateSnapshot& state);
// Reads the header and tokens only; nullopt if the file is not a snapshot file or is damaged.
std::optional<SnapshotFileHeader> read_snapshot_header(const std::string& path);
// Reads the whole entry and checks sizes and checksum against the expected fingerprint and
// tokens; throws rl::Error explaining any mismatch.
engine::StateSnapshot read_snapshot_file(const std::string& path, const std::string& fingerprint,
                                         const std::vector<int32_t>& tokens);

// A fast 64-bit checksum over bytes, chained through `seed`.
uint64_t checksum_bytes(const void* data, size_t size, uint64_t seed);

}  // namespace rl::server
