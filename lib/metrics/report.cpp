#include "metrics/report.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>

#include "core/memory.h"
#include "metrics/ngrams.h"
#include "metrics/numpy_random.h"
#include "metrics/report_table.h"
#include "metrics/stats_metric.h"

namespace nmt::metrics {

namespace {

std::string metric_name(const std::string& key) {
  return key == "bleu" ? "BLEU" : key == "ter" ? "TER" : "chrF";
}

bool paired(const ReportOptions& o) { return o.paired != ReportTest::none; }

// The option that sets the number of resamples or trials, as "{key}".
std::string resampling_option(const ReportOptions& o) {
  return o.paired == ReportTest::bootstrap       ? "{paired_bs_n}"
         : o.paired == ReportTest::randomization ? "{paired_ar_n}"
                                                 : "{confidence_n}";
}

// One result as sacrebleu prints it: the score alone (-b), the JSON object,
// the one-line text with the signature inside, or without it.
template <typename Score>
std::string render(const Score& s, const ReportOptions& o, bool one_line_json) {
  if (o.score_only) return format_fixed(s.score, o.width);
  if (o.format == ReportFormat::json) return s.to_json(o.width).dump(one_line_json ? -1 : 1);
  return o.signature ? s.line(o.width) : s.text(o.width);
}

std::string sentence_result(const ReportOptions& o, const std::string& hyp,
                            const std::vector<std::string>& refs) {
  if (o.metrics[0] == "bleu") return render(sentence_bleu(hyp, refs, o.bleu), o, true);
  if (o.metrics[0] == "ter") return render(sentence_ter(hyp, refs, o.ter), o, true);
  return render(sentence_chrf(hyp, refs, o.chrf), o, true);
}

void write_sentence_scores(const ReportOptions& o, const ReportInputs& in, std::ostream& out,
                           const std::function<void()>& line_written) {
  const std::vector<std::string>& hyps = in.systems[0];
  std::vector<std::string> seg_refs(in.refs.size());
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    for (std::size_t r = 0; r < in.refs.size(); ++r) seg_refs[r] = in.refs[r][i];
    out << while_scoring("computing " + metric_name(o.metrics[0]) + " of " + in.labels[0] +
                             " line " + std::to_string(i + 1),
                         [&] { return sentence_result(o, hyps[i], seg_refs); })
        << "\n";
    if (line_written) line_written();
  }
}

// A metric of the command line as the multi-system and statistical modes
// use it: the statistics seam, and its printed name, signature and verbose
// part for summed statistics.
struct MetricRun {
  std::string key;  // "bleu", "chrf", "ter"
  std::unique_ptr<StatsMetric> seam;
  BleuOptions bleu;
  ChrfOptions chrf;
  TerOptions ter;
  int nrefs = 1;  // reference streams (TER's average reference length)
};

struct Printed {
  std::string name;  // "BLEU", "chrF2", "TER"
  double score = 0.0;
  std::string signature;
  std::string verbose;  // BLEU's precisions and lengths; empty for chrF and TER
};

MetricRun make_metric(const std::string& key, const ReportOptions& o, int nrefs) {
  MetricRun m;
  m.key = key;
  m.nrefs = nrefs;
  if (key == "bleu") {
    m.bleu = o.bleu;
    m.seam = bleu_stats_metric(m.bleu);
  } else if (key == "ter") {
    m.ter = o.ter;
    m.seam = ter_stats_metric(m.ter, nrefs);
  } else {
    m.chrf = o.chrf;
    m.seam = chrf_stats_metric(m.chrf);
  }
  return m;
}

// The metric's statistics for one system and the printed result of them.
struct SystemStats {
  SegmentStats stats;
  Printed printed;
};

SystemStats system_stats(const MetricRun& m, const std::vector<std::string>& hyps,
                         const std::vector<std::vector<std::string>>& refs) {
  SystemStats out;
  out.stats = m.seam->segment_stats(hyps, refs);
  const int nrefs = out.stats.nrefs;
  const std::vector<int64_t> sums = out.stats.sums();
  if (m.key == "bleu") {
    std::array<int64_t, kBleuMaxOrder> correct{}, total{};
    for (int n = 0; n < kBleuMaxOrder; ++n) {
      correct[n] = sums[2 + n];
      total[n] = sums[2 + kBleuMaxOrder + n];
    }
    BleuScore s = bleu_from_stats(correct, total, sums[0], sums[1], m.bleu);
    s.nrefs = nrefs;
    out.printed = {"BLEU", s.score, s.signature(), s.verbose()};
  } else if (m.key == "ter") {
    const TerScore s = ter_score_from_stats(sums.data(), m.nrefs, m.ter);
    out.printed = {"TER", s.score, s.signature(), ""};
  } else {
    ChrfScore s;
    s.options = m.chrf;
    s.nrefs = nrefs;
    s.score = chrf_from_stats(sums.data(), m.chrf);
    out.printed = {s.name(), s.score, s.signature(), ""};
  }
  return out;
}

// The printed result of one system's corpus score, as corpus_score gives
// it in sacreBLEU's table of several systems.
Printed corpus_printed(const ReportOptions& o, const std::string& key,
                       const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs) {
  if (key == "bleu") {
    const BleuScore s = corpus_bleu(hyps, refs, o.bleu);
    return {"BLEU", s.score, s.signature(), s.verbose()};
  }
  if (key == "ter") {
    const TerScore s = corpus_ter(hyps, refs, o.ter);
    return {"TER", s.score, s.signature(), ""};
  }
  const ChrfScore s = corpus_chrf(hyps, refs, o.chrf);
  return {s.name(), s.score, s.signature(), ""};
}

// sacreBLEU's Signature puts bs, ar and seed right after nrefs.
std::string with_test_fields(const std::string& sig, const std::string& fields) {
  const std::size_t bar = sig.find('|');
  if (bar == std::string::npos) return sig + "|" + fields;
  return sig.substr(0, bar + 1) + fields + sig.substr(bar);
}

// Score.format(width, score_only, signature, is_json) with a bootstrap
// interval where one was estimated (shown only for a mean above 0).
std::string format_score(const Printed& p, const std::string& sig, const ReportOptions& o,
                         const std::optional<MeanCi>& ci) {
  std::string sc = format_fixed(p.score, o.width);
  std::string conf;
  if (ci && ci->mean > 0) {
    conf = "μ = " + format_fixed(ci->mean, o.width) + " ± " + format_fixed(ci->ci, o.width);
    sc += " (" + conf + ")";
  }
  if (o.score_only) return sc;
  if (o.format == ReportFormat::json) {
    nlohmann::ordered_json d;
    d["name"] = p.name;
    d["score"] = std::stod(format_fixed(p.score, o.width));
    d["signature"] = sig;
    if (!conf.empty()) {
      d["confidence_mean"] = std::stod(format_fixed(ci->mean, o.width));
      d["confidence_var"] = std::stod(format_fixed(ci->ci, o.width));
      d["confidence"] = conf;
    }
    if (!p.verbose.empty()) d["verbose_score"] = p.verbose;
    std::size_t b = 0;
    while (b <= sig.size()) {
      std::size_t e = sig.find('|', b);
      if (e == std::string::npos) e = sig.size();
      const std::string field = sig.substr(b, e - b);
      const std::size_t colon = field.find(':');
      d[field.substr(0, colon)] = field.substr(colon + 1);
      b = e + 1;
    }
    return d.dump(1);
  }
  std::string line = o.signature ? p.name + "|" + sig : p.name;
  line += " = " + sc;
  if (!p.verbose.empty()) line += " " + p.verbose;
  return line;
}

// print_single_results: a JSON list for several metrics (bare -b scores
// too, as sacreBLEU joins them); text lines aligned on their '=' (lines
// without one, from -b, printed as they are).
void print_single_results(const std::vector<std::string>& results, const ReportOptions& o,
                          std::ostream& out) {
  if (o.format == ReportFormat::json && results.size() > 1) {
    out << "[\n";
    for (std::size_t i = 0; i < results.size(); ++i)
      out << results[i] << (i + 1 < results.size() ? ",\n" : "\n");
    out << "]\n";
    return;
  }
  if (results.size() == 1 || o.format == ReportFormat::json) {
    for (const std::string& r : results) out << r << "\n";
    return;
  }
  std::vector<std::size_t> lens;
  for (const std::string& line : results) {
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0)
      out << line << "\n";
    else
      lens.push_back(eq - 1);
  }
  if (lens.empty()) return;
  const std::size_t w = *std::max_element(lens.begin(), lens.end());
  for (std::size_t i = 0; i < lens.size(); ++i)
    out << std::string(w - lens[i], ' ') << results[i] << "\n";
}

