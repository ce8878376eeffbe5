// How a launch sizes its shared memory (launch/launch_config.hpp): grids of no more blocks than SMs
// get a block per SM of their own.
#include <gtest/gtest.h>

#include "launch/launch_config.hpp"

namespace splitkv::detail {
namespace {

constexpr int kH200SmemPerSm = 228 * 1024;
constexpr int kH200Sms = 132;

// Two blocks of `smem` fit in one SM's shared memory.
bool two_fit(int smem) { return 2 * (smem + kReservedSmemPerBlock) <= kH200SmemPerSm; }

TEST(LaunchConfig, GridsOfAtMostOneBlockPerSmGetAnSmEach) {
  const int decode_smem = 102400;  // two blocks per SM fit
  ASSERT_TRUE(two_fit(decode_smem));
  for (long long blocks : {1LL, 64LL, 128LL, 132LL}) {
    const int smem = spread_smem_bytes(decode_smem, blocks, kH200Sms, kH200SmemPerSm, 1);
    EXPECT_GT(smem, decode_smem) << blocks;
    EXPECT_FALSE(two_fit(smem)) << blocks;
    EXPECT_TRUE(two_fit(smem - 128)) << "no more than needed: " << smem;
    EXPECT_EQ(smem % 128, 0);
  }
}

TEST(LaunchConfig, LargerGridsHelpersClustersAndLargeBlocksKeepTheirSize) {
  EXPECT_EQ(spread_smem_bytes(102400, 133, kH200Sms, kH200SmemPerSm, 1), 102400);  // more blocks than SMs
  EXPECT_EQ(spread_smem_bytes(0, 8, kH200Sms, kH200SmemPerSm, 1), 0);              // the combine, append_kv
  EXPECT_EQ(spread_smem_bytes(48 * 1024, 8, kH200Sms, kH200SmemPerSm, 1), 48 * 1024);
  EXPECT_EQ(spread_smem_bytes(102400, 64, kH200Sms, kH200SmemPerSm, 8), 102400);    // a cluster launch
  EXPECT_EQ(spread_smem_bytes(232448, 64, kH200Sms, kH200SmemPerSm, 1), 232448);    // one per SM already
}

}  // namespace
}  // namespace splitkv::detail
