// A least-squares straight line through measured points.
#pragma once
#include <cstddef>
#include <span>

namespace rl {

// y ≈ intercept + slope · x. `ok` is false with fewer than two points or when every x is the
// same (no slope can be told).
struct LineFit {
  double intercept = 0, slope = 0;
  bool ok = false;
};

inline LineFit fit_line(std::span<const double> x, std::span<const double> y) {
  LineFit f;
  const size_t n = x.size() < y.size() ? x.size() : y.size();
  if (n < 2) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(n), my /= static_cast<double>(n);
  double sxx = 0, sxy = 0;  // about the means: no cancellation between large sums
  for (size_t i = 0; i < n; ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  if (!(sxx > 0)) return f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  f.ok = true;
  return f;
}

}  // namespace rl
