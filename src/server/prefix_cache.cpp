#include "server/prefix_cache.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "server/snapshot_file.h"
#include "util/error.h"
#include "util/log.h"

namespace rl::server {

namespace fs = std::filesystem;

PrefixCache::PrefixCache(PrefixCacheOptions options) : options_(std::move(options)) {
  run_nonce_ = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  if (disk_enabled()) scan_dir();
}

PrefixCache::~PrefixCache() = default;

void PrefixCache::scan_dir() {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (!fs::is_directory(options_.dir)) fail("--cache-dir ", options_.dir, ": not a directory");
  struct Found {
    fs::file_time_type time;
    SnapshotFileHeader header;
    std::string path;
  };
  std::vector<Found> found;
  for (const auto& item : fs::directory_iterator(options_.dir, ec)) {
    const std::string path = item.path().string();
    if (!item.is_regular_file()) continue;
    if (item.path().extension() == ".tmp" && item.path().stem().extension() == ".rlsnap") {
      fs::remove(item.path(), ec);  // left over from an interrupted write
      continue;
    }
    if (item.path().extension() != ".rlsnap") continue;
    auto header = read_snapshot_header(path);
    if (!header) {
      log_warn("prefix cache: ignoring unreadable ", path);
      continue;
    }
    if (header->fingerprint != options_.fingerprint) continue;  // another model's state
    found.push_back({item.last_write_time(ec), std::move(*header), path});
  }
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.time < b.time; });
  std::lock_guard lock(mutex_);
  for (auto& f : found) {
    Entry e;
    e.id = next_id_++;
    e.tokens = std::move(f.header.tokens);
    e.bytes = f.header.file_bytes;
    e.file = f.path;
    e.last_used = ++clock_;
    disk_used_ += e.bytes;
    entries_.push_back(std::move(e));
  }
  make_disk_room_locked(0);
  if (!entries_.empty())
    log_info("prefix cache: reusing ", entries_.size(), " saved states from ", options_.dir);
}

PrefixCache::Match PrefixCache::find(std::span<const int32_t> prompt) const {
  std::lock_guard lock(mutex_);
  Match best;
  for (const Entry& e : entries_) {
    const int64_t n = static_cast<int64_t>(e.tokens.size());
    if (n <= best.length || n >= static_cast<int64_t>(prompt.size())) continue;
    if (std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin())) best = {e.id, n};
  }
  return best;
}

bool PrefixCache::contains(std::span<const int32_t> tokens) const {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_)
    if (std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) return true;
  return false;
}

bool PrefixCache::fits(uint64_t bytes) const {
  return bytes <= options_.ram_bytes || (disk_enabled() && bytes <= options_.disk_bytes);
}

bool PrefixCache::insert(std::vector<int32_t> tokens, engine::StateSnapshot snapshot) {
  const uint64_t bytes = snapshot.bytes() + tokens.size() * sizeof(int32_t);
  if (!fits(bytes)) return false;
  std::vector<uint64_t> to_disk;
  {
    std::lock_guard lock(mutex_);
    for (Entry& e : entries_) {
      if (e.tokens == tokens) {
        e.last_used = ++clock_;
        return true;
      }
    }
    Entry e;
    e.id = next_id_++;
    e.tokens = std::move(tokens);
    e.bytes = bytes;
    e.ram = std::make_shared<const engine::StateSnapshot>(std::move(snapshot));
    e.last_used = ++clock_;
    e.in_ram = true;
    ram_used_ += bytes;
    entries_.push_back(std::move(e));
    ++counters_.inserts;
    to_disk = evict_ram_locked();
  }
  spill(to_disk);
  return true;
}

