// See significance.h. Each function names the significance.py code it
// follows; the order of random draws is sacreBLEU's, call for call.
#include "metrics/significance.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace nmt::metrics {

namespace {

constexpr std::size_t kPairwiseBlock = 128;  // numpy's PW_BLOCKSIZE
constexpr std::size_t kUfuncBuffer = 8192;   // numpy's default ufunc buffer size

double pairwise_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= kPairwiseBlock) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

double numpy_mean(const std::vector<double>& v) {
  return numpy_sum(v.data(), v.size()) / static_cast<double>(v.size());
}

MeanCi interval(std::vector<double>& sorted) {
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const std::size_t lower = n / 40, upper = n - lower - 1;
  return {0.0, 0.5 * (sorted[upper] - sorted[lower])};
}

// _compute_p_value: (count of sample statistics above the real one, + 1)
// over (samples + 1).
double p_value(const std::vector<double>& sample_stats, double real_difference) {
  std::size_t c = 0;
  for (double s : sample_stats) c += s > real_difference;
  return static_cast<double>(c + 1) / static_cast<double>(sample_stats.size() + 1);
}

// Resamples and trials are drawn and scored a block at a time, so that
// memory does not follow their number times the segments (10^7 resamples
// of 1000 lines were 80 GB of indices). The blocks draw what one call
// draws: rng.choice(N, size=(n, N)) takes its values one after another
// from the generator's state alone, and rng.integers(2, size, dtype=bool)
// takes a fresh 32-bit draw every 32 values of one call, so blocks of a
// multiple of 32 values give the same bits.
std::size_t block_values(std::size_t asked) { return asked > 0 ? asked : std::size_t{1} << 20; }

// One series of bootstrap scores: a metric's statistics of one system, as
// np.array(stats, dtype='float32') holds them, and the scores of its
// resamples.
struct Resampled {
  Resampled(const StatsMetric& m, const SegmentStats& s)
      : metric(&m), width(s.width), table(s.values.begin(), s.values.end()) {}
  const StatsMetric* metric;
  std::size_t width;
  std::vector<float> table;  // (segments, width)
  std::vector<double> scores;
};

// _bootstrap_resample's rng.choice(N, size=(n, N)) with N = `segments`,
// every series scored on the same resamples: the rows of a resample added
// in order in float32, as numpy's .sum(0) adds them.
void resample(numpy_random::Pcg64& rng, std::size_t n, std::size_t segments,
              std::vector<Resampled>& series, std::size_t block) {
  const std::size_t rows = std::min(n, std::max<std::size_t>(1, block_values(block) / segments));
  std::vector<int64_t> idxs(rows * segments);
  std::vector<float> acc;
  std::vector<int64_t> sums;
  for (Resampled& s : series) s.scores.resize(n);
  for (std::size_t j0 = 0; j0 < n; j0 += rows) {
    const std::size_t count = std::min(rows, n - j0);
    rng.integers(segments, count * segments, idxs.data());
    for (Resampled& s : series) {
      const std::size_t k = s.width;
      acc.resize(k);
      sums.resize(k);
      for (std::size_t j = 0; j < count; ++j) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        const int64_t* idx = idxs.data() + j * segments;
        for (std::size_t i = 0; i < segments; ++i) {
          const float* row = s.table.data() + static_cast<std::size_t>(idx[i]) * k;
          for (std::size_t c = 0; c < k; ++c) acc[c] += row[c];
        }
        for (std::size_t c = 0; c < k; ++c) sums[c] = static_cast<int64_t>(acc[c]);
        s.scores[j0 + j] = s.metric->score(sums.data(), StatsArithmetic::kNumpyFloat32);
      }
    }
  }
}

// The scores of n resamples of one system.
std::vector<double> resample_scores(numpy_random::Pcg64& rng, std::size_t n,
                                    const StatsMetric& metric, const SegmentStats& stats,
                                    std::size_t block) {
  std::vector<Resampled> series{Resampled(metric, stats)};
  resample(rng, n, stats.segments, series, block);
  return std::move(series[0].scores);
}