std::vector<std::string> sorted_metrics(const ReportOptions& o) {
  std::vector<std::string> names = o.metrics;
  std::sort(names.begin(), names.end());
  return names;
}

std::string corpus_result(const ReportOptions& o, const std::string& metric,
                          const ReportInputs& in) {
  const std::vector<std::string>& hyps = in.systems[0];
  if (metric == "bleu") return render(corpus_bleu(hyps, in.refs, o.bleu), o, false);
  if (metric == "ter") return render(corpus_ter(hyps, in.refs, o.ter), o, false);
  return render(corpus_chrf(hyps, in.refs, o.chrf), o, false);
}

void write_single_system(const ReportOptions& o, const ReportInputs& in, std::ostream& out) {
  std::vector<std::string> results;
  const bool ci = o.confidence && o.confidence_n > 1;
  const numpy_random::Seed seed = ci ? numpy_random::seed_from_environment() : numpy_random::Seed{};
  for (const std::string& m : sorted_metrics(o)) {
    const std::string computing = "computing " + metric_name(m) + " of " + in.labels[0];
    if (!ci) {  // the plain path, as before several systems were taken
      results.push_back(while_scoring(computing, [&] { return corpus_result(o, m, in); }));
      continue;
    }
    const MetricRun run = make_metric(m, o, static_cast<int>(in.refs.size()));
    const SystemStats s =
        while_scoring(computing, [&] { return system_stats(run, in.systems[0], in.refs); });
    const MeanCi interval = while_scoring(
        "resampling for {confidence_n} " + std::to_string(o.confidence_n),
        [&] { return confidence_interval(*run.seam, s.stats, o.confidence_n, seed); });
    const std::string sig = with_test_fields(
        s.printed.signature, "bs:" + std::to_string(o.confidence_n) + "|seed:" + seed.text);
    results.push_back(format_score(s.printed, sig, o, interval));
  }
  print_single_results(results, o, out);
}

