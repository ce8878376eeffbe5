// The one table of tile shapes, read by the planner (host) and the kernels (device) alike, so the
// heuristics and the kernels can never disagree about block sizes or shared-memory use.
#pragma once

#include "kernels/common/host_device.hpp"

namespace splitkv::tiles {

constexpr int kElementBytes = 2;  // fp16 / bf16

// ---- decode ---------------------------------------------------------------------------------
// One thread block serves one (sequence, KV head, 16-row query tile, KV split). Its rows are the
// q_len x (Hq/Hkv) query rows sharing the KV head (GQA packing). Each warp streams its own
// 16-key sub-tiles through a private cp.async pipeline; warps take sub-tiles round-robin and
// merge their softmax states once at the end.
struct DecodeTile {
  int head_dim;
  int block_m;    // query rows per block (one MMA M)
  int warp_keys;  // keys per warp sub-tile
  int warps;
  int stages;     // sub-tiles in flight per warp

  constexpr int threads() const { return warps * 32; }
  constexpr int block_keys() const { return warp_keys * warps; }
  constexpr int q_smem_bytes() const { return block_m * head_dim * kElementBytes; }
  constexpr int pipeline_smem_bytes() const {
    return warps * stages * 2 * warp_keys * head_dim * kElementBytes;  // K and V
  }
  // Epilogue: each warp's fp32 accumulator plus its row max and row sum, then the block's
  // partial (O, LSE) that the blocks of a cluster read from each other.
  constexpr int merge_smem_bytes() const {
    return warps * block_m * head_dim * 4 + 2 * warps * block_m * 4 + block_m * head_dim * 4 + block_m * 4;
  }
  constexpr int smem_bytes() const {
    return q_smem_bytes() + (pipeline_smem_bytes() > merge_smem_bytes() ? pipeline_smem_bytes()
                                                                        : merge_smem_bytes());
  }
};

constexpr DecodeTile decode_tile(int head_dim) {
  // Stages: enough bytes in flight per SM to cover HBM latency, few enough that two blocks fit.
  return DecodeTile{head_dim, 16, 16, 4, head_dim <= 64 ? 4 : 3};
}

// ---- prefill ------------------------------------------------------------------------------
// One thread block serves one (query block, query head, sequence[, KV split]); warps own query
// rows (except split-V, where warps own head-dim columns of O). Per main-loop step the block
// consumes block_n keys; K arrives in sub-tiles of k_sub_keys keys and V in column slices of
// v_sub_cols, each its own cp.async group consumed as soon as it lands, so the K and V tile shapes
// are independent. The founding notes' K tile 16x64 / V tile 64x64 is one such point.
enum class PrefillKernel { kDefault, kSplitV, kTwoPass, kFoundingTiles };

struct PrefillTile {
  int head_dim;
  int block_m;     // query rows per block
  int block_n;     // keys per main-loop step
  int warps;
  int k_sub_keys;  // keys per K sub-tile (divides block_n)
  int v_sub_cols;  // head-dim columns per V slice (divides head_dim)

  constexpr int threads() const { return warps * 32; }
  // K and V alternate: K of step j+1 loads while V of step j is used, and vice versa.
  constexpr int stages() const { return 2; }
  // Q, one K tile and one V tile (K of step j+1 loads while V of step j is used, and vice versa).
  constexpr int smem_bytes() const { return (block_m + 2 * block_n) * head_dim * kElementBytes; }
};

constexpr PrefillTile prefill_tile(int head_dim, PrefillKernel kernel) {
  const int block_m = head_dim <= 64 ? 128 : 128;
  const int block_n = head_dim <= 64 ? 128 : 64;
  switch (kernel) {
    case PrefillKernel::kSplitV:  // every warp holds whole score rows: keep the block short
      return PrefillTile{head_dim, 32, 64, 4, 64, head_dim};
    case PrefillKernel::kFoundingTiles:
      return PrefillTile{head_dim, block_m, 64, 4, 16, 64};
    case PrefillKernel::kDefault:
    case PrefillKernel::kTwoPass:
      break;
  }
  return PrefillTile{head_dim, block_m, block_n, 4, block_n, head_dim};
}

}  // namespace splitkv::tiles