// PairedTest.__call__ seeds each comparison with `self._seed if self._seed
// else None`: a seed of 0 draws fresh entropy there (but not for the
// baseline's interval, which reads SACREBLEU_SEED itself).
std::optional<uint64_t> comparison_seed(const numpy_random::Seed& seed) {
  if (seed.value && *seed.value != 0) return seed.value;
  return std::nullopt;
}

}  // namespace

double numpy_sum(const double* values, std::size_t n) {
  double res = 0.0;
  for (std::size_t b = 0; b < n; b += kUfuncBuffer)
    res += pairwise_sum(values + b, std::min(kUfuncBuffer, n - b));
  return res;
}

MeanCi estimate_ci_numpy(std::vector<double> scores) {
  if (scores.empty()) throw InputError("estimate_ci: no scores");
  MeanCi r = interval(scores);
  r.mean = numpy_mean(scores);  // of the sorted scores, as numpy sums them
  return r;
}

MeanCi estimate_ci_python(std::vector<double> scores) {
  if (scores.empty()) throw InputError("estimate_ci: no scores");
  MeanCi r = interval(scores);
  // statistics.mean sums exactly and rounds once; a compensated long double
  // sum gives the same double but at an exact tie of the last bit.
  long double sum = 0.0L, comp = 0.0L;
  for (double x : scores) {
    const long double t = sum + x;
    comp +=
        std::fabs(sum) >= std::fabs(static_cast<long double>(x)) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  r.mean = static_cast<double>((sum + comp) / static_cast<long double>(scores.size()));
  return r;
}

double corpus_score(const StatsMetric& metric, const SegmentStats& stats) {
  const std::vector<int64_t> sums = stats.sums();
  return metric.score(sums.data(), StatsArithmetic::kPython);
}

MeanCi confidence_interval(const StatsMetric& metric, const SegmentStats& stats, int n_samples,
                           const numpy_random::Seed& seed, std::size_t block) {
  if (n_samples <= 0) throw InputError("confidence_interval: needs a positive number of resamples");
  // _bootstrap_resample: default_rng(seed).choice(N, size=(n, N)).
  numpy_random::Pcg64 rng = numpy_random::default_rng(seed.value);
  return estimate_ci_python(
      resample_scores(rng, static_cast<std::size_t>(n_samples), metric, stats, block));
}

int paired_test_samples(PairedTestKind kind, int n_samples) {
  if (n_samples > 0) return n_samples;
  return kind == PairedTestKind::kBootstrap ? 1000 : 10000;
}

double paired_test_bytes(const PairedTestOptions& options, std::size_t n_metrics) {
  const double n = paired_test_samples(options.kind, options.n_samples);
  if (options.kind == PairedTestKind::kBootstrap) return 8.0 * 2.0 * double(n_metrics) * n;
  const double n_ar_conf = options.n_ar_confidence == 0 ? 1000 : options.n_ar_confidence;
  return 8.0 * double(n_metrics) * std::max(n, n_ar_conf);
}

double confidence_interval_bytes(int n_samples) { return 8.0 * std::max(n_samples, 0); }

namespace {

using Metrics = std::vector<const StatsMetric*>;
using Stats = std::vector<std::vector<SegmentStats>>;

// The number of segments every system's statistics share, or a refusal.
std::size_t common_segments(const Metrics& metrics, const Stats& stats) {
  if (metrics.empty() || stats.size() != metrics.size())
    throw InputError("paired_test: one set of statistics per metric is needed");
  const std::size_t n_systems = stats[0].size();
  if (n_systems < 2) throw InputError("paired tests need a baseline and at least one system");
  const std::size_t segments = stats[0][0].segments;
  for (const auto& per_metric : stats) {
    if (per_metric.size() != n_systems)
      throw InputError("paired_test: every metric needs every system's statistics");
    for (const SegmentStats& s : per_metric)
      if (s.segments != segments)
        throw InputError("paired_test: the systems have different numbers of segments (" +
                         std::to_string(segments) + " and " + std::to_string(s.segments) + ")");
  }
  if (segments == 0) throw InputError("paired_test: no segments");
  return segments;
}

// _paired_bs_test for system s: one index matrix for every metric, the
// baseline and the system scored on it.
void paired_bootstrap(numpy_random::Pcg64& rng, const Metrics& metrics, const Stats& stats,
                      std::size_t s, std::size_t n_samples, std::size_t segments,
                      const std::vector<double>& baseline_scores, const PairedTestOptions& options,
                      std::vector<std::vector<TestResult>>& results) {
  std::vector<Resampled> series;
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    series.emplace_back(*metrics[m], stats[m][0]);
    series.emplace_back(*metrics[m], stats[m][s]);
  }
  resample(rng, n_samples, segments, series, options.block_values);
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    std::vector<double>& diffs = series[2 * m].scores;  // the baseline's, overwritten
    std::vector<double>& sys = series[2 * m + 1].scores;
    TestResult r;
    r.score = corpus_score(*metrics[m], stats[m][s]);
    const double diff = std::fabs(baseline_scores[m] - r.score);
    for (std::size_t j = 0; j < n_samples; ++j) diffs[j] = std::fabs(sys[j] - diffs[j]);
    const MeanCi ci = estimate_ci_numpy(std::move(sys));
    r.mean = ci.mean;
    r.ci = ci.ci;
    const double mean_diff = numpy_mean(diffs);
    for (double& d : diffs) d -= mean_diff;
    r.p_value = p_value(diffs, diff);
    results[m].push_back(r);
    std::vector<double>().swap(diffs);
  }
}