// print_results_table: the JSON list, or tabulate's grid, the paired test's
// explanation and the signatures.
std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void print_table(const ReportOptions& o, std::ostream& out, const std::vector<std::string>& names,
                 const std::vector<std::string>& titles,
                 const std::vector<std::vector<std::string>>& cells,  // [m][s], text
                 const std::vector<std::string>& metric_names,
                 const std::vector<std::string>& signatures) {
  std::vector<std::string> headers{"System"};
  headers.insert(headers.end(), titles.begin(), titles.end());
  std::vector<std::vector<std::string>> columns{names};
  columns.insert(columns.end(), cells.begin(), cells.end());
  out << fancy_grid(headers, columns, o.width) << "\n\n";
  if (paired(o)) {
    const std::string msg = (o.paired == ReportTest::bootstrap)
                                ? "Paired bootstrap resampling test with " +
                                      std::to_string(o.paired_bs_n) + " resampling trials"
                                : "Paired approximate randomization test with " +
                                      std::to_string(o.paired_ar_n) + " trials";
    const std::string dashes(msg.size(), '-');
    out << dashes << "\n" << msg << "\n" << dashes << "\n";
    out << " - Each system is pairwise compared to " << names[0] << ".\n";
    if ((o.paired == ReportTest::bootstrap))
      out << "   Actual system score / bootstrap estimated true mean / 95% CI are provided "
             "for each metric.\n";
    else
      out << "   Actual system score is provided for each metric.\n";
    out << "\n"
        << " - Null hypothesis: the system and the baseline translations are essentially\n"
        << "   generated by the same underlying process. For a given system and the baseline,\n"
        << "   the p-value is roughly the probability of the absolute score difference (delta)\n"
        << "   or higher occurring due to chance, under the assumption that the null hypothesis "
           "is correct.\n"
        << "\n"
        << " - Assuming a significance threshold of 0.05, the null hypothesis can be rejected\n"
        << "   for p-values < 0.05 (marked with \"*\"). This means that the delta is unlikely to "
           "be attributed\n"
        << "   to chance, hence the system is significantly \"different\" than the baseline.\n"
        << "   Otherwise, the p-values are highlighted in red.\n"
        << "\n"
        << " - NOTE: Significance does not tell whether a system is \"better\" than the baseline "
           "but rather\n"
        << "   emphasizes the \"difference\" of the systems in terms of the replicability of the "
           "delta.\n"
        << "\n";
  }
  out << "-----------------\nMetric signatures\n-----------------\n";
  for (std::size_t m = 0; m < metric_names.size(); ++m) {
    std::string name = metric_names[m];
    const std::size_t cp = code_points(name);
    if (cp < 10) name += std::string(10 - cp, ' ');
    out << " - " << name << " " << signatures[m] << "\n";
  }
}

