// sacreBLEU 2.6.0's significance tests and confidence intervals
// (sacrebleu/significance.py), on any StatsMetric: paired bootstrap
// resampling, paired approximate randomisation, and the bootstrap 95%
// interval of one system, with numpy's generator drawn exactly as sacreBLEU
// draws it, so that the same SACREBLEU_SEED gives the same p-values,
// means and intervals. Resamples sum per-segment statistics, no text is
// scored twice, and they are drawn a block at a time: memory grows with
// their number only by their scores.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "metrics/numpy_random.h"
#include "metrics/stats_metric.h"

namespace nmt::metrics {

// significance.py's Result: the system's score; the p-value against the
// baseline (none for the baseline itself); the bootstrap mean and the half
// width of its 95% interval where one was estimated.
struct TestResult {
  double score = 0.0;
  std::optional<double> p_value;
  std::optional<double> mean;
  std::optional<double> ci;
};

struct MeanCi {
  double mean = 0.0;
  double ci = 0.0;
};

// numpy's float64 sum of a contiguous array: pairwise (8-way unrolled
// blocks of at most 128) within each 8192-element buffer, buffers in turn.
double numpy_sum(const double* values, std::size_t n);
// significance.estimate_ci: numpy mean of the scores, and half the distance
// between the sorted scores at n//40 and n - n//40 - 1.
MeanCi estimate_ci_numpy(std::vector<double> scores);
// Score.estimate_ci (one system, --confidence): the same interval with
// statistics.mean, the exact mean rounded once.
MeanCi estimate_ci_python(std::vector<double> scores);

// The score from statistics summed over every segment (Python arithmetic).
double corpus_score(const StatsMetric& metric, const SegmentStats& stats);

// corpus_score(..., n_bootstrap=n) of one system: `n` resamples drawn by
// default_rng(seed), the interval by Score.estimate_ci.
// `block_values`: indices drawn at a time (0: 2^20, 8 MB); the results do
// not depend on it.
MeanCi confidence_interval(const StatsMetric& metric, const SegmentStats& stats, int n_samples,
                           const numpy_random::Seed& seed, std::size_t block_values = 0);

enum class PairedTestKind { kBootstrap, kRandomization };

struct PairedTestOptions {
  PairedTestKind kind = PairedTestKind::kBootstrap;
  // Resamples (bootstrap) or trials (randomisation); 0 or less: sacreBLEU's
  // default, 1000 or 10000.
  int n_samples = 0;
  // Randomisation only: bootstrap resamples for an interval too (-1: none,
  // 0: 1000). sacreBLEU's command line always passes -1.
  int n_ar_confidence = -1;
  numpy_random::Seed seed{12345, "12345"};
  // Indices or swap-mask values drawn at a time (0: 2^20, at most 8 MB);
  // the results do not depend on it.
  std::size_t block_values = 0;
};

// What PairedTest resolves n_samples to.
int paired_test_samples(PairedTestKind kind, int n_samples);

// The memory that grows with the number of resamples or trials: their
// scores, 8 bytes each, kept for the interval's sort and the p-value
// (paired_test keeps a baseline and a system series per metric for the
// bootstrap, one series per metric for randomisation). The segments do not
// multiply it; for a bound on the counts a user asks for.
double paired_test_bytes(const PairedTestOptions& options, std::size_t n_metrics);
double confidence_interval_bytes(int n_samples);

// PairedTest()(): stats[m][s] are metric m's statistics of system s, system
// 0 the baseline. Returns results[m][s]. Every system has the baseline's
// segment count (checked).
std::vector<std::vector<TestResult>> paired_test(
    const std::vector<const StatsMetric*>& metrics,
    const std::vector<std::vector<SegmentStats>>& stats, const PairedTestOptions& options);

}  // namespace nmt::metrics
