// Launcher of one prefill_sm90 instantiation; included only by the generated instantiation files.
// Encodes the TMA descriptors of Q, K and V on the host (no device memory is read; capture-safe)
// and passes them to the kernel by value. The plan's grid is the list of tiles; a persistent plan
// launches fewer blocks (config.persistent_blocks) that walk it.
#pragma once

#include <algorithm>

#include "kernels/prefill_sm90/prefill_sm90_kernel.cuh"
#include "kernels/launch/launch_kernel.cuh"
#include "kernels/prefill_sm90/tma_operands.hpp"

namespace splitkv::detail {

template <class Element, int kHeadDim, tiles::PrefillSm90Variant kVariant>
cudaError_t launch_prefill_sm90(const PrefillParams& p, const LaunchConfig& config) {
  using namespace cute;
  using Traits = PrefillSm90Traits<Element, kHeadDim, kVariant>;
  // Padded batches: (L, D, H, B). Varlen: (total tokens, D, H, 1), sequences found by offset. A
  // contiguous KV cache is padded K/V (B slots of capacity >= max_kv_len tokens) under varlen or
  // padded queries, so Q and K/V decide separately.
  const bool q_varlen = p.cu_seqlens_q != nullptr;
  // The views are tma_operands.hpp's, whose strides run_prefill has checked TMA can take. A
  // descriptor needs every extent >= 1: a cache planned for max_kv_len 0 holds no key to read, and
  // its view of one token is encoded but never loaded from.
  auto tensor = [](const void* data, const TmaView& v) {
    auto layout = make_layout(make_shape(int32_t(std::max<int64_t>(v.extent[0], 1)), int32_t(kHeadDim),
                                         int32_t(v.extent[2]), int32_t(v.extent[3])),
                              make_stride(v.stride[0], _1{}, v.stride[2], v.stride[3]));
    return make_tensor(make_gmem_ptr(static_cast<const Element*>(data)), layout);
  };
  auto mQ = tensor(p.q, tma_token_view(p, TmaOperand::kQ, kHeadDim));
  auto mK = tensor(p.kv.k.data, tma_token_view(p, TmaOperand::kK, kHeadDim));
  auto mV = tensor(p.kv.v.data, tma_token_view(p, TmaOperand::kV, kHeadDim));

  PrefillSm90Params<Traits> params{};
  params.p = p;
  params.p.tiles_m = static_cast<int>(config.grid[0]);  // the tile list (tile_schedule.cuh)
  // The planner made the grid of packed tiles with the same rule (Plan::packed_queries).
  params.p.pack_queries = Traits::kPackGqa ? tiles::packed_queries_per_head(Traits::kBlockM, p.group) : 0;
  if (Traits::kPackGqa && params.p.pack_queries == 0) return cudaErrorInvalidValue;
  // A stream-K tail (Plan::stream_k) counts every tile's key steps in this kernel's K tiles, and
  // only the one-pass kernel over unpacked tiles merges cut tiles.
  if (p.stream_steps > 0 && (Traits::kPackGqa || kVariant == tiles::PrefillSm90Variant::kTwoPass ||
                             p.stream_steps != (p.max_kv_len + Traits::kBlockN - 1) / Traits::kBlockN)) {
    return cudaErrorInvalidValue;
  }
  params.tma_q = make_tma_copy(SM90_TMA_LOAD{}, mQ, typename Traits::SmemLayoutQBox{},
                               Shape<Int<Traits::kQBoxRows>, Int<kHeadDim>>{}, _1{});
  // K in column slices of kKSliceCols (the whole head dim but for prefill_sm90_v64), V in tiles of
  // kBlockNV keys: one ring stage per box.
  using KSliceBox = Shape<Int<Traits::kBlockN>, Int<Traits::kKSliceCols>>;
  using VTileBox = Shape<Int<Traits::kBlockNV>, Int<kHeadDim>>;
  params.tma_k = make_tma_copy(SM90_TMA_LOAD{}, mK, take<0, 2>(typename Traits::SmemLayoutK{}), KSliceBox{}, _1{});
  params.tma_v = make_tma_copy(SM90_TMA_LOAD{}, mV, take<0, 2>(typename Traits::SmemLayoutV{}), VTileBox{}, _1{});
  params.shape_q = mQ.shape();
  params.shape_kv = mK.shape();
  // A paged cache as (page_size, D, Hkv, pages), read in 16-key boxes. Without one the descriptors
  // are encoded over one 16-token page of K and V and never used.
  const bool paged = p.kv.block_table != nullptr;
  auto pages = [&](const void* data, TmaOperand which) {
    TmaView v = tma_page_view(p, which, kHeadDim);
    if (!paged) v.extent[0] = Traits::kPageRows, v.extent[3] = 1;  // never read
    return tensor(data, normalized(v));
  };
  auto mKp = pages(p.kv.k.data, TmaOperand::kK);
  auto mVp = pages(p.kv.v.data, TmaOperand::kV);
  params.tma_k_pages = make_tma_copy(SM90_TMA_LOAD{}, mKp, typename Traits::SmemLayoutKBox{},
                                     Shape<Int<Traits::kPageRows>, Int<Traits::kKSliceCols>>{}, _1{});
  params.tma_v_pages = make_tma_copy(SM90_TMA_LOAD{}, mVp, typename Traits::SmemLayoutVBox{},
                                     Shape<Int<Traits::kPageRows>, Int<kHeadDim>>{}, _1{});
  params.shape_pages = mKp.shape();
  // Pages of a multiple of kBlockN keys: one box per K slice or V tile (no descriptor otherwise: never
  // used).
  params.page_tiles = paged && p.kv.page_size.divisor % Traits::kBlockN == 0;
  if (params.page_tiles) {
    params.tma_k_page_tiles =
        make_tma_copy(SM90_TMA_LOAD{}, mKp, take<0, 2>(typename Traits::SmemLayoutK{}), KSliceBox{}, _1{});
    params.tma_v_page_tiles =
        make_tma_copy(SM90_TMA_LOAD{}, mVp, take<0, 2>(typename Traits::SmemLayoutV{}), VTileBox{}, _1{});
  }
  // Final rows of padded queries leave by TMA store (smem_epilogue.cuh), unless a tile packs
  // several query heads. The checks at the API put
  // O's rows and strides on 16 bytes; a dimension of extent 1 may carry any stride, which TMA would
  // refuse, so it gets the span of the dimensions before it. A stride TMA cannot take (0 on a longer
  // dimension, 2^40 bytes or more) keeps the copy-out.
  const OutputParams& o = p.output;
  const int64_t token_stride = p.max_q_len > 1 ? o.o_token_stride : kHeadDim;
  const int64_t head_stride = p.num_q_heads > 1 ? o.o_head_stride : p.max_q_len * token_stride;
  const int64_t batch_stride = p.batch > 1 ? o.o_batch_stride : p.num_q_heads * head_stride;
  auto tma_stride = [](int64_t stride) {
    return stride > 0 && stride < (int64_t(1) << 40) / int64_t(sizeof(Element));
  };
  params.store_o.enabled = o.mode == OutputMode::kFinal && !q_varlen && !Traits::kPackGqa &&
                           tma_stride(token_stride) && tma_stride(head_stride) && tma_stride(batch_stride);
  if (params.store_o.enabled) {
    auto mO = make_tensor(make_gmem_ptr(static_cast<const Element*>(o.out)),
                          make_layout(make_shape(int32_t(p.max_q_len), int32_t(kHeadDim), int32_t(p.num_q_heads),
                                                 int32_t(p.batch)),
                                      make_stride(token_stride, _1{}, head_stride, batch_stride)));
    params.store_o.tma = make_tma_copy(SM90_TMA_STORE{}, mO, typename Traits::SmemLayoutOConsumer{},
                                       Shape<Int<Traits::kConsumerRows>, Int<kHeadDim>>{}, _1{});
    params.store_o.shape = mO.shape();
  }
  const dim3 block(Traits::kThreads);
  // The variants instance: one pass, no stream-K tail (the planner keeps both off with variants).
  const bool variants = prefill_variants(p);
  if (variants && (p.stream_steps > 0 || kVariant == tiles::PrefillSm90Variant::kTwoPass)) {
    return cudaErrorInvalidValue;
  }
  if constexpr (kVariant == tiles::PrefillSm90Variant::kTwoPass) {
    return launch_two_pass(prefill_sm90_kernel<Traits, PrefillPass::kStats>,
                           prefill_sm90_kernel<Traits, PrefillPass::kFromStats>, block, Traits::kSmemBytes, params,
                           config);
  } else {
    if (variants) {
      return launch_kernel(prefill_sm90_kernel<Traits, PrefillPass::kFused, false, true>, block, Traits::kSmemBytes,
                           params, config);
    }
    if constexpr (!Traits::kPackGqa) {
      if (p.stream_steps > 0) {
        return launch_kernel(prefill_sm90_kernel<Traits, PrefillPass::kFused, true>, block, Traits::kSmemBytes, params,
                             config);
      }
    }
    return launch_kernel(prefill_sm90_kernel<Traits, PrefillPass::kFused>, block, Traits::kSmemBytes, params, config);
  }
}

}  // namespace splitkv::detail
