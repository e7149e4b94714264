// The shared prefix cache: longest-prefix lookup, LRU under byte limits, spill to disk and
// reading back, reuse after a restart, and damaged files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "server/prefix_cache.h"
#include "server/snapshot_file.h"
#include "util/error.h"

namespace rl::server {
namespace {

namespace fs = std::filesystem;

engine::StateSnapshot state(int64_t position, size_t bytes, uint8_t fill) {
  engine::StateSnapshot s;
  s.position = position;
  s.recurrent.assign(bytes / 2, fill);
  s.kv.assign(bytes - bytes / 2, uint8_t(fill + 1));
  return s;
}

std::vector<int32_t> seq(int n, int start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

uint64_t entry_bytes(int tokens, size_t state_bytes) {
  return state_bytes + tokens * 4;
}

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("rl_cache_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    if (fs::exists(path_))
      for (auto& f : fs::directory_iterator(path_)) out.push_back(f.path());
    return out;
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

PrefixCacheOptions options(uint64_t ram, uint64_t disk = 0, std::string dir = {},
                           std::string fingerprint = "fp") {
  PrefixCacheOptions o;
  o.ram_bytes = ram;
  o.disk_bytes = disk;
  o.dir = std::move(dir);
  o.fingerprint = std::move(fingerprint);
  return o;
}

TEST(PrefixCache, FindsTheLongestProperPrefix) {
  PrefixCache cache(options(1 << 20));
  EXPECT_TRUE(cache.enabled());
  ASSERT_TRUE(cache.insert(seq(10), state(10, 100, 1)));
  ASSERT_TRUE(cache.insert(seq(20), state(20, 100, 2)));
  ASSERT_TRUE(cache.insert(seq(5, 100), state(5, 100, 3)));  // unrelated
  auto m = cache.find(seq(30));
  EXPECT_EQ(m.length, 20);
  EXPECT_EQ(cache.load(m.id)->recurrent[0], 2);
  EXPECT_EQ(cache.find(seq(20)).length, 10);  // an equal-length entry leaves nothing to run
  EXPECT_EQ(cache.find(seq(10)).length, 0);
  auto diverged = seq(30);
  diverged[15] = -1;
  EXPECT_EQ(cache.find(diverged).length, 10);
  EXPECT_TRUE(cache.contains(seq(20)));
  EXPECT_FALSE(cache.contains(seq(19)));
}

TEST(PrefixCache, EvictsLeastRecentlyUsedUnderTheRamLimit) {
  const size_t sb = 1000;
  PrefixCache cache(options(2 * entry_bytes(10, sb)));
  cache.insert(seq(10, 0), state(10, sb, 1));    // A
  cache.insert(seq(10, 100), state(10, sb, 2));  // B
  cache.load(cache.find(seq(11, 0)).id);         // A used: B is now the oldest
  cache.insert(seq(10, 200), state(10, sb, 3));  // C evicts B
  EXPECT_TRUE(cache.contains(seq(10, 0)));
  EXPECT_FALSE(cache.contains(seq(10, 100)));
  EXPECT_TRUE(cache.contains(seq(10, 200)));
  const auto s = cache.stats();
  EXPECT_EQ(s.ram_entries, 2);
  EXPECT_EQ(s.ram_bytes, 2 * entry_bytes(10, sb));
  EXPECT_EQ(s.evictions, 1);
}

TEST(PrefixCache, RefusesAnEntryLargerThanEveryTier) {
  PrefixCache cache(options(100));
  EXPECT_FALSE(cache.insert(seq(10), state(10, 1000, 1)));
  EXPECT_EQ(cache.stats().ram_entries, 0);
  PrefixCache off(options(0));
  EXPECT_FALSE(off.enabled());
}

TEST(PrefixCache, SpillsToDiskAndReadsBackTheSameBytes) {
  TempDir dir;
  const size_t sb = 4000;
  PrefixCache cache(options(entry_bytes(10, sb), 10 * entry_bytes(10, sb), dir.str()));
  const auto a = state(10, sb, 7);
  cache.insert(seq(10, 0), a);
  cache.insert(seq(10, 100), state(10, sb, 8));  // pushes A to disk
  auto s = cache.stats();
  EXPECT_EQ(s.ram_entries, 1);
  EXPECT_EQ(s.disk_entries, 1);
  EXPECT_EQ(s.spills, 1);
  EXPECT_EQ(dir.files().size(), 1u);
  auto back = cache.load(cache.find(seq(11, 0)).id);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->position, 10);
  EXPECT_EQ(back->recurrent, a.recurrent);
  EXPECT_EQ(back->kv, a.kv);
  EXPECT_EQ(cache.stats().disk_loads, 1);
}

TEST(PrefixCache, DiskLimitDeletesTheOldestFiles) {
  TempDir dir;
  const size_t sb = 1000;
  PrefixCache cache(options(0, 2 * entry_bytes(10, sb) + 500, dir.str()));
  for (int i = 0; i < 4; ++i) cache.insert(seq(10, 100 * i), state(10, sb, uint8_t(i)));
  EXPECT_EQ(cache.stats().disk_entries, 2);
  EXPECT_EQ(dir.files().size(), 2u);
  EXPECT_FALSE(cache.contains(seq(10, 0)));
  EXPECT_TRUE(cache.contains(seq(10, 300)));
  EXPECT_LE(cache.stats().disk_bytes, 2 * entry_bytes(10, sb) + 500);
}

TEST(PrefixCache, ReusesFilesAfterARestartOnlyForTheSameModel) {
  TempDir dir;
  const size_t sb = 1000;
  {
    PrefixCache cache(options(0, 1 << 20, dir.str(), "model-a"));
    cache.insert(seq(10), state(10, sb, 5));
  }
  {
    PrefixCache other(options(0, 1 << 20, dir.str(), "model-b"));
    EXPECT_EQ(other.find(seq(12)).length, 0);
  }
  PrefixCache again(options(0, 1 << 20, dir.str(), "model-a"));
  auto m = again.find(seq(12));
  ASSERT_EQ(m.length, 10);
  auto s = again.load(m.id);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->recurrent[0], 5);
}

TEST(PrefixCache, DamagedFilesAreDroppedNotTrusted) {
  TempDir dir;
  const size_t sb = 1000;
  {
    PrefixCache cache(options(0, 1 << 20, dir.str()));
    cache.insert(seq(10, 0), state(10, sb, 1));
    cache.insert(seq(10, 100), state(10, sb, 2));
  }
  auto files = dir.files();
  ASSERT_EQ(files.size(), 2u);
  {  // flip one byte of the payload of the first, cut the second short
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  fs::resize_file(files[1], fs::file_size(files[1]) - 10);
  PrefixCache cache(options(0, 1 << 20, dir.str()));
  int loaded = 0;
  for (int start : {0, 100}) {
    auto m = cache.find(seq(11, start));
    if (m.length > 0) {
      EXPECT_EQ(cache.load(m.id), nullptr);  // checksum mismatch
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, 1);  // the truncated file was never indexed
  EXPECT_EQ(cache.stats().disk_entries, 0);
  EXPECT_GE(cache.stats().disk_errors, 1);
}

TEST(SnapshotFile, RoundTripAndHeaderChecks) {
  TempDir dir;
  fs::create_directories(dir.str());
  const std::string path = dir.str() + "/x.rlsnap";
  const auto s = state(3, 64, 9);
  write_snapshot_file(path, "fp", {1, 2, 3}, s);
  auto h = read_snapshot_header(path);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(h->recurrent_bytes + h->kv_bytes, 64u);
  EXPECT_THROW(read_snapshot_file(path, "other", {1, 2, 3}), Error);
  EXPECT_THROW(read_snapshot_file(path, "fp", {1, 2, 4}), Error);
  EXPECT_EQ(read_snapshot_file(path, "fp", {1, 2, 3}).kv, s.kv);
  std::ofstream(dir.str() + "/junk.rlsnap") << "not a snapshot";
  EXPECT_FALSE(read_snapshot_header(dir.str() + "/junk.rlsnap"));
}

}  // namespace
}  // namespace rl::server
