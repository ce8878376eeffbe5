// The work list of a mixed serving step (kernels/common/mixed_work.hpp): every query row of every KV
// head computed by exactly one prefill tile or by the splits of one decode row, whose keys tile the
// row's visible keys; each bad sequence one kBad unit and nothing else; the list within the plan's
// bound; the two kinds interleaved in proportion, each in sequence order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/causal_mask.hpp"
#include "plan/mixed_work_list.hpp"
#include "testing/mixed_batch.hpp"

namespace splitkv {
namespace {

using detail::MixedShape;
using detail::MixedUnit;
using detail::MixedUnitKind;

MixedShape shape(int max_seqs, int max_tokens, int max_kv_len) {
  return testing::mixed_test_shape(max_seqs, max_tokens, max_kv_len);
}

using Batch = testing::MixedBatch;

void expect_covers(const MixedShape& s, const Batch& batch, const std::vector<MixedUnit>& list) {
  ASSERT_LE(int64_t(list.size()), plan::mixed_max_units(s));
  const int B = batch.size();
  // (b, kv_head) -> rows covered by prefill tiles; keys covered by decode splits, in split order.
  std::vector<std::vector<int>> rows_seen(size_t(B) * s.num_kv_heads);
  std::vector<std::vector<MixedUnit>> splits(size_t(B) * s.num_kv_heads);
  std::vector<int> bad_units(B, 0);
  for (const MixedUnit& u : list) {
    ASSERT_GE(u.b, 0);
    ASSERT_LT(u.b, B);
    if (u.kind == MixedUnitKind::kBad) {
      ++bad_units[u.b];
      continue;
    }
    ASSERT_GE(u.kv_head, 0);
    ASSERT_LT(u.kv_head, s.num_kv_heads);
    const size_t key = size_t(u.b) * s.num_kv_heads + u.kv_head;
    if (u.kind == MixedUnitKind::kPrefillTile) {
      EXPECT_LE(u.rows, s.prefill_rows);
      for (int r = u.row0; r < u.row0 + u.rows; ++r) rows_seen[key].push_back(r);
      const int q_len = batch.cu_q[u.b + 1] - batch.cu_q[u.b];
      const int last_query = (u.row0 + u.rows - 1) / s.group;
      EXPECT_EQ(u.key_lo, 0);
      EXPECT_EQ(u.key_hi, detail::visible_shard_key_end(s.causal, q_len, batch.lens[u.b], 0, last_query));
    } else {
      splits[key].push_back(u);
    }
  }
  for (int b = 0; b < B; ++b) {
    const int q_len = batch.cu_q[b + 1] - batch.cu_q[b], n = batch.lens[b];
    const bool bad = q_len < 0 || n < q_len || n > s.max_kv_len || batch.cu_q[b + 1] > s.max_tokens;
    EXPECT_EQ(bad_units[b], bad ? 1 : 0) << "sequence " << b;
    const int rows = q_len * s.group;
    for (int h = 0; h < s.num_kv_heads; ++h) {
      const size_t key = size_t(b) * s.num_kv_heads + h;
      if (bad || rows == 0) {
        EXPECT_TRUE(rows_seen[key].empty() && splits[key].empty()) << "sequence " << b;
        continue;
      }
      if (rows <= s.decode_max_rows) {
        ASSERT_FALSE(splits[key].empty()) << "sequence " << b;
        EXPECT_TRUE(rows_seen[key].empty());
        int next = 0;
        for (size_t j = 0; j < splits[key].size(); ++j) {
          const MixedUnit& u = splits[key][j];
          EXPECT_EQ(u.split, int(j));
          EXPECT_EQ(u.num_splits, int(splits[key].size()));
          EXPECT_EQ(u.row0, 0);
          EXPECT_EQ(u.rows, rows);
          EXPECT_EQ(u.key_lo, next) << "sequence " << b << " split " << j;
          next = std::max(next, u.key_hi);
        }
        EXPECT_EQ(next, n) << "sequence " << b;  // bottom-right: the last query sees every key
        EXPECT_LE(int(splits[key].size()), s.max_splits);
      } else {
        EXPECT_TRUE(splits[key].empty());
        std::vector<int> seen = rows_seen[key];
        std::sort(seen.begin(), seen.end());
        ASSERT_EQ(int(seen.size()), rows) << "sequence " << b;
        for (int r = 0; r < rows; ++r) ASSERT_EQ(seen[r], r) << "sequence " << b;
      }
    }
  }
}

TEST(MixedWorkList, EveryRowOnceEverySplitInOrderRandomMixes) {
  std::mt19937 rng(7);
  const MixedShape s = shape(64, 8192, 131072);
  for (int trial = 0; trial < 200; ++trial) {
    const Batch batch = testing::random_mixed_batch(rng, s);
    const std::vector<MixedUnit> list = plan::mixed_work_list(s, batch.cu_q.data(), batch.lens.data(), batch.size());
    expect_covers(s, batch, list);
  }
}

TEST(MixedWorkList, BadLengthsGiveOneBadUnitAndNothingElse) {
  const MixedShape s = shape(8, 1000, 5000);
  Batch batch;
  // fine; q_len > n; n > max_kv_len; a negative q_len; queries past max_tokens (twice: the second
  // sequence starts past them)
  batch.cu_q = {0, 4, 14, 20, 18, 1200, 1200};
  batch.lens = {100, 5, 6000, 50, 2000, 300};
  const std::vector<MixedUnit> list = plan::mixed_work_list(s, batch.cu_q.data(), batch.lens.data(), batch.size());
  expect_covers(s, batch, list);
  int bad = 0;
  for (const MixedUnit& u : list) bad += u.kind == MixedUnitKind::kBad;
  EXPECT_EQ(bad, 5);
}

// Positions of both kinds form a permutation of the list, each kind in its own order, and every
// prefix of the list holds each kind in proportion (within one unit).
TEST(MixedWorkList, KindsInterleaveInProportion) {
  for (long long prefill : {0, 1, 2, 3, 7, 64, 1000}) {
    for (long long decode : {0, 1, 5, 8, 63, 512}) {
      const long long total = prefill + decode;
      std::vector<int> kind(size_t(total), -1);
      for (int is_decode = 0; is_decode < 2; ++is_decode) {
        const long long n = is_decode ? decode : prefill;
        long long last = -1;
        for (long long i = 0; i < n; ++i) {
          const long long at = detail::interleave_position(i, is_decode, prefill, decode);
          ASSERT_GE(at, 0);
          ASSERT_LT(at, total);
          ASSERT_EQ(kind[size_t(at)], -1) << prefill << "/" << decode << " unit " << i;
          ASSERT_GT(at, last);
          last = at;
          kind[size_t(at)] = is_decode;
        }
      }
      long long seen_decode = 0;
      for (long long at = 0; at < total; ++at) {
        seen_decode += kind[size_t(at)];
        const double expected = double(at + 1) * double(decode) / double(total);
        EXPECT_LE(std::abs(double(seen_decode) - expected), 1.0 + 1e-9) << prefill << "/" << decode << " at " << at;
      }
    }
  }
}

TEST(MixedWorkList, TheBoundHoldsForTheFullestBatches) {
  const MixedShape s = shape(32, 4096, 65536);
  // Every sequence a decode row of the longest context (most splits), or the tokens spread as
  // one-tile-plus-one-row chunks (most partial tiles).
  Batch decode_rows, chunks;
  decode_rows.cu_q.push_back(0);
  chunks.cu_q.push_back(0);
  for (int b = 0; b < s.max_seqs; ++b) {
    decode_rows.cu_q.push_back(decode_rows.cu_q.back() + 2);
    decode_rows.lens.push_back(s.max_kv_len);
    chunks.cu_q.push_back(std::min(s.max_tokens, chunks.cu_q.back() + 33));
    chunks.lens.push_back(s.max_kv_len);
  }
  for (const Batch* batch : {&decode_rows, &chunks}) {
    const std::vector<MixedUnit> list =
        plan::mixed_work_list(s, batch->cu_q.data(), batch->lens.data(), batch->size());
    expect_covers(s, *batch, list);
  }
}

}  // namespace
}  // namespace splitkv