// Each metric's score of each system (and, for a paired test, its
// per-segment statistics), with the names and signatures the table shows.
struct SystemsScored {
  std::vector<std::string> keys;  // the metrics, in the table's order
  std::vector<MetricRun> runs;
  std::vector<std::vector<Printed>> printed;   // [m][s]
  std::vector<std::vector<SegmentStats>> seg;  // [m][s], paired tests only
  std::vector<std::string> metric_names, signatures;
};

SystemsScored score_systems(const ReportOptions& o, const ReportInputs& in) {
  SystemsScored sc;
  // Paired tests keep the command line's metric order, the table sorts.
  sc.keys = paired(o) ? o.metrics : sorted_metrics(o);
  const std::size_t n_metrics = sc.keys.size();
  sc.printed.resize(n_metrics);
  sc.seg.resize(n_metrics);
  // Per-segment statistics only where the paired tests resample them: the
  // table alone needs each corpus score, and rows as wide as chrF's orders
  // (up to 600 numbers a line) for every system would cost lines x orders.
  for (std::size_t m = 0; m < n_metrics; ++m) {
    sc.runs.push_back(make_metric(sc.keys[m], o, static_cast<int>(in.refs.size())));
    for (std::size_t s = 0; s < in.systems.size(); ++s)
      while_scoring("computing " + metric_name(sc.keys[m]) + " of " + in.labels[s], [&] {
        if (!paired(o)) {
          sc.printed[m].push_back(corpus_printed(o, sc.keys[m], in.systems[s], in.refs));
          return;
        }
        SystemStats st = system_stats(sc.runs[m], in.systems[s], in.refs);
        sc.printed[m].push_back(std::move(st.printed));
        sc.seg[m].push_back(std::move(st.stats));
      });
    sc.metric_names.push_back(sc.printed[m][0].name);
    sc.signatures.push_back(sc.printed[m][0].signature);
  }
  return sc;
}

// Several systems without a test: the JSON list, or the table.
void write_scores(const ReportOptions& o, const ReportInputs& in, const SystemsScored& sc,
                  std::ostream& out) {
  std::vector<std::vector<std::string>> cells(sc.keys.size());
  for (std::size_t m = 0; m < sc.keys.size(); ++m)
    for (const Printed& p : sc.printed[m]) cells[m].push_back(format_fixed(p.score, o.width));
  if (o.format == ReportFormat::json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (std::size_t s = 0; s < in.systems.size(); ++s) {
      nlohmann::ordered_json v;
      v["system"] = in.names[s];
      for (std::size_t m = 0; m < sc.keys.size(); ++m) v[sc.metric_names[m]] = cells[m][s];
      list.push_back(v);
    }
    out << python_json_dumps(list, 4) << "\n";
    return;
  }
  print_table(o, out, in.names, sc.metric_names, cells, sc.metric_names, sc.signatures);
}

// The paired test's results as JSON: score, p-value, mean and interval.
void write_test_json(const ReportInputs& in, const SystemsScored& sc,
                     const std::vector<std::vector<TestResult>>& results, std::ostream& out) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (std::size_t s = 0; s < in.systems.size(); ++s) {
    nlohmann::ordered_json v;
    v["system"] = in.names[s];
    for (std::size_t m = 0; m < sc.keys.size(); ++m) {
      const TestResult& r = results[m][s];
      nlohmann::ordered_json d;
      d["score"] = r.score;
      d["p_value"] = r.p_value ? nlohmann::ordered_json(*r.p_value) : nullptr;
      d["mean"] = r.mean ? nlohmann::ordered_json(*r.mean) : nullptr;
      d["ci"] = r.ci ? nlohmann::ordered_json(*r.ci) : nullptr;
      v[sc.metric_names[m]] = d;
    }
    list.push_back(v);
  }
  out << python_json_dumps(list, 4) << "\n";
}

