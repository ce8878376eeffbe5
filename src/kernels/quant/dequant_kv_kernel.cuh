// Dequantizes the first seq_lens[b] tokens of every sequence of a quantized KV cache (paged or
// contiguous; FP8, INT8, INT4, K8V4) into a 16-bit staging copy [batch, tokens, Hkv, D], with the
// arithmetic of the host reader (src/quant/kv_quant_host.cpp): FP8 scale * e4m3 and INT
// fma(scale16, code, min16), each one fp32 rounding, then rounded to the staging type (nearest
// even). The fp64 reference attends over the fp32 values; its low-precision yardstick rounds them
// to the input type as this copy does.
//
// Work: the items are (sequence, 16-token chunk) pairs of the sequences' real lengths, numbered in
// sequence order; every block numbers them alike from the lengths (a block-wide prefix sum over
// windows of kDequantThreads sequences, in shared memory) and takes every gridDim.x-th item, so the
// blocks share the work evenly however the lengths spread, and a step of short or empty sequences
// under a long bound costs no idle blocks. Sequence b's checks (its length, page ids and *_kc tail
// slot: the length the prefill reads) are block b % gridDim.x's. Each thread writes 8 values (16
// bytes) of one (token, side, KV head) row per step, consecutive threads along the row, so loads
// and stores are aligned vectors. The kernel reads each cache byte once: for long chunks the
// prefill that follows re-reads every K/V tile once per query block and head, which is why the
// dequantization is not done per tile there.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/block_scan.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/dequant_kv_params.hpp"

namespace splitkv::detail {
namespace dequant {

constexpr int kValuesPerThread = 8;  // 16 bytes of 16-bit output

__device__ __forceinline__ float e4m3_value(uint32_t code) {  // exact
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code & 0xffu), __NV_E4M3);
  return __half2float(__half(h));
}

__device__ __forceinline__ float fp16_value(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

__device__ __forceinline__ const char* code_row(const KvSide& s, int64_t block, int64_t slot, int h) {
  return static_cast<const char*>(s.data) + block * s.block_stride + slot * s.token_stride + h * s.head_stride;
}

// Values [8c, 8c + 8) of the row of KV head h at (block, slot) of one side (its codes s, scales sc),
// as fp32.
__device__ __forceinline__ void read_values(const KvSide& s, const KvScaleView& sc, CodeKind kind, int64_t block,
                                            int64_t slot, int h, int c, float (&x)[kValuesPerThread]) {
  const char* row = code_row(s, block, slot, h);
  if (kind == CodeKind::kFp8) {
    const uint2 codes = *reinterpret_cast<const uint2*>(row + c * 8);
    const float scale = static_cast<const float*>(sc.data)[h * sc.head_stride];
#pragma unroll
    for (int i = 0; i < kValuesPerThread; ++i) {
      const uint32_t word = i < 4 ? codes.x : codes.y;
      x[i] = __fmul_rn(scale, e4m3_value(word >> (8 * (i % 4))));
    }
    return;
  }
  const uint32_t pair = *reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(sc.data) + block * sc.block_stride +
                                                            h * sc.head_stride + slot * sc.token_stride);
  const float scale = fp16_value(uint16_t(pair & 0xffffu)), min = fp16_value(uint16_t(pair >> 16));
  if (kind == CodeKind::kInt8) {
    const uint2 codes = *reinterpret_cast<const uint2*>(row + c * 8);
#pragma unroll
    for (int i = 0; i < kValuesPerThread; ++i) {
      const uint32_t word = i < 4 ? codes.x : codes.y;
      x[i] = __fmaf_rn(scale, float((word >> (8 * (i % 4))) & 0xffu), min);
    }
  } else {  // INT4: element 2i in the low nibble of byte i
    const uint32_t codes = *reinterpret_cast<const uint32_t*>(row + c * 4);
#pragma unroll
    for (int i = 0; i < kValuesPerThread; ++i) x[i] = __fmaf_rn(scale, float((codes >> (4 * i)) & 0xfu), min);
  }
}

