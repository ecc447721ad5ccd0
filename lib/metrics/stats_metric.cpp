// BLEU and chrF behind the StatsMetric seam (stats_metric.h).
#include "metrics/stats_metric.h"

#include <array>

#include "core/error.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/ter.h"

namespace nmt::metrics {

namespace {

class BleuStats final : public StatsMetric {
 public:
  explicit BleuStats(const BleuOptions& o) : options_(o) {}
  SegmentStats segment_stats(const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs) const override {
    return bleu_segment_stats(hyps, refs, options_);
  }
  double score(const int64_t* sums, StatsArithmetic arithmetic) const override {
    std::array<int64_t, kBleuMaxOrder> correct{}, total{};
    for (int n = 0; n < kBleuMaxOrder; ++n) {
      correct[n] = sums[2 + n];
      total[n] = sums[2 + kBleuMaxOrder + n];
    }
    return bleu_from_stats(correct, total, sums[0], sums[1], options_, arithmetic).score;
  }

 private:
  BleuOptions options_;
};

class ChrfStats final : public StatsMetric {
 public:
  explicit ChrfStats(const ChrfOptions& o) : options_(o) {}
  SegmentStats segment_stats(const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs) const override {
    return chrf_segment_stats(hyps, refs, options_);
  }
  double score(const int64_t* sums, StatsArithmetic arithmetic) const override {
    return chrf_from_stats(sums, options_, arithmetic);
  }

 private:
  ChrfOptions options_;
};

class TerStats final : public StatsMetric {
 public:
  TerStats(const TerOptions& o, int nrefs) : options_(o), nrefs_(nrefs) {}
  SegmentStats segment_stats(const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs) const override {
    if (static_cast<int>(refs.size()) != nrefs_)
      throw InputError("TER statistics: made for " + std::to_string(nrefs_) +
                       " reference streams, given " + std::to_string(refs.size()));
    return ter_segment_stats(hyps, refs, options_);
  }
  double score(const int64_t* sums, StatsArithmetic arithmetic) const override {
    return ter_from_stats(sums, nrefs_, arithmetic);
  }

 private:
  TerOptions options_;
  int nrefs_;
};

}  // namespace

std::unique_ptr<StatsMetric> ter_stats_metric(const TerOptions& options, int nrefs) {
  if (nrefs < 1) throw InputError("no reference given: TER needs at least one");
  return std::make_unique<TerStats>(options, nrefs);
}

std::unique_ptr<StatsMetric> bleu_stats_metric(const BleuOptions& options) {
  return std::make_unique<BleuStats>(options);
}

std::unique_ptr<StatsMetric> chrf_stats_metric(const ChrfOptions& options) {
  return std::make_unique<ChrfStats>(options);
}

}  // namespace nmt::metrics
