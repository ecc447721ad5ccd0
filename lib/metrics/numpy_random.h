// numpy's default random generator, reproduced draw for draw, so that the
// significance tests of `nmt score` resample exactly what sacreBLEU 2.6.0
// (numpy 1.24) resamples with the same SACREBLEU_SEED:
//   np.random.default_rng(seed) = Generator(PCG64(SeedSequence(seed))),
//   rng.integers(0, n, size, dtype=int64) (= rng.choice(n, size, replace=True)),
//   rng.integers(2, size, dtype=bool).
// Written from the algorithms (numpy/random/bit_generator.pyx's SeedSequence,
// pcg64.h's XSL-RR 128/64 generator, distributions.c's bounded integers) and
// checked against numbers numpy printed (tests/test_metrics.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nmt::metrics::numpy_random {

// SeedSequence(entropy).generate_state(n_words) with uint32 words: entropy
// is the seed's 32-bit words, least significant first (0 is {0}).
std::vector<uint32_t> seed_sequence_state(const std::vector<uint32_t>& entropy,
                                          std::size_t n_words);

// PCG64 with numpy's multiplier, seeded as numpy seeds it, and its 32-bit
// draws: one 64-bit output gives two, low half first (numpy keeps the high
// half for the next 32-bit call, across calls).
class Pcg64 {
 public:
  // default_rng(seed) for a non-negative integer seed.
  explicit Pcg64(uint64_t seed);
  // default_rng(None): 128 bits from the operating system, as numpy takes them.
  static Pcg64 from_os_entropy();
  // From SeedSequence entropy words (128 bits from the OS for None).
  explicit Pcg64(const std::vector<uint32_t>& entropy);

  uint64_t next_u64();
  uint32_t next_u32();

  // rng.integers(0, n, size=count, dtype=np.int64), which rng.choice(n, size,
  // replace=True) calls: Lemire's multiply-shift with rejection on 32-bit
  // draws for n <= 2^32, on 64-bit draws beyond. n must be positive.
  void integers(uint64_t n, std::size_t count, int64_t* out);
  // rng.integers(2, size=count, dtype=bool): one bit of a 32-bit draw per
  // value, lowest bit first; a new draw every 32 values within the call.
  void bools(std::size_t count, uint8_t* out);

 private:
  Pcg64() = default;
  void seed_from_state(const std::vector<uint32_t>& words);
  unsigned __int128 state_ = 0;
  unsigned __int128 inc_ = 0;
  bool has_u32_ = false;
  uint32_t u32_ = 0;
};

// sacreBLEU's seed: the SACREBLEU_SEED environment variable (default
// "12345"); "none" in any case means fresh entropy. `text` is what the
// signature prints (str(seed).lower()).
struct Seed {
  std::optional<uint64_t> value;
  std::string text;
};
// Parses as Python's int() would for the values numpy accepts (surrounding
// blanks, a '+', digits with single underscores between them); throws
// nmt::InputError naming SACREBLEU_SEED otherwise, negative seeds included.
Seed parse_seed(const char* env_value);
Seed seed_from_environment();

// default_rng(seed): the seeded generator, or OS entropy for none.
Pcg64 default_rng(const std::optional<uint64_t>& seed);

}  // namespace nmt::metrics::numpy_random
