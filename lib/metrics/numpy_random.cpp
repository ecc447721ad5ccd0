// See numpy_random.h. The constants are numpy's (bit_generator.pyx, pcg64.h).
#include "metrics/numpy_random.h"

#include <cctype>
#include <cstdlib>
#include <random>

#include "core/error.h"

namespace nmt::metrics::numpy_random {

namespace {

// SeedSequence's hash constants and pool size.
constexpr uint32_t kInitA = 0x43b0d7e5;
constexpr uint32_t kMultA = 0x931e8875;
constexpr uint32_t kInitB = 0x8b51f9dd;
constexpr uint32_t kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd;
constexpr uint32_t kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr std::size_t kPoolSize = 4;

// All arithmetic is modulo 2^32, as numpy's uint32 arrays compute it.
uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

std::array<uint32_t, kPoolSize> mix_entropy(const std::vector<uint32_t>& entropy) {
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (std::size_t i = 0; i < kPoolSize; ++i)
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
  // Every word affects every other, so late words reach early ones.
  for (std::size_t src = 0; src < kPoolSize; ++src)
    for (std::size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
  for (std::size_t src = kPoolSize; src < entropy.size(); ++src)
    for (std::size_t dst = 0; dst < kPoolSize; ++dst)
      pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));
  return pool;
}

// numpy's PCG_DEFAULT_MULTIPLIER_128.
constexpr unsigned __int128 kMultiplier =
    (static_cast<unsigned __int128>(0x2360ed051fc65da4ULL) << 64) | 0x4385df649fccf645ULL;

unsigned __int128 u128(uint64_t hi, uint64_t lo) {
  return (static_cast<unsigned __int128>(hi) << 64) | lo;
}

std::vector<uint32_t> words_of(uint64_t seed) {
  if (seed >> 32) return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  return {static_cast<uint32_t>(seed)};
}

}  // namespace

std::vector<uint32_t> seed_sequence_state(const std::vector<uint32_t>& entropy,
                                          std::size_t n_words) {
  const std::array<uint32_t, kPoolSize> pool = mix_entropy(entropy);
  std::vector<uint32_t> state(n_words);
  uint32_t hash_const = kInitB;
  for (std::size_t i = 0; i < n_words; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    state[i] = v;
  }
  return state;
}

Pcg64::Pcg64(uint64_t seed) { seed_from_state(seed_sequence_state(words_of(seed), 8)); }

Pcg64::Pcg64(const std::vector<uint32_t>& entropy) {
  seed_from_state(seed_sequence_state(entropy, 8));
}

Pcg64 Pcg64::from_os_entropy() {
  std::random_device rd;
  return Pcg64(std::vector<uint32_t>{rd(), rd(), rd(), rd()});
}

void Pcg64::seed_from_state(const std::vector<uint32_t>& w) {
  // generate_state(4, np.uint64): pairs of words, little-endian; the first
  // two 64-bit words are the state (high, low), the last two the stream.
  uint64_t v[4];
  for (int i = 0; i < 4; ++i)
    v[i] = static_cast<uint64_t>(w[2 * i]) | (uint64_t{w[2 * i + 1]} << 32);
  const unsigned __int128 init_state = u128(v[0], v[1]);
  const unsigned __int128 init_seq = u128(v[2], v[3]);
  state_ = 0;
  inc_ = (init_seq << 1) | 1;
  state_ = state_ * kMultiplier + inc_;
  state_ += init_state;
  state_ = state_ * kMultiplier + inc_;
  has_u32_ = false;
  u32_ = 0;
}

uint64_t Pcg64::next_u64() {
  state_ = state_ * kMultiplier + inc_;
  // XSL-RR: xor the halves, rotate right by the top six bits.
  const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t Pcg64::next_u32() {
  if (has_u32_) {
    has_u32_ = false;
    return u32_;
  }
  const uint64_t next = next_u64();
  has_u32_ = true;
  u32_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

void Pcg64::integers(uint64_t n, std::size_t count, int64_t* out) {
  if (n == 0) throw InputError("integers: the range is empty (high <= low)");
  const uint64_t rng = n - 1;  // numpy's inclusive range
  if (rng == 0) {
    for (std::size_t i = 0; i < count; ++i) out[i] = 0;
  } else if (rng == 0xFFFFFFFFULL) {
    for (std::size_t i = 0; i < count; ++i) out[i] = next_u32();
  } else if (rng < 0xFFFFFFFFULL) {
    const uint32_t excl = static_cast<uint32_t>(rng) + 1;
    const uint32_t threshold = static_cast<uint32_t>(-excl) % excl;  // 2^32 mod excl
    for (std::size_t i = 0; i < count; ++i) {
      uint64_t m = uint64_t{next_u32()} * excl;
      // The cheap test first: leftover >= excl never needs the modulo.
      if (static_cast<uint32_t>(m) < excl)
        while (static_cast<uint32_t>(m) < threshold) m = uint64_t{next_u32()} * excl;
      out[i] = static_cast<int64_t>(m >> 32);
    }
  } else if (rng == ~uint64_t{0}) {
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<int64_t>(next_u64());
  } else {
    const uint64_t excl = rng + 1;
    const uint64_t threshold = (0 - excl) % excl;
    for (std::size_t i = 0; i < count; ++i) {
      unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * excl;
      if (static_cast<uint64_t>(m) < excl)
        while (static_cast<uint64_t>(m) < threshold)
          m = static_cast<unsigned __int128>(next_u64()) * excl;
      out[i] = static_cast<int64_t>(m >> 64);
    }
  }
}

void Pcg64::bools(std::size_t count, uint8_t* out) {
  uint32_t buf = 0;
  int bits_left = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (bits_left == 0) {
      buf = next_u32();
      bits_left = 31;
    } else {
      buf >>= 1;
      --bits_left;
    }
    out[i] = static_cast<uint8_t>(buf & 1u);
  }
}

Seed parse_seed(const char* env_value) {
  const std::string raw = env_value ? env_value : "12345";
  std::string lower;
  for (char c : raw) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "none") return {std::nullopt, "none"};
  auto bad = [&] {
    return InputError("SACREBLEU_SEED must be a non-negative integer or 'none', got '" + raw + "'");
  };
  std::size_t b = 0, e = raw.size();
  while (b < e && std::isspace(static_cast<unsigned char>(raw[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(raw[e - 1]))) --e;
  if (b < e && raw[b] == '+') ++b;
  if (b == e) throw bad();
  uint64_t v = 0;
  bool prev_digit = false;
  for (std::size_t i = b; i < e; ++i) {
    const char c = raw[i];
    if (c == '_' && prev_digit && i + 1 < e) {
      prev_digit = false;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) throw bad();
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (~uint64_t{0} - d) / 10)
      throw InputError("SACREBLEU_SEED '" + raw + "' is larger than nmt takes (2^64 - 1)");
    v = v * 10 + d;
    prev_digit = true;
  }
  return {v, std::to_string(v)};
}

Seed seed_from_environment() { return parse_seed(std::getenv("SACREBLEU_SEED")); }

Pcg64 default_rng(const std::optional<uint64_t>& seed) {
  return seed ? Pcg64(*seed) : Pcg64::from_os_entropy();
}

}  // namespace nmt::metrics::numpy_random
