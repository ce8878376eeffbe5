// The kernel-family registry: the generated tables agree with each other and with the planner.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "plan/family_choice.hpp"
#include "registry/registry.hpp"
#include "splitkv/splitkv.hpp"

namespace splitkv {
namespace {

TEST(Registry, FamiliesAreUniqueAndDescribeTheirTiles) {
  std::set<std::string> names;
  for (const registry::Family& f : registry::families()) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate family " << f.name;
    ASSERT_GT(f.num_head_dims, 0) << f.name;
    EXPECT_NE(f.dtypes, 0u) << f.name;
    // The cache and copy kernels (append, dequant, normalize, the mixed route's) have no tile
    // summary; attention families must.
    const bool cache_kernel = f.kind == registry::Kind::kAppend || f.kind == registry::Kind::kDequant ||
                              f.kind == registry::Kind::kNormalize || f.kind == registry::Kind::kMixed;
    EXPECT_EQ(f.tile == nullptr, cache_kernel) << f.name;
    if (cache_kernel) {
      EXPECT_LT(f.priority, 0) << f.name << ": never chosen by the planner";
      continue;
    }
    for (int i = 0; i < f.num_head_dims; ++i) {
      for (KvFormat kv : {KvFormat::kBF16, KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
        if (kv != KvFormat::kBF16 && !f.has_kv_format(kv)) continue;
        const tiles::TileSummary t = f.tile(f.head_dims[i], kv);
        EXPECT_GT(t.block_m, 0) << f.name;
        EXPECT_GT(t.warps, 0) << f.name;
        EXPECT_GE(t.stages, f.kind == registry::Kind::kCombine ? 0 : 2) << f.name;
        EXPECT_LE(t.smem_bytes, DeviceInfo::h200().smem_per_block_bytes)
            << f.name << " D=" << f.head_dims[i] << " " << to_string(kv);
        if (f.kind != registry::Kind::kCombine) EXPECT_GT(t.block_n, 0) << f.name;
      }
    }
  }
  EXPECT_EQ(registry::find_family("decode_mma"), 0);
  EXPECT_EQ(registry::find_family("nope"), -1);
}

TEST(Registry, CompiledInstancesBelongToTheirFamilies) {
  const auto all = registry::families();
  ASSERT_GT(registry::compiled_instances().size, 0);
  for (const registry::Instance& in : registry::compiled_instances()) {
    ASSERT_GE(in.family, 0);
    ASSERT_LT(in.family, all.size);
    const registry::Family& f = all[in.family];
    EXPECT_TRUE(f.has_head_dim(in.head_dim)) << f.name << " " << in.head_dim;
    EXPECT_TRUE(f.has_dtype(in.dtype)) << f.name;
    EXPECT_TRUE(f.has_kv_format(in.kv_format)) << f.name;
    EXPECT_GE(registry::find_instance(in.family, in.dtype, in.head_dim, in.kv_format), 0);
  }
  // Every build holds the combine for whatever decode holds: split plans need both.
  for (const registry::Instance& in : registry::compiled_instances()) {
    if (all[in.family].kind != registry::Kind::kDecode) continue;
    // The combine merges fp32 partials: it is keyed by the 16-bit format whatever the cache.
    EXPECT_GE(registry::find_instance(registry::find_family("combine"), in.dtype, in.head_dim, KvFormat::kNative), 0);
  }
  // The cache kernels exist at every dtype and head dim, whatever the build selects: a cache must be
  // writable and stageable wherever decode can be built.
  for (const char* name : {"append_kv", "dequant_kv", "atomic_normalize", "mixed_route", "mixed_work"}) {
    const int family = registry::find_family(name);
    ASSERT_GE(family, 0) << name;
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      for (int head_dim : {64, 128, 256}) {
        EXPECT_GE(registry::find_instance(family, dtype, head_dim, KvFormat::kNative), 0)
            << name << " " << to_string(dtype) << " D=" << head_dim;
      }
    }
  }
}

TEST(Registry, PublicViewMatchesTheTables) {
  const std::vector<KernelFamilyInfo> infos = kernel_families();
  ASSERT_EQ(int(infos.size()), registry::families().size);
  size_t compiled = 0;
  for (const KernelFamilyInfo& info : infos) compiled += info.compiled.size();
  EXPECT_EQ(int(compiled), registry::compiled_instances().size);
  const std::vector<int> dims = compiled_head_dims();
  ASSERT_FALSE(dims.empty());
  for (const KernelFamilyInfo::Compiled& c : infos[0].compiled) {
    EXPECT_TRUE(dtype_compiled(c.dtype));
    EXPECT_NE(std::find(dims.begin(), dims.end(), c.head_dim), dims.end());
  }
  // The head dims and types are the attention kernels': the cache kernels' instances at every head
  // dim and type do not count (a build of one head dim reports that one).
  for (int d : {64, 128, 256}) {
    bool attention = false;
    for (const KernelFamilyInfo& info : infos) {
      if (info.kind != "decode" && info.kind != "prefill") continue;
      for (const KernelFamilyInfo::Compiled& c : info.compiled) attention = attention || c.head_dim == d;
    }
    EXPECT_EQ(std::find(dims.begin(), dims.end(), d) != dims.end(), attention) << "D=" << d;
  }
}

TEST(Registry, EveryKindHasADefaultFamilyForItsMainStrategy) {
  for (registry::Kind kind : {registry::Kind::kDecode, registry::Kind::kPrefill}) {
    bool found = false;
    for (const registry::Family& f : registry::families()) {
      found |= f.kind == kind && f.priority >= 0 && f.serves(Strategy::kSplitQ) && f.serves(Strategy::kSplitKV);
    }
    EXPECT_TRUE(found) << registry::to_string(kind);
  }
}

TEST(Registry, QuantizedCachesGoToTheFamiliesThatReadThem) {
  plan::FamilyRequest request{registry::Kind::kDecode, Strategy::kSplitQ, 128, DType::kBF16, KvFormat::kBF16,
                              DeviceInfo::h200(), ""};
  int family = -1;
  ASSERT_TRUE(plan::choose_family(request, &family).ok());
  EXPECT_STREQ(registry::families()[family].name, "decode_mma_n8");  // a 16-bit cache, at most 8 rows
  request.rows_per_kv = 9;
  ASSERT_TRUE(plan::choose_family(request, &family).ok());
  EXPECT_STREQ(registry::families()[family].name, "decode_mma");
  for (KvFormat f : {KvFormat::kFP8E4M3, KvFormat::kInt8, KvFormat::kInt4, KvFormat::kK8V4}) {
    request.kv_format = f;
    request.rows_per_kv = 8;  // keys as the MMA's rows
    ASSERT_TRUE(plan::choose_family(request, &family).ok()) << to_string(f);
    EXPECT_STREQ(registry::families()[family].name, "decode_quant_n8") << to_string(f);
    request.rows_per_kv = 9;  // more rows than its 8-wide tile
    ASSERT_TRUE(plan::choose_family(request, &family).ok()) << to_string(f);
    EXPECT_STREQ(registry::families()[family].name, "decode_quant") << to_string(f);
    plan::FamilyRequest named = request;
    named.name = "decode_quant_n8";
    const Status s = plan::choose_family(named, &family);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_EQ(s.argument(), "q_len") << s.message();
  }
  request.rows_per_kv = 1;
  // A native-only family never claims a quantized cache, even when named.
  request.name = "decode_mma";
  Status s = plan::choose_family(request, &family);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(s.argument(), "kv_format");
  // No prefill family reads quantized K/V itself (plan_prefill has the cache dequantized first).
  request = {registry::Kind::kPrefill, Strategy::kSplitQ, 128, DType::kBF16, KvFormat::kInt8, DeviceInfo::h200(), ""};
  s = plan::choose_family(request, &family);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_EQ(s.argument(), "kv_format");
}

}  // namespace
}  // namespace splitkv
