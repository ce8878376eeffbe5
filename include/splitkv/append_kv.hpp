// Appending new tokens to a KV cache in any KvFormat: 16-bit values copied, FP8 / INT8 / INT4 /
// K8V4 quantized on the GPU to exactly the bytes of the host quantizer (docs/KV_FORMATS.md,
// "Appending tokens").
#pragma once

#include "splitkv/status.hpp"
#include "splitkv/types.hpp"

struct CUstream_st;

namespace splitkv {

using Stream = CUstream_st*;  // as in splitkv.hpp: a cudaStream_t; nullptr is the legacy default stream

struct AppendKvProblem {
  int num_tokens = 0;    // rows to write in this call; 0 is valid and writes nothing
  int num_kv_heads = 0;
  int head_dim = 0;      // 64, 128 or 256 (the head dims decode and prefill read)
  DType dtype = DType::kBF16;              // of the new k / v rows: kF16 or kBF16
  KvFormat kv_format = KvFormat::kNative;  // of the cache; kNative (or kF16 / kBF16) stores `dtype`
  // 0: contiguous cache [batch, capacity, Hkv, D]; else paged [pages, page_size, Hkv, D], page_size a
  // multiple of 16 (as in DecodeProblem: the cache written here is the cache decode reads).
  int page_size = 0;
};

struct AppendKvTensors {
  // New rows [num_tokens, Hkv, D] in `dtype`; the last dim contiguous, other strides free (16-byte
  // aligned rows), so k and v may be slices of a fused QKV tensor.
  TensorRef k, v;
  // int64 (or int32) [num_tokens], device memory, stride free: where token i goes. Paged: page * page_size +
  // offset; contiguous: b * capacity + position. -1 skips the token; any other value outside
  // [0, blocks * slots per block) is skipped too (nothing is written for it; it cannot be reported
  // without reading device memory on the host). Slots must be distinct: two tokens appended to
  // one slot leave an unspecified mix of both rows.
  TensorRef slots;
  // The cache, exactly as DecodeTensors::k / v (layouts, element types of kv_format, strides).
  TensorRef k_cache, v_cache;
  // Exactly as DecodeTensors::k_scales / v_scales: empty for 16-bit caches; FP8: fp32 [Hkv] per KV
  // head, read, never written (a scale that is not positive and finite writes NaN codes 0x7f for
  // that head's rows); INT8 / INT4 / K8V4: fp16 (scale, min) [blocks, Hkv, slots, 2], written;
  // *_kc: k_scales fp16 [blocks, Hkv, groups, 2 * D] per 64-position group (as DecodeTensors).
  TensorRef k_scales, v_scales;
  // *_kc caches only (empty otherwise). Keys are quantized per channel once a group of 64 positions
  // completes; until then they wait in a 16-bit tail ring (docs/KV_FORMATS.md, "Keys quantized per
  // channel"), so each token also says where it is in its sequence:
  //   positions  int64 (or int32) [num_tokens], device memory: the token's position in its sequence;
  //              its slot's offset in its block must be position % slots per block (a page holds
  //              positions page_index * page_size + [0, page_size)), else the token is skipped;
  //   tail_slots int32 [num_tokens], device memory: the row of k_tail of the token's sequence (the
  //              DecodeTensors::tail_slots entry of that sequence); outside k_tail: skipped;
  //   k_tail     [tail slots, Hkv, 128, D] in `dtype`, the last dim contiguous: written and read.
  // A sequence's tokens must be contiguous in the call and in position order, no other token
  // (skipped ones included) between them, as engines batch them; otherwise that sequence's tail and
  // key groups are unspecified (other sequences are not affected). A token that completes a group
  // (position % 64 == 63) quantizes the group from this call's rows and the ring; a skipped token
  // writes nothing, K or V.
  TensorRef positions, tail_slots, k_tail;
};

// Writes the rows of every token whose slot is valid into the cache, K and V, with the row's
// (scale, min) pair for INT formats. Every argument is validated first (errors name it); with
// num_tokens == 0 k, v and slots are not read and may be left empty. Never allocates, never
// synchronizes, never reads device memory on the host: safe to capture in a CUDA graph and replay
// with new slots (and new k / v contents). kNoDevice when there is no usable GPU.
Status run_append_kv(const AppendKvProblem& problem, const AppendKvTensors& tensors, Stream stream);

}  // namespace splitkv
