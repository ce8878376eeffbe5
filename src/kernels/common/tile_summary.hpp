// What the planner needs to know about a family's tile (plain constexpr data, host and device):
// each family's tile header (kernels/<family>/*_tile.hpp) describes its shapes and summarizes them.
#pragma once

#include "common/formats.hpp"
#include "common/host_device.hpp"
#include "splitkv/types.hpp"

namespace splitkv::tiles {

// What the planner needs to know about a family's tile at one head dim and KV format.
struct TileSummary {
  int block_m;     // query rows per thread block
  int block_n;     // keys per main-loop step of a block (the granularity of KV splits)
  int warps;
  int stages;      // pipeline depth (0: no pipeline)
  int smem_bytes;  // dynamic shared memory per block
  // One block per SM walks the grid's tiles (prefill_sm90 with two Q buffers: the next tile's Q and
  // first K/V tiles load while the current tile finishes); the grid is then a tile list.
  bool persistent = false;
  // Decode: resident blocks per SM by registers (sm_90a) where fewer than smem_bytes allows, of
  // the plain instance and of the variants instance without and with the softcap (0: as many),
  // with bf16 Q/O and with fp16 (the keys-per-channel kernel holds fp16 Q's operand in two halves);
  // and the blocks the uncapped variants instance's register-bound twin holds (0: no twin; it
  // spills a little). The planner counts them (Plan::blocks_per_sm) and takes the twin where the
  // grid then runs in fewer rounds of resident blocks (Plan::register_bound_blocks).
  // scripts/check_residency.py holds every plan's count against the compiled kernels' registers.
  struct RegisterBlocks {
    int plain = 0, variants = 0, capped = 0;
  };
  RegisterBlocks register_blocks{};
  RegisterBlocks fp16_register_blocks{};
  int bound_variants_blocks = 0;
  // Decode: the uncapped variants instance's twin for blocks of few keys (a short sliding window),
  // with fewer warps and so less shared memory per block (0 warps: none): its warps, shared memory
  // per block, the resident blocks its registers hold and its pipeline depth (Plan::short_twin_warps);
  // and, where it has one, its version for one-split plans (no cluster merge, so no inbox in shared
  // memory), register-bound for bound_blocks per SM (Plan::register_bound_blocks; 0: none).
  struct ShortTwin {
    int warps = 0, smem_bytes = 0, register_blocks = 0, stages = 0;
    int bound_blocks = 0, bound_smem_bytes = 0;
  };
  ShortTwin short_twin{};
  // Decode: one-warp blocks per SM of the tile's stream kernel (a persistent grid of one-warp blocks,
  // a warp per item: PlanTuning::decode_stream; 0: none).
  int stream_blocks = 0;
  constexpr int threads() const { return warps * 32; }
};

// Every family so far computes on 16-bit Q, K, V and O.
constexpr int k16BitBytes = 2;

}  // namespace splitkv::tiles
