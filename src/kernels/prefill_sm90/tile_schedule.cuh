// Which tiles a prefill_sm90 block computes. The plan's grid (tiles_m, Hq, batch x splits) is a list
// of tiles, x fastest (the order in which the hardware hands out the blocks of such a grid, so
// blocks running at the same time share a head's K/V in L2; causal grids put the longest query
// block of each head first). A block starts with the tile of its own index; with fewer blocks than
// tiles (a persistent grid, one block per SM) it then claims the next one from the plan's tile
// counter (dynamic: blocks that finish first take the next tiles, which balances causal and ragged
// work as the hardware's block scheduler does) or steps by the grid size (static: uniform tiles).
// With a stream-K tail (PrefillParams::stream_steps), the stride ends at stream_first_tile, and a
// block then takes one contiguous range of the remaining tiles' key steps (part of a tile, whole
// tiles, part of another): a tile's part is the tile over a sub-range of its keys (locate).
// A grid of tiles that pack a KV head's query heads (kPacked, prefill_sm90_gqa) is (tiles_m, Hkv,
// batch x splits): tile (x, kv_head, z) holds queries [x m, x m + m) of query heads
// [kv_head * group, kv_head * group + group), m = p.pack_queries.
#pragma once

#include "kernels/prefill/prefill_common.cuh"

namespace splitkv::detail {

// kStreamK: the kernel instantiation that runs stream-K tails (the plain one keeps none of its code).
// kVariants: its variants instance (a sliding window cuts each tile's keys, key_range).
template <bool kPacked, bool kStreamK = false, bool kVariants = false>
struct TileSchedule {
  int grid_blocks;  // blocks in the launch
  int total_tiles;  // tiles_m * heads of the grid * batch * splits (the planner keeps it below 2^31)
  // Stream-K tail: this block's key steps [stream_lo, stream_hi), counted over the tiles from 0.
  int64_t stream_lo = 0, stream_hi = 0;

  __device__ __forceinline__ static int grid_heads(const PrefillParams& p) {
    return kPacked ? p.num_kv_heads : p.num_q_heads;
  }

  // Reads p.active_blocks: construct it after the PDL wait.
  __device__ __forceinline__ explicit TileSchedule(const PrefillParams& p)
      : grid_blocks(walking_blocks(p)),
        total_tiles(p.tiles_m * grid_heads(p) * p.batch * p.num_splits) {
    if constexpr (kStreamK) {
      const int64_t first = int64_t(p.stream_first_tile) * p.stream_steps;
      const int64_t steps = int64_t(total_tiles - p.stream_first_tile) * p.stream_steps;
      stream_lo = first + steps * block_index() / grid_blocks;
      stream_hi = first + steps * (block_index() + 1) / grid_blocks;
    }
  }

  // The launched blocks that walk the tiles (PrefillParams::active_blocks), at least one.
  __device__ __forceinline__ static int walking_blocks(const PrefillParams& p) {
    const int launched = int(gridDim.x * gridDim.y * gridDim.z);
    return p.active_blocks == nullptr ? launched : max(1, min(launched, *p.active_blocks));
  }

  // Whether this block walks no tile (PrefillParams::active_blocks): it exits at once.
  __device__ __forceinline__ bool idle() const { return block_index() >= grid_blocks; }

  __device__ __forceinline__ static int block_index() {
    return int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  }

  __device__ __forceinline__ int first_tile(const PrefillParams& p) const {
    if constexpr (kStreamK) {
      if (p.stream_first_tile == 0) return int(stream_lo / p.stream_steps);
    }
    return block_index();
  }

  // The tile after `tile` for this block, called by every lane of one warp (lane 0 claims it).
  __device__ __forceinline__ int next_tile(const PrefillParams& p, int tile) const {
    if constexpr (kStreamK) {
      if (tile + grid_blocks < p.stream_first_tile) return tile + grid_blocks;
      return tile < p.stream_first_tile ? int(stream_lo / p.stream_steps) : tile + 1;
    }
    if (p.tile_counter == nullptr) return tile + grid_blocks;
    return claim_tile(p);
  }

  // A dynamic schedule's next tile: lane 0 claims it from the counter (kRaise: after raising the
  // counter to at least `floor` claims), and the warp shares it.
  template <bool kRaise = false>
  __device__ __forceinline__ int claim_tile(const PrefillParams& p, int floor = 0) const {
    int claim = 0;
    if (threadIdx.x % 32 == 0) {
      if constexpr (kRaise) atomicMax(p.tile_counter, floor);
      claim = atomicAdd(p.tile_counter, 1);
    }
    return grid_blocks + __shfl_sync(0xffffffffu, claim, 0);
  }

