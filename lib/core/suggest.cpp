#include "core/suggest.h"

#include <algorithm>

namespace nmt {

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& known) {
  std::string best;
  int best_d = 1 << 30;
  for (const std::string& k : known) {
    int d = edit_distance(typed, k);
    const size_t longer = std::max(typed.size(), k.size());
    const bool prefix = typed.size() >= 3 && (k.rfind(typed, 0) == 0 || typed.rfind(k, 0) == 0);
    if (prefix) d = std::min<int>(d, 1);
    if (!prefix && 3 * d > static_cast<int>(longer)) continue;
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

std::string did_you_mean(const std::string& typed, const std::vector<std::string>& known) {
  const std::string c = closest_name(typed, known);
  return c.empty() ? "" : " (did you mean " + c + "?)";
}

}  // namespace nmt
