// The committed src/quant/iq_tables.h must be exactly what scripts/gen_quant_tables.py makes of
// ../shared/testdata/quants/quant_tables.json, and its values must be the JSON's (read here
// independently with nlohmann::json).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "quant/iq_tables.h"

namespace rl::quant {
namespace {

const std::string kJson = std::string(RL_SHARED_DIR) + "/testdata/quants/quant_tables.json";
const std::string kScript = std::string(RL_SOURCE_DIR) + "/scripts/gen_quant_tables.py";
const std::string kHeader = std::string(RL_SOURCE_DIR) + "/src/quant/iq_tables.h";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(IqTables, CommittedHeaderMatchesTheGenerator) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("rl_iq_tables_" + std::to_string(getpid()) + ".h");
  const std::string command = "python3 '" + kScript + "' '" + kJson + "' '" + out.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string generated = read_file(out.string());
  std::filesystem::remove(out);
  const std::string committed = read_file(kHeader);
  ASSERT_FALSE(generated.empty());
  EXPECT_TRUE(generated == committed)
      << "src/quant/iq_tables.h is stale: rerun scripts/gen_quant_tables.py " << kJson << " "
      << kHeader;
}

TEST(IqTables, GeneratorRejectsBadUsage) {
  const std::string command = "python3 '" + kScript + "' >/dev/null 2>&1";
  EXPECT_NE(std::system(command.c_str()), 0);
}

template <typename Table>
void expect_table(const nlohmann::json& tables, const std::string& name, const Table& table) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(tables.contains(name));
  const auto& values = tables[name]["values"];
  ASSERT_EQ(values.size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    ASSERT_EQ(values[i].get<typename Table::value_type>(), table[i]) << "index " << i;
  }
}

TEST(IqTables, ValuesEqualTheJson) {
  const nlohmann::json doc = nlohmann::json::parse(read_file(kJson));
  const auto& t = doc["tables"];
  expect_table(t, "kmask_iq2xs", tables::kmask_iq2xs);
  expect_table(t, "ksigns_iq2xs", tables::ksigns_iq2xs);
  expect_table(t, "kvalues_iq4nl", tables::kvalues_iq4nl);
  expect_table(t, "iq2xxs_grid", tables::iq2xxs_grid);
  expect_table(t, "iq2xs_grid", tables::iq2xs_grid);
  expect_table(t, "iq2s_grid", tables::iq2s_grid);
  expect_table(t, "iq3xxs_grid", tables::iq3xxs_grid);
  expect_table(t, "iq3s_grid", tables::iq3s_grid);
}

TEST(IqTables, SignTableHasEvenParity) {
  // ggml stores 7 sign bits per 8 values; the 8th makes the count of minus signs even.
  for (size_t i = 0; i < tables::ksigns_iq2xs.size(); ++i) {
    EXPECT_EQ(tables::ksigns_iq2xs[i] & 127, static_cast<int>(i));
    EXPECT_EQ(__builtin_popcount(tables::ksigns_iq2xs[i]) % 2, 0) << i;
  }
}

}  // namespace
}  // namespace rl::quant
