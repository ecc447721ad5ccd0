// sacreBLEU's multi-system output. The table: what tabulate 0.8.9 prints for
// tabulate(columns, headers='keys', tablefmt='fancy_grid',
// colalign=('right',), stralign='center', numalign='center',
// floatfmt='.{width}f'), with colours off. Widths count code points, as
// tabulate does without the wcwidth module (Debian's sacreBLEU setup).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nmt::metrics {

// columns[c][r] is row r of column c; a cell may hold several lines ('\n').
// The result has no final newline.
std::string fancy_grid(const std::vector<std::string>& headers,
                       const std::vector<std::vector<std::string>>& columns, int float_decimals);

// Python's repr() of a float: the shortest digits that read back to it,
// positional for exponents -4..15, otherwise d.ddde±XX ("1e-05", "0.5", "2.0").
std::string python_float_repr(double v);

// json.dumps(value, indent=indent) as Python writes it (ensure_ascii, ", "
// and ": " separators, floats by repr), which sacreBLEU's multi-system JSON
// is. nlohmann's dump differs only in float digits, now and then.
std::string python_json_dumps(const nlohmann::ordered_json& value, int indent);

}  // namespace nmt::metrics
