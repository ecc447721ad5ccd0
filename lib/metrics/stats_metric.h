// The seam between metrics and significance tests, as sacreBLEU draws it:
// a metric turns each segment into a fixed-width row of integer sufficient
// statistics (Metric._extract_corpus_statistics), and statistics summed over
// any set of segments into a score (Metric._compute_score_from_stats). A
// resample or a shuffled pseudo-system is then a sum of rows, never a
// re-scoring of text. BLEU, chrF and TER implement it. TER's rows are
// [edits, summed reference lengths] (sacreBLEU's float average reference
// length kept as its integer numerator; see ter_segment_stats), and its
// score divides by the reference count it was made with; a score from
// float32 sums divides in float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nmt::metrics {

// Per-segment statistics, (segments, width) row-major.
struct SegmentStats {
  std::size_t segments = 0;
  std::size_t width = 0;
  std::vector<int64_t> values;
  // References per segment, as the signature's nrefs counts them (-1: varies).
  int nrefs = 1;
  const int64_t* row(std::size_t i) const { return values.data() + i * width; }
  // Every column summed over the segments.
  std::vector<int64_t> sums() const {
    std::vector<int64_t> out(width, 0);
    for (std::size_t i = 0; i < segments; ++i)
      for (std::size_t k = 0; k < width; ++k) out[k] += row(i)[k];
    return out;
  }
};

// Which arithmetic sacreBLEU applies to summed statistics, so that scores
// match to the last bit: Python ints (the reported score), numpy float32
// (bootstrap resamples: `np.array(stats, dtype='float32')[idxs].sum(0)`), or
// numpy int64 (approximate randomisation: `bool_mask @ stats`). The sums are
// integers in every case; what differs is the arithmetic on numpy scalars
// (float32 / float32 stays float32; a float added into an int64 or float32
// array is rounded to it).
enum class StatsArithmetic { kPython, kNumpyFloat32, kNumpyInt64 };

class StatsMetric {
 public:
  virtual ~StatsMetric() = default;
  // One row per hypothesis segment, against refs[r][i]. Throws
  // nmt::InputError as the metric's corpus score does.
  virtual SegmentStats segment_stats(const std::vector<std::string>& hyps,
                                     const std::vector<std::vector<std::string>>& refs) const = 0;
  // The score (0..100) from `sums`, a row's width of statistics summed over
  // segments.
  virtual double score(const int64_t* sums, StatsArithmetic arithmetic) const = 0;
};

struct BleuOptions;
struct ChrfOptions;
struct TerOptions;
std::unique_ptr<StatsMetric> bleu_stats_metric(const BleuOptions& options);
std::unique_ptr<StatsMetric> chrf_stats_metric(const ChrfOptions& options);
// TER against `nrefs` reference streams (segment_stats checks it).
std::unique_ptr<StatsMetric> ter_stats_metric(const TerOptions& options, int nrefs);

}  // namespace nmt::metrics