// One metric's sums for the approximate randomisation: shuf_a = pos @ bl +
// ~pos @ sys = sum(sys) + pos @ (bl - sys); shuf_b = sum(bl) - pos @ (bl -
// sys): exact in int64, one pass.
struct Shuffled {
  std::vector<int64_t> sum_a, sum_b, delta;  // delta: (segments, width)
  std::vector<double> trial_stats;
};

// The trials' statistics |score(shuf_a) - score(shuf_b)| of every metric,
// a swap mask per trial drawn from rng in blocks.
void randomised_trials(numpy_random::Pcg64& rng, const Metrics& metrics, const Stats& stats,
                       std::size_t n_samples, std::size_t segments,
                       const PairedTestOptions& options, std::vector<Shuffled>& shuf) {
  const std::size_t block = std::min(
      n_samples, 32 * std::max<std::size_t>(1, block_values(options.block_values) / (32 * segments)));
  std::vector<uint8_t> pos(block * segments);
  std::vector<int64_t> moved, shuf_a, shuf_b;
  for (std::size_t t0 = 0; t0 < n_samples; t0 += block) {
    const std::size_t count = std::min(block, n_samples - t0);
    rng.bools(count * segments, pos.data());
    for (std::size_t m = 0; m < metrics.size(); ++m) {
      const std::size_t k = stats[m][0].width;
      const Shuffled& sh = shuf[m];
      moved.resize(k);
      shuf_a.resize(k);
      shuf_b.resize(k);
      for (std::size_t t = 0; t < count; ++t) {
        std::fill(moved.begin(), moved.end(), 0);
        const uint8_t* sel = pos.data() + t * segments;
        for (std::size_t i = 0; i < segments; ++i)
          if (sel[i])
            for (std::size_t c = 0; c < k; ++c) moved[c] += sh.delta[i * k + c];
        for (std::size_t c = 0; c < k; ++c) {
          shuf_a[c] = sh.sum_b[c] + moved[c];
          shuf_b[c] = sh.sum_a[c] - moved[c];
        }
        shuf[m].trial_stats[t0 + t] =
            std::fabs(metrics[m]->score(shuf_a.data(), StatsArithmetic::kNumpyInt64) -
                      metrics[m]->score(shuf_b.data(), StatsArithmetic::kNumpyInt64));
      }
    }
  }
}

