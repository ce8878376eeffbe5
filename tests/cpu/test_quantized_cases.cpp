// Quantized KV caches on the host: test cases store them in their format (docs/KV_FORMATS.md), the
// fp64 reference and the CPU backend attend over the values they stand for, and validation checks
// their scale tensors. (The formats are accepted by the planner once kernels read them.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "validate/validate.hpp"
#include "cpu/cpu_backend.hpp"
#include "reference/reference.hpp"
#include "testing/compare.hpp"
#include "testing/decode_case.hpp"

namespace splitkv {
namespace {

testing::DecodeCaseSpec spec_for(KvFormat format, int page_size) {
  testing::DecodeCaseSpec spec =
      testing::DecodeSpecBuilder(3, 8, 2, 300).queries(2, true).paged(page_size).format(format).lens({300, 0, 77}).spec;
  spec.seed = 11;
  return spec;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  return std::sqrt(err / ref);
}

struct FormatBound {
  KvFormat format;
  double rel_l2;  // attention over the quantized cache vs over the same values in bf16
};

class QuantizedReference : public ::testing::TestWithParam<FormatBound> {};

TEST_P(QuantizedReference, AttendsOverTheValuesTheCacheStandsFor) {
  for (int page_size : {0, 16}) {
    testing::DecodeCase exact = testing::make_decode_case(spec_for(KvFormat::kBF16, page_size));
    testing::DecodeCase quant = testing::make_decode_case(spec_for(GetParam().format, page_size));
    const ref::Result want = ref::decode(exact.problem, exact.host_tensors());
    const ref::Result got = ref::decode(quant.problem, quant.host_tensors());
    for (double x : got.out) ASSERT_TRUE(std::isfinite(x)) << "NaN in unused slots reached the output";
    const double err = rel_l2(got.out, want.out);
    EXPECT_LT(err, GetParam().rel_l2) << to_string(GetParam().format) << " page " << page_size;
    EXPECT_GT(err, 0.0) << "the quantized cache must not be read as its 16-bit twin";
    // Sequence 1 is empty: zeros and -inf, whatever the format.
    const size_t per_seq_lse = size_t(quant.problem.num_q_heads) * quant.problem.q_len;
    for (size_t i = per_seq_lse; i < 2 * per_seq_lse; ++i) EXPECT_TRUE(std::isinf(got.lse[i]) && got.lse[i] < 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedReference,
                         ::testing::Values(FormatBound{KvFormat::kInt8, 1e-2}, FormatBound{KvFormat::kFP8E4M3, 6e-2},
                                           FormatBound{KvFormat::kK8V4, 0.15}, FormatBound{KvFormat::kInt4, 0.2}),
                         [](const ::testing::TestParamInfo<FormatBound>& info) {
                           return std::string(to_string(info.param.format));
                         });

TEST(QuantizedCpuBackend, SplitsAndCombinesOverAQuantizedCache) {
  for (KvFormat format : {KvFormat::kInt8, KvFormat::kInt4, KvFormat::kFP8E4M3, KvFormat::kK8V4}) {
    testing::DecodeCase c = testing::make_decode_case(spec_for(format, 16));
    PlanOptions o;
    o.num_splits = 3;
    Plan plan;
    ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
    EXPECT_EQ(plan.family(), "decode_quant_n8");  // 8 packed rows: the keys-as-rows tile
    const DecodeTensors t = c.host_tensors();
    ASSERT_TRUE(cpu::run_decode(plan, t).ok());
    const ref::Result want = ref::decode(c.problem, t);
    const std::vector<double> got = testing::dense_values(t.out);
    EXPECT_LT(rel_l2(got, want.out), 1e-2) << to_string(format);  // bf16 output rounding
  }
}

TEST(QuantizedValidation, ScaleTensorsAreCheckedAgainstTheFormat) {
  auto expect = [](const testing::DecodeCase& c, const DecodeTensors& t, const std::string& argument) {
    const Status s = detail::validate_decode_tensors(c.problem, t);
    EXPECT_EQ(s.argument(), argument) << s.message();
  };
  testing::DecodeCase c = testing::make_decode_case(spec_for(KvFormat::kInt8, 16));
  DecodeTensors t = c.host_tensors();
  EXPECT_TRUE(detail::validate_decode_tensors(c.problem, t).ok());
  DecodeTensors bad = t;
  bad.k_scales = TensorRef();
  expect(c, bad, "k_scales.data");
  bad = t;
  bad.v_scales.shape[2] = 8;  // slots must be the page size
  expect(c, bad, "v_scales.shape[2]");
  bad = t;
  bad.k_scales.dtype = DType::kF32;
  expect(c, bad, "k_scales.dtype");
  bad = t;
  bad.k_scales.stride[1] += 1;  // a pair split across an odd stride
  expect(c, bad, "k_scales.stride[1]");
  bad = t;
  bad.k.dtype = DType::kI4;  // int8 codes expected
  expect(c, bad, "k.dtype");

  testing::DecodeCase fp8 = testing::make_decode_case(spec_for(KvFormat::kFP8E4M3, 0));
  DecodeTensors f = fp8.host_tensors();
  EXPECT_TRUE(detail::validate_decode_tensors(fp8.problem, f).ok());
  f.v_scales.shape[0] = 3;  // one scale per KV head
  expect(fp8, f, "v_scales.shape[0]");
  ASSERT_GT(fp8.problem.num_kv_heads, 1);
  f = fp8.host_tensors();
  f.k_scales.stride[0] = int64_t{1} << 31;  // the kernels index the scales in 32 bits
  expect(fp8, f, "k_scales.stride[0]");
  f = fp8.host_tensors();
  f.k_scales.stride[0] = 0;  // one scale broadcast to every head
  EXPECT_TRUE(detail::validate_decode_tensors(fp8.problem, f).ok());

  testing::DecodeCase plain = testing::make_decode_case(spec_for(KvFormat::kBF16, 0));
  DecodeTensors p = plain.host_tensors();
  p.k_scales = t.k_scales;  // a 16-bit cache has no scales
  expect(plain, p, "k_scales");
}

}  // namespace
}  // namespace splitkv
