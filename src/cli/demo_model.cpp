#include "cli/demo_model.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "model/synthetic.h"
#include "util/error.h"

namespace rl::cli {

namespace {

std::filesystem::path cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "redlite";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "redlite";
  return std::filesystem::temp_directory_path() / "redlite-cache";
}

}  // namespace

std::string demo_model_path(bool verbose) {
  namespace fs = std::filesystem;
  // Bump the version when the generator changes, so a stale cache is not reused.
  const fs::path path = cache_dir() / "demo-tiny-v2.gguf";
  if (verbose)
    std::fprintf(stderr,
                 "note: no -m given, so this uses the demo model %s: a tiny qwen3next model with "
                 "RANDOM weights, whose output is gibberish. Pass -m your.gguf for a real model.\n",
                 path.c_str());
  if (fs::exists(path)) return path.string();

  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) fail("cannot create the cache folder ", path.parent_path().string(), ": ", ec.message());
  auto spec = model::synthetic::preset("tiny");
  spec.name = "redlite-demo (random weights)";
  spec.shape.n_vocab = 0;  // the built-in vocabulary's own size: no padding tokens
  const auto plan = model::synthetic::make_plan(spec);
  // Write beside and rename, so an interrupted run never leaves a half file in the cache.
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  model::synthetic::write_model(plan, tmp.string());
  fs::rename(tmp, path, ec);
  if (ec) fail("cannot move the demo model into ", path.string(), ": ", ec.message());
  if (verbose) std::fprintf(stderr, "note: generated the demo model once (%s)\n", path.c_str());
  return path.string();
}

}  // namespace rl::cli
