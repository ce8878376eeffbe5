// Bad input to every entry point returns an error naming the argument (no GPU needed: validation
// happens before any CUDA call).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "splitkv/splitkv.hpp"
#include "testing/decode_case.hpp"
#include "testing/prefill_case.hpp"

namespace splitkv {
namespace {

DecodeProblem good_decode(int page_size = 0) {
  DecodeProblem p;
  p.batch = 2;
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.q_len = 2;
  p.max_kv_len = 100;
  p.page_size = page_size;
  return p;
}

void expect_plan_error(const std::function<void(DecodeProblem&)>& mutate, StatusCode code, const std::string& arg) {
  DecodeProblem p = good_decode();
  mutate(p);
  Plan plan;
  const Status s = plan_decode(p, DeviceInfo::h200(), {}, &plan);
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_EQ(s.argument(), arg) << s.message();
  EXPECT_NE(s.message().find(arg), std::string::npos) << s.message();
}

TEST(Validation, DecodeProblemSizes) {
  expect_plan_error([](DecodeProblem& p) { p.batch = 0; }, StatusCode::kInvalidArgument, "batch");
  expect_plan_error([](DecodeProblem& p) { p.batch = -3; }, StatusCode::kInvalidArgument, "batch");
  expect_plan_error([](DecodeProblem& p) { p.num_q_heads = 0; }, StatusCode::kInvalidArgument, "num_q_heads");
  expect_plan_error([](DecodeProblem& p) { p.num_kv_heads = -1; }, StatusCode::kInvalidArgument, "num_kv_heads");
  expect_plan_error([](DecodeProblem& p) { p.num_q_heads = 7; }, StatusCode::kInvalidArgument, "num_q_heads");
  expect_plan_error([](DecodeProblem& p) { p.q_len = 0; }, StatusCode::kInvalidArgument, "q_len");
  expect_plan_error([](DecodeProblem& p) { p.q_len = 17; }, StatusCode::kInvalidArgument, "q_len");
  expect_plan_error([](DecodeProblem& p) { p.max_kv_len = -1; }, StatusCode::kInvalidArgument, "max_kv_len");
  expect_plan_error([](DecodeProblem& p) { p.page_size = 8; }, StatusCode::kInvalidArgument, "page_size");
  expect_plan_error([](DecodeProblem& p) { p.page_size = 24; }, StatusCode::kInvalidArgument, "page_size");
  expect_plan_error([](DecodeProblem& p) { p.softmax_scale = -1.f; }, StatusCode::kInvalidArgument, "softmax_scale");
  expect_plan_error([](DecodeProblem& p) { p.softmax_scale = std::nanf(""); }, StatusCode::kInvalidArgument, "softmax_scale");
}

TEST(Validation, DecodeUnsupportedHeadDimAndDtype) {
  expect_plan_error([](DecodeProblem& p) { p.head_dim = 96; }, StatusCode::kUnsupported, "head_dim");
  expect_plan_error([](DecodeProblem& p) { p.head_dim = 0; }, StatusCode::kUnsupported, "head_dim");
  // Q/O are fp16 or bf16; quantized element types belong to the KV format, not to dtype.
  expect_plan_error([](DecodeProblem& p) { p.dtype = DType::kI8; }, StatusCode::kInvalidArgument, "dtype");
  expect_plan_error([](DecodeProblem& p) { p.dtype = DType::kI4; }, StatusCode::kInvalidArgument, "dtype");
  expect_plan_error([](DecodeProblem& p) { p.dtype = DType::kF32; }, StatusCode::kInvalidArgument, "dtype");
  expect_plan_error([](DecodeProblem& p) { p.dtype = static_cast<DType>(99); }, StatusCode::kInvalidArgument, "dtype");
}

TEST(Validation, KvFormatIsSeparateFromTheQueryDtype) {
  // Quantized caches under either Q/O dtype (family decode_quant_n8 at these 8 packed rows); a 16-bit
  // cache must hold the dtype.
  for (KvFormat f : {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    for (DType t : {DType::kF16, DType::kBF16}) {
      DecodeProblem q = good_decode();
      q.kv_format = f;
      q.dtype = t;
      Plan quantized;
      ASSERT_TRUE(plan_decode(q, DeviceInfo::h200(), {}, &quantized).ok()) << to_string(f);
      EXPECT_EQ(quantized.family(), "decode_quant_n8");
    }
  }
  expect_plan_error([](DecodeProblem& p) { p.kv_format = KvFormat::kF16; }, StatusCode::kUnsupported, "kv_format");
  expect_plan_error([](DecodeProblem& p) { p.kv_format = static_cast<KvFormat>(42); }, StatusCode::kInvalidArgument,
                    "kv_format");
  DecodeProblem explicit_bf16 = good_decode();
  explicit_bf16.kv_format = KvFormat::kBF16;
  Plan plan;
  EXPECT_TRUE(plan_decode(explicit_bf16, DeviceInfo::h200(), {}, &plan).ok());
  PrefillProblem p;
  p.batch = 1;
  p.num_q_heads = p.num_kv_heads = 2;
  p.head_dim = 64;
  p.max_q_len = p.max_kv_len = 16;
  p.kv_format = KvFormat::kInt4;
  const Status s = plan_prefill(p, DeviceInfo::h200(), {}, &plan);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.argument(), "kv_format");
  EXPECT_NE(s.message().find("int4"), std::string::npos) << s.message();
}

// A valid decode case on host memory; each test breaks one thing and calls run_decode, which must
// refuse before touching the GPU.
class DecodeTensorValidation : public ::testing::Test {
 protected:
  void SetUp() override { make(0); }
  void make(int page_size) {
    testing::DecodeCaseSpec spec;
    spec.problem = good_decode(page_size);
    spec.problem.page_size = page_size;
    spec.seq_lens = {100, 37};
    c = testing::make_decode_case(spec);
    t = c.host_tensors();
    ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  }
  void expect_error(const std::string& arg, StatusCode code = StatusCode::kInvalidArgument) {
    const Status s = run_decode(plan, t, nullptr, 0, nullptr);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_EQ(s.argument(), arg) << s.message();
  }
  testing::DecodeCase c;
  DecodeTensors t;
  Plan plan;
};

TEST_F(DecodeTensorValidation, NullPointers) {
  t.q.data = nullptr;
  expect_error("q.data");
  SetUp();
  t.v.data = nullptr;
  expect_error("v.data");
  SetUp();
  t.seq_lens.data = nullptr;
  expect_error("seq_lens.data");
  SetUp();
  t.out.data = nullptr;
  expect_error("out.data");
}

TEST_F(DecodeTensorValidation, MisalignedPointersAndStrides) {
  t.k.data = static_cast<char*>(t.k.data) + 2;
  expect_error("k.data");
  SetUp();
  t.q.stride[2] = 130;  // rows no longer 16-byte aligned
  expect_error("q.stride[2]");
  SetUp();
  t.out.stride[3] = 2;  // last dim not contiguous
  expect_error("out.stride[3]");
  SetUp();
  t.k.stride[1] = -t.k.stride[1];
  expect_error("k.stride[1]");
}

TEST_F(DecodeTensorValidation, ShapesAndDtypes) {
  t.q.shape[2] = 4;
  expect_error("q.shape[2]");
  SetUp();
  t.k.shape[3] = 64;
  expect_error("k.shape[3]");
  SetUp();
  t.v.dtype = DType::kF16;
  expect_error("v.dtype");
  SetUp();
  t.q.rank = 3;
  expect_error("q.rank");
  SetUp();
  t.lse.shape[2] = 1;
  expect_error("lse.shape[2]");
}

TEST_F(DecodeTensorValidation, LengthsBeyondTheCache) {
  t.k.shape[1] = 50;  // capacity 50 < max_kv_len 100
  expect_error("k.shape[1]");
  SetUp();
  c.seq_lens[1] = 101;  // host copy says a length exceeds the plan's bound
  expect_error("seq_lens[1]");
  SetUp();
  c.seq_lens[0] = -4;
  expect_error("seq_lens[0]");
}

TEST_F(DecodeTensorValidation, PageTableEntriesOutOfRange) {
  make(16);
  c.block_table[3] = static_cast<int32_t>(t.k.shape[0]);  // one past the last page
  expect_error("block_table[0][3]");
  make(16);
  c.block_table[int(c.max_pages) + 1] = -1;
  expect_error("block_table[1][1]");
  make(16);
  t.block_table.shape[1] = 2;  // 2 pages of 16 cannot hold 100 keys
  expect_error("block_table.shape[1]");
  make(0);
  t.block_table = TensorRef::contiguous(c.seq_lens.data(), DType::kI32, {2, 1});
  expect_error("block_table");
}

TEST_F(DecodeTensorValidation, WorkspaceTooSmall) {
  PlanOptions o;
  o.num_splits = 2;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
  ASSERT_GT(plan.workspace_bytes(), 0u);
  expect_error("workspace");
  alignas(16) static char small[64];
  const Status s = run_decode(plan, t, small, sizeof small, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.message();
  EXPECT_EQ(s.argument(), "workspace_bytes");
}

TEST_F(DecodeTensorValidation, WrongPlanKind) {
  PrefillProblem p;
  p.batch = 1;
  p.num_q_heads = p.num_kv_heads = 2;
  p.head_dim = 64;
  p.max_q_len = p.max_kv_len = 16;
  ASSERT_TRUE(plan_prefill(p, DeviceInfo::h200(), {}, &plan).ok());
  expect_error("plan");
}

// A decode plan served by chunked prefill (options.family names a prefill family) takes no
// context shard: keys_after and caller partials are refused by name, before the GPU.
TEST(DecodeViaPrefillValidation, ContextShardTensorsAreRefused) {
  testing::DecodeCase c = testing::make_decode_case(testing::DecodeSpecBuilder(2, 28, 4, 300).queries(8, true).spec);
  PlanOptions o;
  o.family = "prefill_sm90_gqa64";
  Plan plan;
  ASSERT_TRUE(plan_decode(c.problem, DeviceInfo::h200(), o, &plan).ok());
  ASSERT_TRUE(plan.decode_via_prefill());
  DecodeTensors t = c.host_tensors();
  std::vector<int32_t> after = {0, 0};
  t.keys_after = TensorRef::contiguous(after.data(), DType::kI32, {2});
  Status s = run_decode(plan, t, nullptr, 0, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(s.argument(), "keys_after") << s.message();
  EXPECT_NE(s.message().find("prefill_sm90_gqa64"), std::string::npos) << s.message();
  t = c.host_tensors();
  std::vector<float> partials(size_t(plan.num_splits()) * 2 * 8 * 28 * 129);
  t.out = TensorRef{};
  t.lse = TensorRef{};
  t.partial_o = TensorRef::contiguous(partials.data(), DType::kF32, {plan.num_splits(), 2 * 8, 28, 128});
  t.partial_lse = TensorRef::contiguous(partials.data(), DType::kF32, {plan.num_splits(), 2 * 8, 28});
  s = run_decode(plan, t, nullptr, 0, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(s.argument(), "partial_o") << s.message();
}

// ---- prefill --------------------------------------------------------------------------------------

class PrefillTensorValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::PrefillCaseSpec spec;
    spec.problem.batch = 3;
    spec.problem.num_q_heads = 4;
    spec.problem.num_kv_heads = 2;
    spec.problem.head_dim = 64;
    spec.problem.max_q_len = 20;
    spec.problem.max_kv_len = 30;
    spec.problem.varlen = true;
    spec.q_lens = {20, 0, 5};
    spec.kv_lens = {30, 4, 9};
    c = testing::make_prefill_case(spec);
    t = c.host_tensors();
    ASSERT_TRUE(plan_prefill(c.problem, DeviceInfo::h200(), {}, &plan).ok());
  }
  void expect_error(const std::string& arg, StatusCode code = StatusCode::kInvalidArgument) {
    const Status s = run_prefill(plan, t, nullptr, 0, nullptr);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_EQ(s.argument(), arg) << s.message();
  }
  testing::PrefillCase c;
  PrefillTensors t;
  Plan plan;
};

TEST_F(PrefillTensorValidation, CuSeqlensMustBeMonotoneAndInsideTheTensor) {
  c.cu_seqlens_q[2] = 10;  // 20 -> 10: decreasing
  expect_error("cu_seqlens_q[2]");
  SetUp();
  c.cu_seqlens_k[3] = static_cast<int32_t>(t.k.shape[0]) + 1;
  expect_error("cu_seqlens_k[3]");
  SetUp();
  c.cu_seqlens_q[1] = 21;  // sequence longer than max_q_len
  expect_error("cu_seqlens_q[1]");
  SetUp();
  t.cu_seqlens_k.data = nullptr;
  expect_error("cu_seqlens_k.data");
}

TEST_F(PrefillTensorValidation, ShapesPointersAndProblem) {
  t.v.shape[0] = 1;
  expect_error("v.shape[0]");
  SetUp();
  t.out.data = static_cast<char*>(t.out.data) + 8;
  expect_error("out.data");
  SetUp();
  t.lse.shape[0] = 3;
  expect_error("lse.shape[0]");

  PrefillProblem p = c.problem;
  p.head_dim = 256;  // prefill at 256 is the sm_90a family's alone
  DeviceInfo ampere = DeviceInfo::h200();
  ampere.cc_major = 8;
  EXPECT_EQ(plan_prefill(p, ampere, {}, &plan).code(), StatusCode::kUnsupported);
  p.head_dim = 96;
  EXPECT_EQ(plan_prefill(p, DeviceInfo::h200(), {}, &plan).argument(), "head_dim");
  p = c.problem;
  p.max_q_len = 0;
  EXPECT_EQ(plan_prefill(p, DeviceInfo::h200(), {}, &plan).argument(), "max_q_len");
  p = c.problem;
  p.num_kv_heads = 3;
  EXPECT_EQ(plan_prefill(p, DeviceInfo::h200(), {}, &plan).argument(), "num_q_heads");
  p = c.problem;
  p.dtype = DType::kFP8E4M3;  // a KV element type, never a Q/O type
  EXPECT_EQ(plan_prefill(p, DeviceInfo::h200(), {}, &plan).argument(), "dtype");
}

// ---- run_combine ------------------------------------------------------------------------------

class CombineValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    p.num_splits = 3;
    p.batch = 2;
    p.seq_len = 2;
    p.num_heads = 4;
    p.head_dim = 64;
    partial_o.assign(3 * 4 * 4 * 64, 0.f);
    partial_lse.assign(3 * 4 * 4, 0.f);
    out.assign(2 * 2 * 4 * 64, 0);
    t.partial_o = TensorRef::contiguous(partial_o.data(), DType::kF32, {3, 4, 4, 64});
    t.partial_lse = TensorRef::contiguous(partial_lse.data(), DType::kF32, {3, 4, 4});
    t.out = TensorRef::contiguous(out.data(), DType::kBF16, {2, 2, 4, 64});
  }
  void expect_error(const std::string& arg, StatusCode code = StatusCode::kInvalidArgument) {
    const Status s = run_combine(p, t, nullptr);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_EQ(s.argument(), arg) << s.message();
  }
  CombineProblem p;
  CombineTensors t;
  std::vector<float> partial_o, partial_lse;
  std::vector<uint16_t> out;
};

TEST_F(CombineValidation, NamesEveryBadArgument) {
  p.num_splits = 0;
  expect_error("num_splits");
  SetUp();
  p.head_dim = 96;
  expect_error("head_dim", StatusCode::kUnsupported);
  SetUp();
  t.partial_o.shape[1] = 3;  // batch * seq_len = 4 rows
  expect_error("partial_o.shape[1]");
  SetUp();
  t.partial_o.stride[0] *= 2;  // partials are dense
  expect_error("partial_o.stride[0]");
  SetUp();
  t.partial_lse.dtype = DType::kBF16;
  expect_error("partial_lse.dtype");
  SetUp();
  t.out.shape[2] = 8;
  expect_error("out.shape[2]");
  SetUp();
  t.lse = TensorRef::contiguous(partial_lse.data(), DType::kF32, {2, 4, 3});
  expect_error("lse.shape[2]");
}

TEST(Validation, StatusMessagesNameArgumentAndExpectation) {
  const Status s = Status::invalid("q.shape[2]", "32 (num_q_heads)", "16");
  EXPECT_EQ(s.message(), "splitkv: invalid argument 'q.shape[2]': expected 32 (num_q_heads), got 16");
  EXPECT_THROW(throw_if_error(s), Error);
  EXPECT_NO_THROW(throw_if_error(Status::success()));
}

}  // namespace
}  // namespace splitkv
