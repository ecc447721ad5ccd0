// The public corpus scores over the library's sacreBLEU metrics.
#include "nmt/metrics.h"

#include "api/guard.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/ter.h"

namespace nmt::api {

MetricScore corpus_score(Metric metric, const std::vector<std::string>& hyps,
                         const std::vector<std::vector<std::string>>& refs,
                         const MetricOptions& o) {
  return guarded([&]() -> MetricScore {
    if (o.width < 0 || o.width > 10)
      throw about_option<UsageError>("width",
                                     std::to_string(o.width) + ": expected a number from 0 to 10");
    if (metric == Metric::chrf) {
      metrics::ChrfOptions c;
      c.char_order = o.char_order, c.word_order = o.word_order, c.beta = o.beta;
      c.lowercase = o.lowercase, c.whitespace = o.chrf_whitespace;
      const metrics::ChrfScore s = metrics::corpus_chrf(hyps, refs, c);
      return {s.score, s.signature(), s.line(o.width)};
    }
    if (metric == Metric::ter) {
      metrics::TerOptions t;
      t.normalized = o.ter_normalized, t.no_punct = o.ter_no_punct;
      t.asian_support = o.ter_asian_support, t.case_sensitive = o.ter_case_sensitive;
      const metrics::TerScore s = metrics::corpus_ter(hyps, refs, t);
      return {s.score, s.signature(), s.line(o.width)};
    }
    metrics::BleuOptions b;
    b.tokenizer = metrics::parse_tokenizer(o.tokenize);
    b.spm_model = o.spm_model;
    b.lowercase = o.lowercase;
    b.smooth = metrics::parse_smoothing(o.smooth);
    const metrics::BleuScore s = metrics::corpus_bleu(hyps, refs, b);
    return {s.score, s.signature(), s.line(o.width)};
  });
}

}  // namespace nmt::api