  // The tile after `tile` for this block where `tile`'s whole sequence has no query rows (an empty
  // varlen member, or one the mixed route serves elsewhere: PrefillParams::skip_sequences). A
  // sequence's tiles (tiles_m x heads x splits) follow each other in the list, so the block moves
  // to the first tile of the next sequence that has rows, which the warp finds 32 sequences a step,
  // instead of claiming and resolving each tile of the empty ones (a mixed step's decode rows are
  // most of its sequences). Dynamic: the counter is raised to that tile (atomicMax: every claim it
  // passes over is an empty sequence's tile); static: whole strides past them. Every lane of one
  // warp calls it.
  __device__ __forceinline__ int next_tile_past_sequence(const PrefillParams& p, int tile) const {
    if constexpr (kStreamK) {
      return next_tile(p, tile);
    } else {
      const int sequence_tiles = p.tiles_m * grid_heads(p) * p.num_splits;
      int next = p.batch;  // the next sequence with rows (batch: none; its first tile is total_tiles)
      for (int first = tile / sequence_tiles + 1; first < p.batch; first += 32) {
        const int b = first + int(threadIdx.x % 32);
        const unsigned rows = __ballot_sync(0xffffffffu, b < p.batch && sequence_has_rows(p, b));
        if (rows != 0) {
          next = first + __ffs(int(rows)) - 1;
          break;
        }
      }
      const int end = next * sequence_tiles;
      if (end <= tile) return next_tile(p, tile);  // unreachable: keeps the walk moving forward
      if (p.tile_counter == nullptr) return tile + (end - tile + grid_blocks - 1) / grid_blocks * grid_blocks;
      return claim_tile<true>(p, end - grid_blocks);
    }
  }

  // Whether `tile` is certainly this block's last: a static schedule with no tile a stride further
  // (both roles know it without a message; a dynamic one learns it from the counter).
  __device__ __forceinline__ bool is_last(const PrefillParams& p, int tile) const {
    if constexpr (kStreamK) return tile >= p.stream_first_tile && int64_t(tile + 1) * p.stream_steps >= stream_hi;
    return p.tile_counter == nullptr && tile >= total_tiles - grid_blocks;
  }

  // The workspace slot where the two parts of `tile` meet (stream-K tail), or -1 when this block
  // computes the whole tile. A block's range holds at least one tile's steps (the planner's
  // condition), so a tile is cut at most once: at the end of this block's range (slot: this block)
  // or at its start (slot: the block before).
  __device__ __forceinline__ int cut_slot(const PrefillParams& p, int tile) const {
    if (!kStreamK || tile < p.stream_first_tile) return -1;
    const int64_t begin = int64_t(tile) * p.stream_steps;
    if (stream_lo > begin) return block_index() - 1;
    if (stream_hi < begin + p.stream_steps) return block_index();
    return -1;
  }

  // blk <- tile; false when the tile's sequence has no query rows there (a short varlen member).
  // A packed tile's blk.hq is the first of its query heads and blk.row0 its first query.
  // No page check: the kernel's producer checks the page ids it reads and tells the consumers (a
  // block-wide check would need both roles at one barrier).
  // A stream-K tail tile is this block's part of it: its keys restricted to the block's steps.
  template <class Element>
  __device__ __forceinline__ bool locate(PrefillBlock<Element>& blk, const PrefillParams& p, int tile, int block_m,
                                         int block_n) const {
    const int x = tile % p.tiles_m;
    const int heads_and_z = tile / p.tiles_m;
    const int head = heads_and_z % grid_heads(p);
    if constexpr (kPacked) {
      // Packed tiles serve tree masks (mask_scores): kTree.
      return blk.template init_tile<kVariants, kVariants>(p, p.pack_queries, block_n, x, p.tiles_m, head * p.group,
                                                          heads_and_z / grid_heads(p));
    }
    if (!blk.template init_tile<kVariants>(p, block_m, block_n, x, p.tiles_m, head, heads_and_z / grid_heads(p))) return false;
    if (kStreamK && tile >= p.stream_first_tile) {
      // Uniform tiles (the planner's condition): keys [0, k_len) in stream_steps steps, no split.
      const int64_t begin = int64_t(tile) * p.stream_steps;
      const int lo = int(max(stream_lo - begin, int64_t(0)));
      const int hi = int(min(stream_hi - begin, int64_t(p.stream_steps)));
      blk.keys.lo += lo * block_n;
      blk.keys.hi = min(blk.keys.hi, hi * block_n);
      blk.keys.mask_from = min(blk.keys.mask_from, blk.keys.hi);
      blk.n_blocks = hi - lo;
    }
    return true;
  }

  // The (query head, query) of each row of blk's tile.
  template <class Element>
  __device__ __forceinline__ static TileRows<kPacked> rows(const PrefillBlock<Element>& blk, const PrefillParams& p) {
    if constexpr (kPacked) return TileRows<kPacked>{blk.hq, blk.row0, p.pack_queries, p.group};
    return TileRows<kPacked>{blk.hq, blk.row0};
  }
};

}  // namespace splitkv::detail