// *_kc keys, values [8c, 8c + 8) of KV head h at (block, slot) of a complete group: the codes with
// each channel's (scale, min) of the slot's group, fma(scale[c], code, min[c]) in fp32.
__device__ __forceinline__ void read_channel_key_values(const KvSide& s, const KvScaleView& sc, CodeKind kind,
                                                        int head_dim, int64_t block, int64_t slot, int h, int c,
                                                        float (&x)[kValuesPerThread]) {
  const char* row = code_row(s, block, slot, h);
  const uint16_t* pairs = static_cast<const uint16_t*>(sc.data) + block * sc.block_stride + h * sc.head_stride +
                          (slot / kKeyGroup) * sc.token_stride + c * kValuesPerThread;
  uint32_t code[kValuesPerThread];
  if (kind == CodeKind::kInt8) {
    const uint2 codes = *reinterpret_cast<const uint2*>(row + c * 8);
#pragma unroll
    for (int i = 0; i < kValuesPerThread; ++i) code[i] = ((i < 4 ? codes.x : codes.y) >> (8 * (i % 4))) & 0xffu;
  } else {  // INT4: element 2i in the low nibble of byte i
    const uint32_t codes = *reinterpret_cast<const uint32_t*>(row + c * 4);
#pragma unroll
    for (int i = 0; i < kValuesPerThread; ++i) code[i] = (codes >> (4 * i)) & 0xfu;
  }
#pragma unroll
  for (int i = 0; i < kValuesPerThread; ++i) {
    x[i] = __fmaf_rn(fp16_value(pairs[i]), float(code[i]), fp16_value(pairs[head_dim + i]));
  }
}

