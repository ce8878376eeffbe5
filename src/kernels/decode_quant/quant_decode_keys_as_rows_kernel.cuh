// Split-KV decode over a quantized KV cache with the keys as the MMA's rows (quant_keys_as_rows.cuh):
// quant_decode_kernel's block, loader, ring, merge and epilogue (quant_decode_block.cuh), for
// blocks of at most 8 packed query rows.
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include "kernels/common/score_softcap.cuh"
#include "kernels/decode_quant/quant_decode_block.cuh"
#include "kernels/decode_quant/quant_decode_traits.cuh"
#include "kernels/decode_quant/quant_keys_as_rows.cuh"
#include "kernels/decode_quant/quant_keys_as_rows_kc.cuh"

namespace splitkv::detail {

// The quantized-cache traits with 8 packed rows per block. With 8 rows the variants instance
// (softcap, window) of a per-token format fits the plain instance's register bound without a
// spill; the keys-per-channel loop does not (docs/TUNING.md), so only *_kc keeps the lower one,
// and with fp16 Q (kc_split_q: Q's operand in two halves) the plain instance takes it too.
template <class Base>
struct KeysAsRowsTraits : Base {
  static constexpr int kBlockM = kKeysAsRowsQueries;
  static constexpr int kVariantsMinBlocksPerSm =
      Base::kChannelKeys ? Base::kVariantsMinBlocksPerSm : Base::kMinBlocksPerSm;
  static constexpr int kMinBlocksPerSm = kc_split_q<Base>() ? kVariantsMinBlocksPerSm : Base::kMinBlocksPerSm;
};

// kVariants: the variants instance (DecodeParams' softcap, sliding window and a single split's sinks,
// docs/VARIANTS.md), in two versions: kCapped, with the softcap (ScoreSoftcap), and without.
template <class Traits, bool kVariants = false, bool kCapped = false>
__global__ void __launch_bounds__(Traits::kThreads, kVariants ? Traits::kVariantsMinBlocksPerSm : Traits::kMinBlocksPerSm)
    quant_decode_keys_as_rows_kernel(const __grid_constant__ DecodeParams p) {
  using namespace cute;
  constexpr int D = Traits::kHeadDim;
  constexpr int kN = Traits::kWarpKeys;

  extern __shared__ __align__(128) char smem[];
  __shared__ int block_saw_bad_input;

  const QuantBlockCoords at = QuantBlockCoords::of_this_block<Traits::kBlockM>(p);
  const int tid = threadIdx.x, lane = tid % 32;
  const int g = lane / 4, c = lane % 4;
  const DecodeKeyRange keys = start_quant_block<Traits, kVariants>(p, at, smem, tid, block_saw_bad_input);
  // Before the key loop's state exists (its registers); keys per channel: the tail slot is still checked.
  if (!Traits::kChannelKeys && block_reads_no_key(p, keys)) {
    write_rows_of_no_key<typename Traits::Element, Traits::kBlockM, D, Traits::kThreads, kVariants>(
        p, at.b, at.kv_head, at.split, at.row0, at.rows_here);
    return;
  }
  int my_subtiles;
  QuantKvLoader<Traits> kv = start_quant_ring<Traits>(p, at, smem, tid, keys, my_subtiles);

  using Element = typename Traits::Element;
  const Element* sQ = reinterpret_cast<const Element*>(smem);
  KeysAsRowsQ<Traits> q;
  // Keys per channel: Q's fragment is built per group (build_kc_group_q); here only its shift.
  // (The tail ring's view is worked out where it is used: kept across the loop, its registers
  // made the INT4 kernel spill at three blocks per SM.)
  if constexpr (Traits::kChannelKeys) {
    kc_q_shift(q, sQ, lane);
  } else {
    q.load(sQ, lane);
  }
  float k_scale, v_scale;
  fp8_head_scales<Traits>(k_scale, v_scale);
  const float scale_log2 = p.scale_log2 * q.unshift * k_scale;
  static_assert(kVariants || !kCapped, "the capped version is a variants instance's");
  const ScoreSoftcap<kCapped> softcap(p.softcap, scale_log2);

  KeysAsRowsO<Traits> o;
  o.clear();
  KeysAsRowsSoftmax softmax;
  softmax.reset();
  int row_end[2], row_start[2];  // rows 2c, 2c + 1: the keys each sees (start: kVariants)
  int row_tree[2];               // kVariants: where their tree-mask bits start (tree_row)
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = min(at.row0 + 2 * c + r, p.rows_per_kv - 1);
    const int query = p.group.div(row);
    row_end[r] = min(keys.hi, query_key_end<kVariants>(p, keys.len, keys.after, query));
    row_start[r] = query_key_start<kVariants>(p, keys.len, keys.after, query);
    if constexpr (kVariants) row_tree[r] = tree_row(p, query);
  }
  const QuantLaneReads<Traits> reads(lane);

