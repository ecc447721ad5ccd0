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

std::vector<int64_t> draw_indices(numpy_random::Pcg64& rng, std::size_t n_samples,
                                  std::size_t segments) {
  std::vector<int64_t> idxs(n_samples * segments);
  rng.integers(segments, idxs.size(), idxs.data());
  return idxs;
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

std::vector<double> resample_scores(const StatsMetric& metric, const SegmentStats& stats,
                                    const std::vector<int64_t>& idxs, std::size_t n_samples) {
  const std::size_t n = stats.segments, k = stats.width;
  // np.array(stats, dtype='float32'); the rows of a resample added in order.
  std::vector<float> f(stats.values.begin(), stats.values.end());
  std::vector<float> acc(k);
  std::vector<int64_t> sums(k);
  std::vector<double> scores(n_samples);
  for (std::size_t j = 0; j < n_samples; ++j) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const int64_t* idx = idxs.data() + j * n;
    for (std::size_t i = 0; i < n; ++i) {
      const float* row = f.data() + static_cast<std::size_t>(idx[i]) * k;
      for (std::size_t c = 0; c < k; ++c) acc[c] += row[c];
    }
    for (std::size_t c = 0; c < k; ++c) sums[c] = static_cast<int64_t>(acc[c]);
    scores[j] = metric.score(sums.data(), StatsArithmetic::kNumpyFloat32);
  }
  return scores;
}

double corpus_score(const StatsMetric& metric, const SegmentStats& stats) {
  const std::vector<int64_t> sums = stats.sums();
  return metric.score(sums.data(), StatsArithmetic::kPython);
}

MeanCi confidence_interval(const StatsMetric& metric, const SegmentStats& stats, int n_samples,
                           const numpy_random::Seed& seed) {
  if (n_samples <= 0) throw InputError("confidence_interval: needs a positive number of resamples");
  // _bootstrap_resample: default_rng(seed).choice(N, size=(n, N)).
  numpy_random::Pcg64 rng = numpy_random::default_rng(seed.value);
  const auto n = static_cast<std::size_t>(n_samples);
  const std::vector<int64_t> idxs = draw_indices(rng, n, stats.segments);
  return estimate_ci_python(resample_scores(metric, stats, idxs, n));
}

int paired_test_samples(PairedTestKind kind, int n_samples) {
  if (n_samples > 0) return n_samples;
  return kind == PairedTestKind::kBootstrap ? 1000 : 10000;
}

std::vector<std::vector<TestResult>> paired_test(
    const std::vector<const StatsMetric*>& metrics,
    const std::vector<std::vector<SegmentStats>>& stats, const PairedTestOptions& options) {
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
      const auto n = static_cast<std::size_t>(confidence_n);
      const std::vector<int64_t> idxs = draw_indices(rng, n, segments);
      const MeanCi ci = estimate_ci_numpy(resample_scores(*metrics[m], stats[m][0], idxs, n));
      r.mean = ci.mean;
      r.ci = ci.ci;
    }
    results[m].push_back(r);
  }

  for (std::size_t s = 1; s < n_systems; ++s) {
    numpy_random::Pcg64 rng = numpy_random::default_rng(comparison_seed(options.seed));
    if (bs) {
      // _paired_bs_test: one index matrix for every metric.
      const std::vector<int64_t> idxs = draw_indices(rng, n_samples, segments);
      for (std::size_t m = 0; m < metrics.size(); ++m) {
        const StatsMetric& metric = *metrics[m];
        TestResult r;
        r.score = corpus_score(metric, stats[m][s]);
        const double diff = std::fabs(baseline_scores[m] - r.score);
        const std::vector<double> bl = resample_scores(metric, stats[m][0], idxs, n_samples);
        const std::vector<double> sys = resample_scores(metric, stats[m][s], idxs, n_samples);
        const MeanCi ci = estimate_ci_numpy(sys);
        r.mean = ci.mean;
        r.ci = ci.ci;
        std::vector<double> diffs(n_samples);
        for (std::size_t j = 0; j < n_samples; ++j) diffs[j] = std::fabs(sys[j] - bl[j]);
        const double mean_diff = numpy_mean(diffs);
        for (double& d : diffs) d -= mean_diff;
        r.p_value = p_value(diffs, diff);
        results[m].push_back(r);
      }
    } else {
      // _paired_ar_test: a swap mask per trial, then (optionally) indices.
      std::vector<uint8_t> pos(n_samples * segments);
      rng.bools(pos.size(), pos.data());
      std::vector<int64_t> bs_idxs;
      if (n_ar_conf > 0) bs_idxs = draw_indices(rng, static_cast<std::size_t>(n_ar_conf), segments);
      for (std::size_t m = 0; m < metrics.size(); ++m) {
        const StatsMetric& metric = *metrics[m];
        const SegmentStats& a = stats[m][0];
        const SegmentStats& b = stats[m][s];
        const std::size_t k = a.width;
        TestResult r;
        r.score = corpus_score(metric, b);
        const double diff = std::fabs(baseline_scores[m] - r.score);
        // shuf_a = pos @ bl + ~pos @ sys = sum(sys) + pos @ (bl - sys);
        // shuf_b = sum(bl) - pos @ (bl - sys): exact in int64, one pass.
        const std::vector<int64_t> sum_a = a.sums(), sum_b = b.sums();
        std::vector<int64_t> delta(a.values.size());
        for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = a.values[i] - b.values[i];
        std::vector<int64_t> moved(k), shuf_a(k), shuf_b(k);
        std::vector<double> trial_stats(n_samples);
        for (std::size_t t = 0; t < n_samples; ++t) {
          std::fill(moved.begin(), moved.end(), 0);
          const uint8_t* sel = pos.data() + t * segments;
          for (std::size_t i = 0; i < segments; ++i)
            if (sel[i])
              for (std::size_t c = 0; c < k; ++c) moved[c] += delta[i * k + c];
          for (std::size_t c = 0; c < k; ++c) {
            shuf_a[c] = sum_b[c] + moved[c];
            shuf_b[c] = sum_a[c] - moved[c];
          }
          trial_stats[t] = std::fabs(metric.score(shuf_a.data(), StatsArithmetic::kNumpyInt64) -
                                     metric.score(shuf_b.data(), StatsArithmetic::kNumpyInt64));
        }
        r.p_value = p_value(trial_stats, diff);
        if (n_ar_conf > 0) {
          const MeanCi ci = estimate_ci_numpy(
              resample_scores(metric, b, bs_idxs, static_cast<std::size_t>(n_ar_conf)));
          r.mean = ci.mean;
          r.ci = ci.ci;
        }
        results[m].push_back(r);
      }
    }
  }
  return results;
}

}  // namespace nmt::metrics
