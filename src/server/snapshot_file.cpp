#include "server/snapshot_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "util/error.h"

namespace rl::server {
namespace {

constexpr char kMagic[8] = {'R', 'L', 'S', 'N', 'A', 'P', '0', '1'};
constexpr uint64_t kMaxFingerprint = 4096;
constexpr uint64_t kMaxTokens = uint64_t{1} << 28;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

void write_all(FILE* f, const void* data, size_t size, const std::string& path) {
  if (size && std::fwrite(data, 1, size, f) != size) fail(path, ": write failed (disk full?)");
}

bool read_all(FILE* f, void* data, size_t size) {
  return size == 0 || std::fread(data, 1, size, f) == size;
}

template <typename T>
bool read_value(FILE* f, T& v) {
  return read_all(f, &v, sizeof(T));
}

uint64_t payload_checksum(const std::vector<int32_t>& tokens, const engine::StateSnapshot& s) {
  uint64_t h = checksum_bytes(tokens.data(), tokens.size() * sizeof(int32_t), 0x5eed);
  h = checksum_bytes(s.recurrent.data(), s.recurrent.size(), h);
  return checksum_bytes(s.kv.data(), s.kv.size(), h);
}

}  // namespace

uint64_t checksum_bytes(const void* data, size_t size, uint64_t seed) {
  // Word-at-a-time multiply-xorshift: fast enough for gigabytes, and any flipped bit or
  // reordered word changes the result.
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed ^ (size * 0x9E3779B97F4A7C15ull);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  for (; i < size; ++i) {
    h = (h ^ p[i]) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  return h;
}

void write_snapshot_file(const std::string& path, const std::string& fingerprint,
                         const std::vector<int32_t>& tokens, const engine::StateSnapshot& state) {
  const std::string temp = path + ".tmp";
  {
    FilePtr f(std::fopen(temp.c_str(), "wb"));
    if (!f) fail(temp, ": cannot create (", std::strerror(errno), ")");
    const uint64_t fp_len = fingerprint.size(), n_tokens = tokens.size();
    const uint64_t rec = state.recurrent.size(), kv = state.kv.size();
    const uint64_t sum = payload_checksum(tokens, state);
    write_all(f.get(), kMagic, sizeof(kMagic), temp);
    write_all(f.get(), &fp_len, 8, temp);
    write_all(f.get(), fingerprint.data(), fingerprint.size(), temp);
    write_all(f.get(), &n_tokens, 8, temp);
    write_all(f.get(), &state.position, 8, temp);
    write_all(f.get(), &rec, 8, temp);
    write_all(f.get(), &kv, 8, temp);
    write_all(f.get(), &sum, 8, temp);
    write_all(f.get(), tokens.data(), tokens.size() * sizeof(int32_t), temp);
    write_all(f.get(), state.recurrent.data(), state.recurrent.size(), temp);
    write_all(f.get(), state.kv.data(), state.kv.size(), temp);
    if (std::fflush(f.get()) != 0) fail(temp, ": write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    fail(path, ": cannot rename the written snapshot into place");
  }
}

namespace {

std::optional<SnapshotFileHeader> read_header(FILE* f) {
  char magic[8];
  if (!read_all(f, magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return std::nullopt;
  SnapshotFileHeader h;
  uint64_t fp_len = 0, n_tokens = 0;
  if (!read_value(f, fp_len) || fp_len > kMaxFingerprint) return std::nullopt;
  h.fingerprint.resize(fp_len);
  if (!read_all(f, h.fingerprint.data(), fp_len)) return std::nullopt;
  if (!read_value(f, n_tokens) || n_tokens > kMaxTokens) return std::nullopt;
  if (!read_value(f, h.position) || !read_value(f, h.recurrent_bytes) ||
      !read_value(f, h.kv_bytes) || !read_value(f, h.checksum))
    return std::nullopt;
  if (h.position < 0 || uint64_t(h.position) != n_tokens) return std::nullopt;
  h.tokens.resize(n_tokens);
  if (!read_all(f, h.tokens.data(), n_tokens * sizeof(int32_t))) return std::nullopt;
  return h;
}

}  // namespace

std::optional<SnapshotFileHeader> read_snapshot_header(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return std::nullopt;
  auto h = read_header(f.get());
  if (!h) return std::nullopt;
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;
  const uint64_t header_end = static_cast<uint64_t>(std::ftell(f.get()));
  // Both sizes are bounded by the file, so their sum cannot wrap.
  if (h->recurrent_bytes > size || h->kv_bytes > size ||
      header_end + h->recurrent_bytes + h->kv_bytes != size)
    return std::nullopt;
  h->file_bytes = size;
  return h;
}

engine::StateSnapshot read_snapshot_file(const std::string& path, const std::string& fingerprint,
                                         const std::vector<int32_t>& tokens) {
  auto h = read_snapshot_header(path);
  if (!h) fail(path, ": not a readable snapshot file");
  if (h->fingerprint != fingerprint) fail(path, ": saved for a different model or backend");
  if (h->tokens != tokens) fail(path, ": holds a different prompt than its index entry");
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f ||
      std::fseek(f.get(), long(h->file_bytes - h->recurrent_bytes - h->kv_bytes), SEEK_SET) != 0)
    fail(path, ": cannot read");
  engine::StateSnapshot s;
  s.position = h->position;
  s.recurrent.resize(h->recurrent_bytes);
  s.kv.resize(h->kv_bytes);
  if (!read_all(f.get(), s.recurrent.data(), s.recurrent.size()) ||
      !read_all(f.get(), s.kv.data(), s.kv.size()))
    fail(path, ": truncated");
  if (payload_checksum(h->tokens, s) != h->checksum) fail(path, ": checksum mismatch (damaged)");
  return s;
}

}  // namespace rl::server
