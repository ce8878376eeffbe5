// How the combine kernels share a row among teams of threads (tiles::combine_split_groups): one
// team for rows of at most one chunk of 8 splits (combine_kernel), else the chunk count rounded up
// to a power of two, at most 256 threads per block (combine_teams_kernel, one row per block).
#include <gtest/gtest.h>

#include "kernels/tile_table.hpp"

namespace splitkv {
namespace {

TEST(CombineTeams, OneTeamPerChunkUpToABlockOf256Threads) {
  // D=128: 32 threads per team, so at most 8 teams.
  EXPECT_EQ(tiles::combine_split_groups(1, 128), 1);
  EXPECT_EQ(tiles::combine_split_groups(8, 128), 1);
  EXPECT_EQ(tiles::combine_split_groups(9, 128), 2);
  EXPECT_EQ(tiles::combine_split_groups(14, 128), 2);
  EXPECT_EQ(tiles::combine_split_groups(17, 128), 4);
  EXPECT_EQ(tiles::combine_split_groups(32, 128), 4);
  EXPECT_EQ(tiles::combine_split_groups(33, 128), 8);
  EXPECT_EQ(tiles::combine_split_groups(70, 128), 8);  // nine chunks: two rounds of eight teams
  // D=64: 16 threads per team (16 teams); D=256: 64 (4 teams).
  EXPECT_EQ(tiles::combine_split_groups(130, 64), 16);
  EXPECT_EQ(tiles::combine_split_groups(40, 256), 4);
  for (int d : {64, 128, 256}) {
    EXPECT_EQ(tiles::combine_rows_per_block(d) * (d / 4), tiles::kCombineThreads) << d;
    // A row of more than one chunk always gets more than one team: combine_kernel folds one chunk only.
    EXPECT_GE(tiles::combine_max_split_groups(d), 2) << d;
    for (int splits = 1; splits <= 512; ++splits) {
      const int groups = tiles::combine_split_groups(splits, d);
      EXPECT_EQ(groups & (groups - 1), 0) << d << " " << splits;  // a power of two
      EXPECT_LE(groups * (d / 4), tiles::kCombineTeamsMaxThreads) << d << " " << splits;
      EXPECT_EQ(groups == 1, splits <= tiles::kCombineChunk) << d << " " << splits;
    }
  }
}

}  // namespace
}  // namespace splitkv