  KcGroupFold group_fold{};  // keys per channel: the fold of the warp's current run
  // Sub-tile n's scores (s: keys g, g + 8 of rows 2c, 2c + 1), masked past each row's end.
  auto scores_of = [&](const char* stage, int n, float (&s)[4]) {
    if constexpr (Traits::kChannelKeys) {
      // q_scale (2^shift, exact) is worked out where it is used: the tail's sub-tiles and a run's
      // first, not every sub-tile.
      if (kv.subtile_start(n) >= kv.groups_end) {  // the newest group: 16-bit keys from the tail
        const KcTail<Element> tail = kc_tail_of<Element>(p, at.b, at.kv_head);
        kc_tail_scores<Traits>(sQ, tail.rows, tail.row_stride, kv.subtile_start(n), keys.hi, 1.f / q.unshift, lane, s);
      } else {
        if (n % Traits::kRunSubtiles == 0) {
          group_fold = build_kc_group_q(q, 1.f / q.unshift, sQ, kv.group_scales(n), lane);
        }
        keys_as_rows_scores<Traits>(q, stage, reads, s);
        apply_kc_group_fold(group_fold, s);
      }
    } else {
      keys_as_rows_scores<Traits>(q, stage, reads, s);
      if constexpr (Traits::kTokenScales) keys_as_rows_fold_k_scales<Traits>(q, stage + Traits::kKScaleOffset, lane, s);
    }
    softcap.apply(s);
    const int t0 = kv.subtile_start(n);
    if constexpr (kVariants) {
      const bool drafts = keys.tree != nullptr && t0 + kN > keys.first_draft;
      if (t0 + kN > min(row_end[0], row_end[1]) || t0 < max(row_start[0], row_start[1]) || drafts) {
        CUTE_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int key = t0 + g + 8 * (i / 2);
          if (key >= row_end[i % 2] || key < row_start[i % 2] || tree_hides(keys, row_tree[i % 2], key)) {
            s[i] = kNegInf;
          }
        }
      }
    } else if (t0 + kN > min(row_end[0], row_end[1])) {
      CUTE_UNROLL
      for (int i = 0; i < 4; ++i) {
        if (t0 + g + 8 * (i / 2) >= row_end[i % 2]) s[i] = kNegInf;
      }
    }
  };
  // The softmax over kSubtiles sub-tiles' scores at once (s: float[kSubtiles][4]), then their P V.
  auto fold_and_accumulate = [&](auto& s, const char* const* stages) {
    constexpr int kSubtiles = std::extent_v<std::remove_reference_t<decltype(s)>>;
    float rescale[2];
    softmax.fold(s, scale_log2, rescale);
    if (!__all_sync(0xffffffffu, rescale[0] == 1.f && rescale[1] == 1.f)) o.rescale(rescale);
    CUTE_UNROLL
    for (int n = 0; n < kSubtiles; ++n) keys_as_rows_accumulate_pv<Traits>(s[n], stages[n], reads, lane, o);
  };

  // ---- Main loop over this warp's sub-tiles ----------------------------------------------------------
  // Pairs (4-bit V codes only): a warp whose whole share has been in flight since the block's start
  // (short rows) takes its sub-tiles two at a time, so the two chains of dependent instructions
  // (scores, softmax, P V) interleave and one reduction and rescale serve both. Faster for 4-bit
  // values, slower for bf16, so the other formats keep one at a time (docs/TUNING.md, "Kernels").
  bool in_pairs = false;
  if constexpr (Traits::kVCode == CodeKind::kInt4 && !Traits::kChannelKeys) in_pairs = my_subtiles <= Traits::kStages - 1;
  if (in_pairs) {
    cp_async_wait<0>();
    __syncwarp();  // every lane's copies of the whole share are visible
    int n = 0;
    for (; n + 1 < my_subtiles; n += 2) {
      const char* const stages[2] = {kv.stage(n), kv.stage(n + 1)};  // (the ring's first fill: stage n)
      float s[2][4];
      scores_of(stages[0], n, s[0]);
      scores_of(stages[1], n + 1, s[1]);
      fold_and_accumulate(s, stages);
    }
    if (n < my_subtiles) {
      const char* const stages[1] = {kv.stage(n)};
      float s[1][4];
      scores_of(stages[0], n, s[0]);
      fold_and_accumulate(s, stages);
    }
  } else {
    for (int n = 0; n < my_subtiles; ++n) {
      const char* const stages[1] = {kv.next_to_read(n, my_subtiles)};
      float s[1][4];
      scores_of(stages[0], n, s[0]);
      fold_and_accumulate(s, stages);
    }
  }
  cp_async_wait<0>();
  softmax.reduce_sums();

  // O^T's columns are the query rows: each thread holds rows 2c, 2c + 1 of its head-dim columns.
  bool tail_bad = false;  // keys per channel: a tail slot outside the ring is bad input
  if constexpr (Traits::kChannelKeys) tail_bad = kc_tail_of<Element>(p, at.b, at.kv_head).bad;
  finish_quant_block<Traits, false, kVariants>(p, at, smem, tid, keys.bad_input || kv.bad_input || tail_bad, block_saw_bad_input, scale_log2,
                             v_scale, [&](const auto& merge, int warp) {
                               float* sO = merge.o + warp * Traits::kBlockM * D;  // [M][D] fp32
                               CUTE_UNROLL
                               for (int m = 0; m < KeysAsRowsO<Traits>::kTiles; ++m) {
                                 CUTE_UNROLL
                                 for (int half = 0; half < 2; ++half) {
                                   const int col = KeysAsRowsO<Traits>::column(m, half, g);
                                   sO[(2 * c) * D + col] = o.value(m, 2 * half);
                                   sO[(2 * c + 1) * D + col] = o.value(m, 2 * half + 1);
                                 }
                               }
                               if (g == 0) {
                                 CUTE_UNROLL
                                 for (int r = 0; r < 2; ++r) {
                                   merge.max[warp * Traits::kBlockM + 2 * c + r] = softmax.row_max[r];
                                   merge.sum[warp * Traits::kBlockM + 2 * c + r] = softmax.row_sum[r];
                                 }
                               }
                             });
}

}  // namespace splitkv::detail
