// The shared store of complete session states (recurrent state + KV rows) keyed by the prompt
// tokens they follow. Any slot can resume from an entry. Entries live in RAM under a byte limit
// and, with a cache directory, spill to disk under a second limit; both evict least recently
// used first. Disk entries found at startup (same model fingerprint) are reused.
//
// Thread-safe. Snapshots are handed out as shared pointers, so an entry evicted while a slot
// is restoring from it stays alive until the slot is done.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace rl::server {

struct PrefixCacheOptions {
  uint64_t ram_bytes = 0;   // 0: nothing kept in RAM (entries go straight to disk, if any)
  uint64_t disk_bytes = 0;  // 0 or no dir: no disk tier
  std::string dir;
  std::string fingerprint;  // identifies model + backend + KV type in disk files
};

struct PrefixCacheStats {
  int64_t ram_entries = 0, disk_entries = 0;
  uint64_t ram_bytes = 0, disk_bytes = 0;
  int64_t inserts = 0, evictions = 0, spills = 0, disk_loads = 0, disk_errors = 0;
};

class PrefixCache {
 public:
  explicit PrefixCache(PrefixCacheOptions options);  // scans options.dir when set
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return options_.ram_bytes > 0 || disk_enabled(); }

  struct Match {
    uint64_t id = 0;     // 0: none
    int64_t length = 0;  // tokens covered
  };
  // The longest entry whose tokens are a proper prefix of `prompt` (at least one prompt token is
  // left to run, since a snapshot carries no logits).
  Match find(std::span<const int32_t> prompt) const;
  bool contains(std::span<const int32_t> tokens) const;
  // Whether an entry of this size could be stored at all.
  bool fits(uint64_t bytes) const;

  // Stores the state after `tokens`. Evicts (RAM -> disk -> gone) to make room. Returns false if
  // the entry is larger than every tier. Disk writes happen outside the lock.
  bool insert(std::vector<int32_t> tokens, engine::StateSnapshot snapshot);

  // The snapshot of entry `id` (read back from disk if needed); nullptr if it is gone or its
  // file is unreadable (the entry is dropped then).
  std::shared_ptr<const engine::StateSnapshot> load(uint64_t id);

  PrefixCacheStats stats() const;

 private:
  struct Entry {
    uint64_t id = 0;
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
    std::shared_ptr<const engine::StateSnapshot> ram;  // null when only on disk
    std::string file;                                  // empty when not on disk
    bool in_ram = false;  // counted in ram_used_ (false while being written to disk)
    uint64_t last_used = 0;
  };
  using EntryList = std::list<Entry>;

  bool disk_enabled() const { return options_.disk_bytes > 0 && !options_.dir.empty(); }
  void scan_dir();
  EntryList::iterator find_id(uint64_t id);
  // Takes entries out of RAM until it fits; returns the ids of those to write to disk.
  std::vector<uint64_t> evict_ram_locked();
  void make_disk_room_locked(uint64_t bytes);
  void erase_locked(EntryList::iterator it);
  void spill(const std::vector<uint64_t>& ids);  // called without the lock
  std::string new_file_name();

  const PrefixCacheOptions options_;
  mutable std::mutex mutex_;
  EntryList entries_;
  uint64_t next_id_ = 1;
  uint64_t run_nonce_ = 0;  // makes file names unique across runs sharing a directory
  mutable uint64_t clock_ = 0;
  uint64_t ram_used_ = 0, disk_used_ = 0;
  PrefixCacheStats counters_;
};

}  // namespace rl::server
