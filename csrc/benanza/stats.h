// benanza harness, statistics of repeated timings: median, spread, the stopping rule.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace bz {

struct Stats {
  double median = 0, min = 0, max = 0, stddev = 0;
};

inline Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(n);
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  s.stddev = n > 1 ? std::sqrt(var / double(n - 1)) : 0.0;
  return s;
}

// Half-width of the distribution-free 95% confidence interval of the median
// (order statistics n/2 -+ 0.98 sqrt(n)), relative to the median.
inline double median_rel_halfwidth(std::vector<double> v) {
  size_t n = v.size();
  if (n < 3) return INFINITY;
  std::sort(v.begin(), v.end());
  double half = 0.98 * std::sqrt(double(n));
  long lo = std::max(0L, long(std::floor(n / 2.0 - half)));
  long hi = std::min(long(n) - 1, long(std::ceil(n / 2.0 + half)));
  double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return median > 0 ? 0.5 * (v[size_t(hi)] - v[size_t(lo)]) / median : INFINITY;
}

}  // namespace bz
