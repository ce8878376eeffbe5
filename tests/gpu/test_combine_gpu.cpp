// run_combine: merging partials given by the caller, against the same merge in fp64.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/half_convert.hpp"
#include "gpu_test_util.hpp"
#include "kernels/common/lse_combine.hpp"

namespace splitkv {
namespace {

using testing::DeviceBuffer;

// Partials of `rows` = batch x seq_len x heads rows from `splits` splits ([splits, rows, D], LSEs
// [splits, rows]) merged by run_combine into bf16 out [batch, seq_len, heads, D] and lse
// [batch, heads, seq_len].
struct Merged {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};
Merged combine_on_gpu(const CombineProblem& p, const std::vector<float>& partial_o,
                      const std::vector<float>& partial_lse) {
  const int S = p.num_splits, rows = p.batch * p.seq_len * p.num_heads, D = p.head_dim;
  DeviceBuffer d_o = DeviceBuffer::from(partial_o), d_lse = DeviceBuffer::from(partial_lse);
  Merged m{std::vector<uint16_t>(size_t(rows) * D, testing::nan_bits(DType::kBF16)),
           std::vector<float>(size_t(rows), std::numeric_limits<float>::quiet_NaN())};
  DeviceBuffer d_out = DeviceBuffer::from(m.out), d_out_lse = DeviceBuffer::from(m.lse);
  CombineTensors t;
  t.partial_o = TensorRef::contiguous(d_o.get(), DType::kF32, {S, p.batch * p.seq_len, p.num_heads, D});
  t.partial_lse = TensorRef::contiguous(d_lse.get(), DType::kF32, {S, p.batch * p.seq_len, p.num_heads});
  t.out = TensorRef::contiguous(d_out.get(), DType::kBF16, {p.batch, p.seq_len, p.num_heads, D});
  t.lse = TensorRef::contiguous(d_out_lse.get(), DType::kF32, {p.batch, p.num_heads, p.seq_len});
  const Status s = run_combine(p, t, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  d_out.download(m.out.data(), m.out.size() * sizeof(uint16_t));
  d_out_lse.download(m.lse.data(), m.lse.size() * sizeof(float));
  return m;
}

CombineProblem problem_of(int splits, int batch, int head_dim = 128) {
  CombineProblem p;
  p.num_splits = splits;
  p.batch = batch;
  p.seq_len = 3;
  p.num_heads = 3;
  p.head_dim = head_dim;
  return p;
}

// Splits are merged in chunks of 8 (combine_state.cuh); a row of several chunks gets a block of
// teams, one chunk each (tiles::combine_split_groups: at most 8 teams at D=128, 4 at D=256, 16 at
// D=64). At D=128: 5 splits one chunk (combine_kernel, 27 rows: its last block holds rows past the
// end); 12 two teams; 17 three chunks on four teams (one idles); 40 five chunks on eight; 70 nine
// chunks, two rounds of eight. D=256 (40: two rounds of 4 teams) and D=64 (16 teams) where built.
TEST(CombineGpu, MergesCallerPartialsLikeTheFp64Formula) {
  SPLITKV_REQUIRE_GPU(DType::kBF16, 128);
  struct Shape {
    int splits, head_dim;
  };
  for (const Shape shape :
       {Shape{5, 128}, Shape{12, 128}, Shape{17, 128}, Shape{40, 128}, Shape{70, 128}, Shape{40, 256},
        Shape{130, 64}}) {
    if (!gpu_test::compiled(DType::kBF16, shape.head_dim)) continue;
    const int S = shape.splits;
    const CombineProblem p = problem_of(S, 3, shape.head_dim);
    const int rows = p.batch * p.seq_len * p.num_heads, D = p.head_dim;
    std::mt19937_64 rng(7 + S);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> partial_o(size_t(S) * rows * D), partial_lse(size_t(S) * rows);
    for (float& x : partial_o) x = normal(rng);
    for (float& x : partial_lse) x = 3.f * normal(rng);
    const float inf = std::numeric_limits<float>::infinity();
    // Row 0: split 2 empty. Row 1: every split empty (O = 0 expected). Row 2: a NaN LSE (bad input upstream).
    // An empty partial has weight 0 whatever its O holds: theirs are NaN and Inf here (a caller's
    // empty shard need not write its O).
    partial_lse[2 * rows + 0] = -inf;
    for (int j = 0; j < D; ++j) partial_o[(size_t(2) * rows + 0) * D + j] = j % 2 ? inf : std::nanf("");
    for (int s = 0; s < S; ++s) {
      partial_lse[size_t(s) * rows + 1] = -inf;
      for (int j = 0; j < D; ++j) partial_o[(size_t(s) * rows + 1) * D + j] = std::nanf("");
    }
    partial_lse[3 * rows + 2] = std::numeric_limits<float>::quiet_NaN();
    const Merged m = combine_on_gpu(p, partial_o, partial_lse);

    for (int row = 0; row < rows; ++row) {
      const int h = row % p.num_heads, i = row / p.num_heads % p.seq_len, b = row / p.num_heads / p.seq_len;
      const float got_lse = m.lse[size_t((b * p.num_heads + h) * p.seq_len + i)];
      std::vector<double> lses(S);
      for (int k = 0; k < S; ++k) lses[k] = partial_lse[size_t(k) * rows + row];
      if (row == 2) {  // NaN in, NaN out: never a plausible number
        EXPECT_TRUE(std::isnan(got_lse)) << S << " splits, D=" << D;
        for (int j = 0; j < D; ++j) EXPECT_TRUE(std::isnan(detail::bf16_to_float(m.out[size_t(row) * D + j])));
        continue;
      }
      const double want_lse = detail::combined_lse(lses.data(), S, 1);
      if (row == 1) {
        EXPECT_TRUE(std::isinf(got_lse) && got_lse < 0) << S << " splits, D=" << D;
      } else {
        EXPECT_NEAR(got_lse, want_lse, 1e-5 * std::max(1.0, std::abs(want_lse)))
            << S << " splits, D=" << D << ", row " << row;
      }
      for (int j = 0; j < D; ++j) {
        double want = 0;
        for (int k = 0; k < S; ++k) {
          want += detail::combine_term(detail::combine_weight(lses[k], want_lse),
                                       double(partial_o[(size_t(k) * rows + row) * D + j]));
        }
        const double got = detail::bf16_to_float(m.out[size_t(row) * D + j]);
        EXPECT_NEAR(got, want, std::abs(want) / 128 + 1e-6)
            << S << " splits, D=" << D << ", row " << row << " col " << j;
      }
    }
  }
}

}  // namespace
}  // namespace splitkv
