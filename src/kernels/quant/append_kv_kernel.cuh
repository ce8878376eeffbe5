// The append kernel: writes new K/V rows into a cache of any KvFormat, quantizing on the way with
// exactly the arithmetic of the host quantizer (src/quant/kv_quant_host.cpp, docs/KV_FORMATS.md),
// so the bytes (codes and fp16 (scale, min) pairs) are identical for every input.
//
// One warp per (token, K or V, KV head) row; lane l holds the D/32 consecutive elements starting at
// l * D/32, so every lane's loads and stores are one aligned vector. Rows are small (D <= 256), the
// kernel is bound by launch and memory latency, not by the few fp32/fp64 operations per row.
// The arithmetic is append_quantize.cuh's.
#pragma once

#include <cstdint>

#include "kernels/common/pdl.cuh"
#include "kernels/quant/append_kc_token.cuh"
#include "kernels/quant/append_kv_params.hpp"
#include "kernels/quant/append_quantize.cuh"

namespace splitkv::detail {

template <class In, int kHeadDim>
__global__ void __launch_bounds__(kAppendWarpsPerBlock * 32) append_kv_kernel(const __grid_constant__ AppendKvParams p) {
  constexpr int kPerLane = kHeadDim / 32;  // 2, 4 or 8
  static_assert(kHeadDim % 64 == 0 && kPerLane <= 8, "a lane's elements must fill one aligned vector");
  allow_dependent_launch();  // our dependents may start launching; they wait for us anyway
  wait_for_prior_grids();    // k, v and slots may come from the kernel before us, which may also read the cache

  // Row (token * 2 + side) * Hkv + head: consecutive warps write consecutive heads of one token.
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kAppendWarpsPerBlock + threadIdx.x / 32;
  const int head = int(row % p.num_kv_heads);
  const bool v_side = (row / p.num_kv_heads) % 2 != 0;
  const int64_t token = row / p.num_kv_heads / 2;
  // Every return below is warp-uniform, so the warp's shuffles see all 32 lanes.
  if (token >= p.num_tokens) return;
  const int64_t slot = append_slot_of(p, token);
  if (slot < 0 || slot >= p.num_slots) return;  // -1 skips the token; out of range: nothing written
  const int64_t block = slot / p.slots_per_block, pos = slot % p.slots_per_block;
  const AppendSideParams& s = v_side ? p.v : p.k;

  alignas(16) uint16_t bits[kPerLane];
  const uint16_t* const src = static_cast<const uint16_t*>(s.src) + token * s.src_token_stride + head * s.src_head_stride;
  if (p.kc.enabled) {
    // *_kc (phase 2 of append_kc_token.cuh's rule): an invalid token writes nothing; its key row goes
    // to tail row position % 128 unless a later token of the call takes that row (the group kernel,
    // which ran before this one, has read what it needed of the ring).
    const KcToken t = kc_token(p, token);
    if (!t.valid) return;
    if (!v_side) {
      if (kc_token_holds(p, token + kKeyTailRows, t.tail_slot, t.position + kKeyTailRows)) return;
      append::copy_vec<2 * kPerLane>(bits, src + lane * kPerLane);
      char* const tail_row = p.kc.tail + t.tail_slot * p.kc.tail_slot_stride + head * p.kc.tail_head_stride +
                             (t.position % kKeyTailRows) * p.kc.tail_row_stride;
      append::copy_vec<2 * kPerLane>(tail_row + lane * 2 * kPerLane, bits);
      return;
    }
  }
  append::copy_vec<2 * kPerLane>(bits, src + lane * kPerLane);
  char* const dst = s.cache + block * s.cache_block_stride + pos * s.cache_slot_stride + head * s.cache_head_stride;
  if (s.format == CodeKind::kNative16) {
    append::copy_vec<2 * kPerLane>(dst + lane * 2 * kPerLane, bits);
    return;
  }
  float x[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) x[i] = append::to_float<In>(bits[i]);
  if (s.format == CodeKind::kFp8) {
    append::quantize_fp8_row(x, lane, s.fp8_scales[head * s.fp8_scale_stride], dst);
    return;
  }
  uint16_t* const pair = s.pairs + block * s.pair_block_stride + head * s.pair_head_stride + pos * s.pair_slot_stride;
  if (s.format == CodeKind::kInt8) {
    append::quantize_int_row<8>(x, lane, dst, pair);
  } else {
    append::quantize_int_row<4>(x, lane, dst, pair);
  }
}

}  // namespace splitkv::detail