// Several systems, each tested against the first.
void write_paired_test(const ReportOptions& o, const ReportInputs& in, SystemsScored& sc,
                       std::ostream& out) {
  PairedTestOptions opt = paired_options(o);
  opt.seed = numpy_random::seed_from_environment();
  const int n = paired_test_samples(opt.kind, opt.n_samples);
  std::vector<const StatsMetric*> seams;
  for (std::size_t m = 0; m < sc.keys.size(); ++m) {
    seams.push_back(sc.runs[m].seam.get());
    sc.signatures[m] =
        with_test_fields(sc.signatures[m], (o.paired == ReportTest::bootstrap ? "bs:" : "ar:") +
                                               std::to_string(n) + "|seed:" + opt.seed.text);
  }
  const std::vector<std::vector<TestResult>> results =
      while_scoring("resampling for " + resampling_option(o) + " " + std::to_string(n),
                    [&] { return paired_test(seams, sc.seg, opt); });
  if (o.format == ReportFormat::json) return write_test_json(in, sc, results, out);
  // _format_score_lines: "score (mean ± ci)" and the p-value on a line of
  // its own; a column with any interval is titled so, and the titles after it.
  std::vector<std::vector<std::string>> cells(sc.keys.size());
  std::vector<std::string> titles = sc.metric_names;
  bool is_bootstrap = false;
  for (std::size_t m = 0; m < sc.keys.size(); ++m) {
    for (const TestResult& r : results[m]) {
      std::string c = format_fixed(r.score, o.width);
      if (r.mean) {
        is_bootstrap = true;
        c += " (" + format_fixed(*r.mean, o.width) + " ± " + format_fixed(*r.ci, o.width) + ")";
      }
      if (r.p_value)
        c += "\n(p = " + format_fixed(*r.p_value, 4) + ")" + (*r.p_value > 0.05 ? "" : "*");
      cells[m].push_back(c);
    }
    if (is_bootstrap) titles[m] += " (μ ± 95% CI)";
  }
  print_table(o, out, in.names, titles, cells, sc.metric_names, sc.signatures);
}

void write_several_systems(const ReportOptions& o, const ReportInputs& in, std::ostream& out) {
  SystemsScored sc = score_systems(o, in);
  if (paired(o))
    write_paired_test(o, in, sc, out);
  else
    write_scores(o, in, sc, out);
}

}  // namespace

PairedTestOptions paired_options(const ReportOptions& o) {
  PairedTestOptions opt;
  const bool bs = o.paired == ReportTest::bootstrap;
  opt.kind = bs ? PairedTestKind::kBootstrap : PairedTestKind::kRandomization;
  opt.n_samples = bs ? o.paired_bs_n : o.paired_ar_n;
  return opt;
}

// Each resample or trial keeps its scores (8 bytes per metric, and per
// system for the bootstrap) for the interval's sort and the p-value; the
// draws themselves are made a block at a time.
void check_resampling_memory(const ReportOptions& o) {
  const uint64_t phys = physical_memory_bytes();
  double bytes = 0;
  int n = 0;
  if (paired(o)) {
    const PairedTestOptions opt = paired_options(o);
    n = paired_test_samples(opt.kind, opt.n_samples);
    bytes = paired_test_bytes(opt, o.metrics.size());
  } else if (o.confidence) {
    n = o.confidence_n;
    bytes = confidence_interval_bytes(n);
  }
  if (phys == 0 || bytes <= static_cast<double>(phys)) return;
  std::string metric_list;
  for (const std::string& m : o.metrics) metric_list += " " + m;
  const auto most =
      static_cast<long long>(static_cast<double>(n) * static_cast<double>(phys) / bytes);
  throw UsageError("score: " + resampling_option(o) + " " + std::to_string(n) + " needs " +
                   gigabytes(bytes) + " to keep the scores of its " +
                   (o.paired == ReportTest::randomization ? "trials" : "resamples") + " (" +
                   std::to_string(static_cast<long long>(bytes / n)) +
                   " bytes each with {metrics}" + metric_list + "), more than this machine's " +
                   gigabytes(static_cast<double>(phys)) + "; expected at most " +
                   std::to_string(most));
}

void write_report(const ReportOptions& o, const ReportInputs& in, std::ostream& out,
                  const std::function<void()>& line_written) {
  if (o.sentence_level)
    write_sentence_scores(o, in, out, line_written);
  else if (in.systems.size() == 1)
    write_single_system(o, in, out);
  else
    write_several_systems(o, in, out);
}

}  // namespace nmt::metrics