// _paired_ar_test for system s: a swap mask per trial, then (optionally)
// indices for the system's confidence interval.
void paired_randomisation(numpy_random::Pcg64& rng, const Metrics& metrics, const Stats& stats,
                          std::size_t s, std::size_t n_samples, std::size_t segments, int n_ar_conf,
                          const std::vector<double>& baseline_scores,
                          const PairedTestOptions& options,
                          std::vector<std::vector<TestResult>>& results) {
  std::vector<Shuffled> shuf(metrics.size());
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    const SegmentStats& a = stats[m][0];
    const SegmentStats& b = stats[m][s];
    shuf[m].sum_a = a.sums();
    shuf[m].sum_b = b.sums();
    shuf[m].delta.resize(a.values.size());
    for (std::size_t i = 0; i < a.values.size(); ++i) shuf[m].delta[i] = a.values[i] - b.values[i];
    shuf[m].trial_stats.resize(n_samples);
  }
  randomised_trials(rng, metrics, stats, n_samples, segments, options, shuf);
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    TestResult r;
    r.score = corpus_score(*metrics[m], stats[m][s]);
    r.p_value = p_value(shuf[m].trial_stats, std::fabs(baseline_scores[m] - r.score));
    results[m].push_back(r);
  }
  shuf.clear();
  if (n_ar_conf <= 0) return;
  std::vector<Resampled> series;
  for (std::size_t m = 0; m < metrics.size(); ++m) series.emplace_back(*metrics[m], stats[m][s]);
  resample(rng, static_cast<std::size_t>(n_ar_conf), segments, series, options.block_values);
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    const MeanCi ci = estimate_ci_numpy(std::move(series[m].scores));
    results[m].back().mean = ci.mean;
    results[m].back().ci = ci.ci;
  }
}

}  // namespace

std::vector<std::vector<TestResult>> paired_test(const Metrics& metrics, const Stats& stats,
                                                 const PairedTestOptions& options) {
  const std::size_t segments = common_segments(metrics, stats);
  const std::size_t n_systems = stats[0].size();
  const bool bs = options.kind == PairedTestKind::kBootstrap;
  const auto n_samples =
      static_cast<std::size_t>(paired_test_samples(options.kind, options.n_samples));
  const int n_ar_conf = options.n_ar_confidence == 0 ? 1000 : options.n_ar_confidence;
  const int confidence_n = bs ? static_cast<int>(n_samples) : n_ar_conf;

  std::vector<std::vector<TestResult>> results(metrics.size());
  std::vector<double> baseline_scores(metrics.size());
  // The baseline: its score, and its interval from _bootstrap_resample.
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    TestResult r;
    r.score = baseline_scores[m] = corpus_score(*metrics[m], stats[m][0]);
    if (confidence_n > 0) {
      numpy_random::Pcg64 rng = numpy_random::default_rng(options.seed.value);
      const MeanCi ci =
          estimate_ci_numpy(resample_scores(rng, static_cast<std::size_t>(confidence_n),
                                            *metrics[m], stats[m][0], options.block_values));
      r.mean = ci.mean;
      r.ci = ci.ci;
    }
    results[m].push_back(r);
  }
  for (std::size_t s = 1; s < n_systems; ++s) {
    numpy_random::Pcg64 rng = numpy_random::default_rng(comparison_seed(options.seed));
    if (bs)
      paired_bootstrap(rng, metrics, stats, s, n_samples, segments, baseline_scores, options,
                       results);
    else
      paired_randomisation(rng, metrics, stats, s, n_samples, segments, n_ar_conf,
                           baseline_scores, options, results);
  }
  return results;
}

}  // namespace nmt::metrics