std::vector<uint64_t> PrefixCache::evict_ram_locked() {
  std::vector<uint64_t> to_disk;
  while (ram_used_ > options_.ram_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->in_ram && (victim == entries_.end() || it->last_used < victim->last_used))
        victim = it;
    if (victim == entries_.end()) break;
    victim->in_ram = false;
    ram_used_ -= victim->bytes;
    if (disk_enabled() && victim->bytes <= options_.disk_bytes) {
      to_disk.push_back(victim->id);  // stays readable from RAM until written
    } else {
      ++counters_.evictions;
      erase_locked(victim);
    }
  }
  return to_disk;
}

void PrefixCache::make_disk_room_locked(uint64_t bytes) {
  while (disk_used_ + bytes > options_.disk_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (!it->file.empty() && (victim == entries_.end() || it->last_used < victim->last_used))
        victim = it;
    if (victim == entries_.end()) break;
    ++counters_.evictions;
    erase_locked(victim);
  }
}

void PrefixCache::erase_locked(EntryList::iterator it) {
  if (it->in_ram) ram_used_ -= it->bytes;
  if (!it->file.empty()) {
    disk_used_ -= it->bytes;
    std::error_code ec;
    fs::remove(it->file, ec);
  }
  entries_.erase(it);
}

std::string PrefixCache::new_file_name() {
  char name[64];
  std::snprintf(name, sizeof(name), "state-%016llx-%06llu.rlsnap",
                static_cast<unsigned long long>(run_nonce_),
                static_cast<unsigned long long>(next_id_++));
  return (fs::path(options_.dir) / name).string();
}

PrefixCache::EntryList::iterator PrefixCache::find_id(uint64_t id) {
  return std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
}

void PrefixCache::spill(const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) {
    std::shared_ptr<const engine::StateSnapshot> state;
    std::vector<int32_t> tokens;
    std::string path;
    {
      std::lock_guard lock(mutex_);
      auto it = find_id(id);
      if (it == entries_.end() || !it->ram) continue;
      make_disk_room_locked(it->bytes);
      disk_used_ += it->bytes;  // reserved while writing
      state = it->ram;
      tokens = it->tokens;
      path = new_file_name();
    }
    bool ok = true;
    try {
      write_snapshot_file(path, options_.fingerprint, tokens, *state);
    } catch (const Error& e) {
      log_warn("prefix cache: ", e.what());
      ok = false;
    }
    std::lock_guard lock(mutex_);
    auto it = find_id(id);
    if (it == entries_.end()) {  // cannot happen today; keep the books right regardless
      disk_used_ -= state->bytes() + tokens.size() * sizeof(int32_t);
      std::error_code ec;
      fs::remove(path, ec);
      continue;
    }
    if (ok) {
      it->file = path;
      it->ram.reset();
      ++counters_.spills;
    } else {
      disk_used_ -= it->bytes;
      ++counters_.disk_errors;
      entries_.erase(it);
    }
  }
}

std::shared_ptr<const engine::StateSnapshot> PrefixCache::load(uint64_t id) {
  std::string path;
  std::vector<int32_t> tokens;
  {
    std::lock_guard lock(mutex_);
    auto it = find_id(id);
    if (it == entries_.end()) return nullptr;
    it->last_used = ++clock_;
    if (it->ram) return it->ram;
    path = it->file;
    tokens = it->tokens;
  }
  try {
    auto state = std::make_shared<const engine::StateSnapshot>(
        read_snapshot_file(path, options_.fingerprint, tokens));
    std::lock_guard lock(mutex_);
    ++counters_.disk_loads;
    return state;
  } catch (const Error& e) {
    log_warn("prefix cache: dropping a saved state: ", e.what());
    std::lock_guard lock(mutex_);
    ++counters_.disk_errors;
    auto it = find_id(id);
    if (it != entries_.end()) erase_locked(it);
    return nullptr;
  }
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard lock(mutex_);
  PrefixCacheStats s = counters_;
  for (const Entry& e : entries_) {
    if (e.in_ram) ++s.ram_entries;
    if (!e.file.empty()) ++s.disk_entries;
  }
  s.ram_bytes = ram_used_;
  s.disk_bytes = disk_used_;
  return s;
}

}  // namespace rl::server
