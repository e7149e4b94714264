#include "util/line_fit.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace rl {
namespace {

// Points on a known line (a decode-attention layer: 7.3 µs plus bytes at 4.25 GB per ms, the
// sizes of 32K-256K bf16 positions) come back as that line.
TEST(LineFit, RecoversAnExactLine) {
  std::vector<double> bytes, us;
  for (double p : {32768.0, 65536.0, 131072.0, 262144.0}) {
    bytes.push_back(p * 2048);
    us.push_back(7.3 + p * 2048 / 4250.0e3);
  }
  const LineFit f = fit_line(bytes, us);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.intercept, 7.3, 1e-9);
  EXPECT_NEAR(1.0 / f.slope, 4250.0e3, 1e-3);
}

// Against the normal equations' closed form in long double, on noisy points: the slope
// (n Σxy - Σx Σy) / (n Σx² - (Σx)²), the intercept (Σy - slope Σx) / n (fit_line sums about the
// means instead).
TEST(LineFit, MatchesTheNormalEquationsOnNoisyPoints) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, 0.3);
  std::vector<double> x, y;
  for (int i = 0; i < 9; ++i) {
    x.push_back(1000.0 + 250.0 * i * i);
    y.push_back(2.0 - 0.004 * x.back() + noise(rng));
  }
  long double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const long double n = static_cast<long double>(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    sx += x[i], sy += y[i], sxx += static_cast<long double>(x[i]) * x[i],
        sxy += static_cast<long double>(x[i]) * y[i];
  const long double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const long double intercept = (sy - slope * sx) / n;
  const LineFit f = fit_line(x, y);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.slope, static_cast<double>(slope), 1e-12);
  EXPECT_NEAR(f.intercept, static_cast<double>(intercept), 1e-9);
}

TEST(LineFit, RefusesWhatHasNoSlope) {
  const std::vector<double> one = {3.0}, same = {5.0, 5.0, 5.0}, y = {1.0, 2.0, 3.0};
  EXPECT_FALSE(fit_line(one, one).ok);
  EXPECT_FALSE(fit_line(same, y).ok);
  EXPECT_FALSE(fit_line(std::span<const double>(), std::span<const double>()).ok);
}

}  // namespace
}  // namespace rl