// *_kc keys of the incomplete groups: values [8c, 8c + 8) of the tail row of `position`.
template <class Out>
__device__ __forceinline__ void read_tail_values(const KeyTailView& tail, int64_t tail_slot, int h, int64_t position,
                                                 int c, float (&x)[kValuesPerThread]) {
  const uint16_t* row = static_cast<const uint16_t*>(tail.rows) + tail_slot * tail.slot_stride + h * tail.head_stride +
                        (position % kKeyTailRows) * tail.row_stride + c * kValuesPerThread;
  const uint4 bits = *reinterpret_cast<const uint4*>(row);
  const uint32_t w[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
  for (int i = 0; i < kValuesPerThread; ++i) {
    const uint16_t b = uint16_t(w[i / 2] >> (16 * (i % 2)));
    if constexpr (std::is_same_v<Out, __half>) {
      x[i] = __half2float(__ushort_as_half(b));
    } else {
      x[i] = __bfloat162float(__ushort_as_bfloat16(b));
    }
  }
}

template <class Out>
__device__ __forceinline__ uint16_t to_bits(float f) {  // nearest even
  if constexpr (std::is_same_v<Out, __half>) {
    return __half_as_ushort(__float2half_rn(f));
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
}

template <class Out>
__device__ __forceinline__ void store_values(void* dst, const float (&x)[kValuesPerThread]) {
  uint32_t w[kValuesPerThread / 2];
#pragma unroll
  for (int i = 0; i < kValuesPerThread / 2; ++i) {
    w[i] = uint32_t(to_bits<Out>(x[2 * i])) | (uint32_t(to_bits<Out>(x[2 * i + 1])) << 16);
  }
  *static_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace dequant

namespace dequant {

// A page id the copy may read: one inside the pool (else the sequence's rows are NaN).
__device__ __forceinline__ bool in_pool(const KvCacheView& kv, int32_t page) { return page >= 0 && page < kv.num_pages; }

// A length the copy takes: in [0, max_kv_len] (else the sequence's rows are NaN).
__device__ __forceinline__ bool length_ok(const DequantKvParams& p, int len) { return len >= 0 && len <= p.max_kv_len; }

// The tokens the kernel dequantizes: seq_lens[b] when it is a length the copy takes, else none.
__device__ __forceinline__ int valid_length(const DequantKvParams& p, int b) {
  const int len = p.kv.seq_lens[b];
  return length_ok(p, len) ? len : 0;
}

// Sequence b's length as the prefill reads it: -1 (NaN rows) for a bad length, page id or tail slot.
// The whole block checks one sequence's page ids.
__device__ __forceinline__ void check_sequence(const DequantKvParams& p, int b) {
  const KvCacheView& kv = p.kv;
  const int len = kv.seq_lens[b];
  const bool len_ok = length_ok(p, len);
  const int n = len_ok ? len : 0;
  bool bad_page = false;
  if (kv.block_table != nullptr) {
    const int32_t* pages = kv.block_table + b * kv.block_table_stride;
    const int n_pages = kv.page_size.div(n + kv.page_size.divisor - 1);
    for (int i = threadIdx.x; i < n_pages; i += blockDim.x) bad_page |= !in_pool(kv, pages[i]);
  }
  bad_page = __syncthreads_or(bad_page);
  if (threadIdx.x == 0) {
    const bool tail_ok = !p.channel_keys || tail_slot_in_ring(kv.k_tail, tail_slot_of(kv.k_tail, b));
    p.lens_out[b] = len_ok && !bad_page && tail_ok ? len : -1;
  }
}

// Tokens [token0, token0 + 16) of sequence b (n of its tokens valid), both sides, every KV head.
template <class Out>
__device__ __forceinline__ void dequantize_chunk(const DequantKvParams& p, int b, int n, int token0) {
  const KvCacheView& kv = p.kv;
  const bool paged = kv.block_table != nullptr;
  const int32_t* pages = paged ? kv.block_table + b * kv.block_table_stride : nullptr;
  // *_kc: the sequence's tail row, and the first position the tail holds (tail_slot_of and
  // tail_slot_in_ring, spelled out: through the helpers this kernel compiled to 8 more instructions).
  const KeyTailView& tail = kv.k_tail;
  const bool kc = p.channel_keys;
  const int64_t tail_slot = !kc ? 0 : tail.seq_slots ? tail.seq_slots[b * tail.seq_slots_stride] : b;
  const bool tail_ok = !kc || (tail_slot >= 0 && tail_slot < tail.num_slots);
  const int complete = n / kKeyGroup * kKeyGroup;

  const int chunks = p.head_dim / kValuesPerThread;
  const int row_units = p.num_kv_heads * chunks;  // one (token, side) row of all heads
  const int tokens = min(n - token0, kDequantTokensPerBlock);
  const int units = tokens * 2 * row_units;
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    const int c = u % chunks, h = u / chunks % p.num_kv_heads;
    const int side = u / row_units % 2, t = token0 + u / (2 * row_units);
    int64_t block = b, slot = t;
    bool readable = true;
    if (paged) {
      const int i = kv.page_size.div(t);
      const int32_t page = pages[i];
      readable = in_pool(kv, page);  // never read outside the pool (the sequence's rows become NaN)
      block = page, slot = t - i * kv.page_size.divisor;
    }
    float x[kValuesPerThread];  // NaN where its page or tail row is invalid
    if (side == 0 && kc && readable) {  // never read a tail row outside the ring
      if (t < complete) {
        read_channel_key_values(kv.k, kv.k_scales, p.k_codes, p.head_dim, block, slot, h, c, x);
      } else if (tail_ok) {
        read_tail_values<Out>(tail, tail_slot, h, t, c, x);
      } else {
#pragma unroll
        for (int i = 0; i < kValuesPerThread; ++i) x[i] = __int_as_float(0x7fc00000);
      }
    } else if (readable) {
      if (side == 0) {
        read_values(kv.k, kv.k_scales, p.k_codes, block, slot, h, c, x);
      } else {
        read_values(kv.v, kv.v_scales, p.v_codes, block, slot, h, c, x);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kValuesPerThread; ++i) x[i] = __int_as_float(0x7fc00000);
    }
    char* out = static_cast<char*>(side == 0 ? p.k_out : p.v_out);
    const int64_t element = ((int64_t(b) * p.staging_tokens + t) * p.num_kv_heads + h) * p.head_dim + c * kValuesPerThread;
    store_values<Out>(out + element * 2, x);
  }
}

}  // namespace dequant

template <class Out>
__global__ void __launch_bounds__(kDequantThreads) dequantize_kv_kernel(const __grid_constant__ DequantKvParams p) {
  using namespace dequant;
  // The lengths and pages may come from the kernel before us; the prefill after us waits for our
  // completion itself.
  wait_for_prior_grids();
  allow_dependent_launch();
  const int blocks = gridDim.x;
  for (int b = blockIdx.x; b < p.batch; b += blocks) check_sequence(p, b);

  __shared__ int64_t first_item[kDequantThreads + 1];  // the window's sequences' first items, and the end
  __shared__ int lengths[kDequantThreads];
  __shared__ int64_t warp_sums[kDequantThreads / 32];
  int64_t items_before = 0;  // items of the windows before this one
  for (int w0 = 0; w0 < p.batch; w0 += kDequantThreads) {
    const int b = w0 + threadIdx.x;
    const int n = b < p.batch ? valid_length(p, b) : 0;
    int64_t window_items;
    const int64_t first = block_exclusive_sum<kDequantThreads>((n + kDequantTokensPerBlock - 1) / kDequantTokensPerBlock, warp_sums,
                                              &window_items);
    first_item[threadIdx.x] = first;
    lengths[threadIdx.x] = n;
    if (threadIdx.x == 0) first_item[kDequantThreads] = window_items;
    __syncthreads();
    // This block's items: those numbered blockIdx.x modulo the grid.
    int64_t item = blockIdx.x - items_before % blocks;
    if (item < 0) item += blocks;
    for (; item < window_items; item += blocks) {
      int lo = 0, hi = kDequantThreads;  // the sequence s with first_item[s] <= item < first_item[s + 1]
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (first_item[mid] <= item) lo = mid; else hi = mid;
      }
      const int token0 = int(item - first_item[lo]) * kDequantTokensPerBlock;
      dequantize_chunk<Out>(p, w0 + lo, lengths[lo], token0);
    }
    items_before += window_items;
    __syncthreads();  // the window's tables free for the next
  }
}

}  // namespace splitkv::detail
