// Runs the built `redlite` binary from tests: arguments quoted, stdin from bytes, stdout and
// stderr captured, exit status decoded (-1 if it died on a signal). Tests using it are skipped,
// not passed, when the binary has not been built.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace rl::test {

struct CliResult {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out, err;
};

class CliTest : public testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::string(RL_BINARY_DIR) + "/redlite";
    if (!std::filesystem::exists(binary_)) GTEST_SKIP() << binary_ << " is not built";
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("rl_cli_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string write(const std::string& name, const std::string& bytes) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  CliResult run(const std::vector<std::string>& args, const std::string& stdin_bytes = "") {
    std::string command = binary_;
    for (const auto& a : args) {
      std::string quoted = "'";
      for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      command += " " + quoted + "'";
    }
    const std::string in = write("stdin", stdin_bytes);
    const std::string out = path("stdout"), err = path("stderr");
    command += " < '" + in + "' > '" + out + "' 2> '" + err + "'";
    const int raw = std::system(command.c_str());
    CliResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read(out);
    r.err = read(err);
    return r;
  }

  std::string binary_;
  std::filesystem::path dir_;
};

}  // namespace rl::test
