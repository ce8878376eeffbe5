// Phase 1 of appending keys to a *_kc cache (docs/KV_FORMATS.md, "Keys quantized per channel";
// src/quant/kv_quant_kc.cpp, append_keys, is the definition): every token whose position completes
// a group of 64 (position % 64 == 63) quantizes that group, channel by channel, into the group's
// 64 code rows and its fp16 (scale[D], min[D]). Row q of the group comes from the call's token
// i - (63 - q) when that token holds the position, else from the sequence's tail ring, which the
// row kernel (append_kv_kernel.cuh, phase 2) updates only after this grid has finished.
//
// One block per (token, KV head); blocks of tokens that complete no group return at once. The 64 x D
// group is staged in shared memory as 16-bit values; warp w quantizes channels w, w + 4, ..., each
// channel a column of 64 values (lane l holds rows 2l and 2l + 1) with the row kernel's arithmetic
// (append_quantize.cuh: the host's quantize_row_int, bit for bit), and writes the codes back over
// its column; the block then packs and stores the code rows as aligned words.
#pragma once

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/quant/append_kc_token.cuh"
#include "kernels/quant/append_kv_params.hpp"
#include "kernels/quant/append_quantize.cuh"

namespace splitkv::detail {

template <class In, int kHeadDim, int kBits>
__global__ void __launch_bounds__(kAppendKcThreads) append_kc_groups_kernel(const __grid_constant__ AppendKvParams p) {
  constexpr int G = kKeyGroup;
  constexpr int D = kHeadDim;
  constexpr int kRowPitch = D + 8;  // 16-bit elements: rows stay 16-byte aligned, columns spread over banks
  constexpr int kWarps = kAppendKcThreads / 32;
  static_assert(G == 2 * 32, "a lane holds two rows of a column");
  allow_dependent_launch();
  wait_for_prior_grids();  // k, slots, positions may come from the kernel before us; the ring from earlier calls

  __shared__ __align__(16) uint16_t sX[G * kRowPitch];  // (G, D): 16-bit values, then the codes of each column
  __shared__ bool from_call[G];                       // row q is the call's token i - (63 - q)

  const int64_t token = blockIdx.x / p.num_kv_heads;
  const int head = int(blockIdx.x % p.num_kv_heads);
  if (token >= p.num_tokens) return;
  const KcToken t = kc_token(p, token);  // block-uniform: every return below is
  if (!t.valid || t.position % G != G - 1) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t first = t.position - (G - 1);
  const AppendKcParams& kc = p.kc;
  const AppendSideParams& keys = p.k;  // the codes and their group scales (pair_slot_stride: a group)

  if (tid < G) from_call[tid] = kc_token_holds(p, token - (G - 1 - tid), t.tail_slot, first + tid);
  __syncthreads();

  // ---- the group's rows to shared memory, 16 bytes a step -------------------------------------------
  constexpr int kChunksPerRow = D / 8;
  for (int i = tid; i < G * kChunksPerRow; i += kAppendKcThreads) {
    const int q = i / kChunksPerRow, chunk = i % kChunksPerRow;
    const char* row;
    if (from_call[q]) {
      row = static_cast<const char*>(keys.src) +
            2 * ((token - (G - 1 - q)) * keys.src_token_stride + head * keys.src_head_stride);
    } else {
      row = kc.tail + t.tail_slot * kc.tail_slot_stride + head * kc.tail_head_stride +
            ((first + q) % kKeyTailRows) * kc.tail_row_stride;
    }
    append::copy_vec<16>(&sX[q * kRowPitch + chunk * 8], row + chunk * 16);
  }
  __syncthreads();

  // ---- quantize each channel's column; its codes replace its values --------------------------------
  const int64_t block = t.slot / p.slots_per_block;
  const int64_t first_slot = t.slot % p.slots_per_block - (G - 1);
  uint16_t* const pairs = keys.pairs + block * keys.pair_block_stride + head * keys.pair_head_stride +
                          (first_slot / G) * keys.pair_slot_stride;
  for (int c = warp; c < D; c += kWarps) {
    uint16_t* const x0 = &sX[(2 * lane) * kRowPitch + c];
    uint16_t* const x1 = &sX[(2 * lane + 1) * kRowPitch + c];
    const float x[2] = {append::to_float<In>(*x0), append::to_float<In>(*x1)};
    uint8_t q[2];
    uint16_t scale16, min16;
    append::quantize_int_values<kBits, 2>(x, q, scale16, min16);
    *x0 = q[0];
    *x1 = q[1];
    if (lane == 0) {
      pairs[c] = scale16;
      pairs[D + c] = min16;
    }
  }
  __syncthreads();

  // ---- the code rows, one 32-bit word (4 INT8 or 8 INT4 codes) a step -------------------------------
  constexpr int kCodesPerWord = 32 / kBits;
  constexpr int kWordsPerRow = D / kCodesPerWord;
  char* const codes = keys.cache + block * keys.cache_block_stride + head * keys.cache_head_stride;
  for (int i = tid; i < G * kWordsPerRow; i += kAppendKcThreads) {
    const int q = i / kWordsPerRow, w = i % kWordsPerRow;
    const uint16_t* x = &sX[q * kRowPitch + w * kCodesPerWord];
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < kCodesPerWord; ++j) word |= uint32_t(x[j]) << (kBits * j);  // element 2i: low nibble
    *reinterpret_cast<uint32_t*>(codes + (first_slot + q) * keys.cache_slot_stride + 4 * w) = word;
  }
}

}  // namespace splitkv::detail
