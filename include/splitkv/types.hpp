// Element types, KV cache formats and a strided tensor reference: the vocabulary of the public API.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

namespace splitkv {

// Element types of tensors. Q and O are kF16 or kBF16; kI32 is the type of lengths, block
// tables and cu_seqlens, kI64 that of append_kv's slots (kI32 accepted there too), kF32 that of LSE
// and split partials. kI8, kI4 and kFP8E4M3 are the
// element types of quantized KV caches (see KvFormat).
enum class DType : int32_t { kF16, kBF16, kF32, kI32, kI8, kI4, kFP8E4M3, kI64 };

const char* to_string(DType dtype);
// Bits per element (4 for kI4).
int bit_width(DType dtype);

// How the KV cache stores keys and values, independent of the Q/O dtype (docs/KV_FORMATS.md).
// kNative stores them in the problem's dtype (fp16 or bf16) and is the default; kF16/kBF16 say the
// same explicitly and must then match the dtype. kFP8E4M3, kInt8, kInt4 and kK8V4 quantize per head
// (FP8) or per token. kInt8Kc, kInt4Kc and kK8V4Kc store values as kInt8, kInt4 and kK8V4 do, but
// quantize keys per channel over groups of 64 positions, the newest incomplete group kept 16-bit in
// a per-sequence tail (robust to the outlier channels of real models' keys); the GPU kernels do not
// read them yet (the CPU backend and the reference do).
enum class KvFormat : int32_t { kNative, kF16, kBF16, kFP8E4M3, kInt8, kInt4, kK8V4, kInt8Kc, kInt4Kc, kK8V4Kc };

const char* to_string(KvFormat format);

// A view of memory owned by the caller: up to 4 dimensions, strides in elements (not bytes).
// Layouts follow flash_attn_with_kvcache: [batch, seq, heads, dim] with the last dim contiguous;
// every other stride is free.
struct TensorRef {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::kBF16;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> stride{};

  // Not bound at all (no data, no shape): how optional tensors are left out.
  bool empty() const { return data == nullptr && rank == 0; }
  int64_t numel() const;

  // Row-major (last dim contiguous) view.
  static TensorRef contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape);
  // Explicit strides (elements); shape and stride must have the same length.
  static TensorRef strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                           std::initializer_list<int64_t> stride);
};

}  // namespace splitkv
