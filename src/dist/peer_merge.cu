// The peer merge kernel (src/dist/peer_merge.hpp) and the device communicator it needs.
#include "dist/peer_merge.hpp"

#include <nccl_device.h>

#include "api/device_arch.hpp"
#include "kernels/combine/combine_row.cuh"
#include "kernels/common/pdl.cuh"

namespace splitkv::dist::detail {
namespace {

// Split s of the merged row lives on rank s / splits_per_rank, as its split s % splits_per_rank.
template <int kHeadDim>
struct WindowPartials {
  static constexpr bool kZeroEmptyOutputs = false;  // the ranks' own decode partials: empty ones hold zeros
  ncclWindow_t window;
  size_t lse_offset;
  int splits_per_rank;
  int64_t rows;
  __device__ const float* at(int s, size_t offset) const {
    return static_cast<const float*>(ncclGetPeerPointer(window, offset, s / splits_per_rank));
  }
  __device__ float lse(int s, int64_t row) const {
    const int64_t local = int64_t(s % splits_per_rank) * rows + row;
    return *at(s, lse_offset + size_t(local) * sizeof(float));
  }
  __device__ float4 o4(int s, int64_t row, int lane) const {
    const int64_t local = int64_t(s % splits_per_rank) * rows + row;
    return reinterpret_cast<const float4*>(at(s, size_t(local) * kHeadDim * sizeof(float)))[lane];
  }
};

template <class Element, int kHeadDim>
__global__ void __launch_bounds__(::splitkv::tiles::kCombineThreads)
    peer_merge_kernel(const __grid_constant__ PeerMergeParams p, const __grid_constant__ ncclDevComm comm) {
  // Block r meets block r of every rank: after the first sync every rank's decode (the kernel
  // before this one on its stream) is complete and visible; after the second, every rank has
  // finished reading ours, so our next call may overwrite it.
  // Memory orders: every rank's partials come from the kernel before this one on its stream, so
  // they are in their owner's memory before its first arrive; the wait acquires (no read of a peer
  // moves above it). The second arrive needs no release fence: each of our reads of a peer has
  // delivered its value into the merged row before the block syncs and arrives.
  splitkv::detail::wait_for_prior_grids();  // launched early (PDL): the decode must be complete
  ncclLsaBarrierSession<ncclCoopCta> barrier(ncclCoopCta(), comm, ncclTeamTagLsa(), blockIdx.x);
  barrier.sync(ncclCoopCta(), cuda::memory_order_acquire);
  const WindowPartials<kHeadDim> partials{p.window, p.lse_offset, p.splits_per_rank, p.combine.rows};
  // One row per block (block r meets block r of every rank): its first head_dim / 4 threads merge it.
  if (threadIdx.x < splitkv::detail::CombineLanes<kHeadDim>::kPerRow) {
    splitkv::detail::combine_row<Element, kHeadDim>(p.combine, blockIdx.x, int(threadIdx.x), partials);
  }
  barrier.sync(ncclCoopCta(), cuda::memory_order_relaxed);
}

template <class Element, int kHeadDim>
cudaError_t launch(const PeerMergeParams& p, cudaStream_t stream) {
  // cudaLaunchKernelEx reports this launch's own error; cudaGetLastError could return a stale one
  // that NCCL's setup left behind (a benign peer-access error, for example).
  cudaLaunchAttribute early[1];
  early[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(p.combine.rows));
  config.blockDim = dim3(::splitkv::tiles::kCombineThreads);
  config.stream = stream;
  config.attrs = early;
  config.numAttrs = splitkv::detail::current_device_supports_pdl() ? 1 : 0;
  return cudaLaunchKernelEx(&config, peer_merge_kernel<Element, kHeadDim>, p,
                            *static_cast<const ncclDevComm*>(p.device_comm));
}

template <class Element>
cudaError_t launch_for_head_dim(const PeerMergeParams& p, int head_dim, cudaStream_t stream) {
  switch (head_dim) {
    case 64: return launch<Element, 64>(p, stream);
    case 128: return launch<Element, 128>(p, stream);
    case 256: return launch<Element, 256>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

ncclResult_t create_device_comm(ncclComm_t comm, int barriers, void** device_comm) {
  ncclDevCommRequirements reqs{};
  reqs.lsaBarrierCount = barriers;
  auto* made = new ncclDevComm{};
  const ncclResult_t r = ncclDevCommCreate(comm, &reqs, made);
  if (r != ncclSuccess) {
    delete made;
    return r;
  }
  *device_comm = made;
  return ncclSuccess;
}

ncclResult_t destroy_device_comm(ncclComm_t comm, void* device_comm) {
  auto* dc = static_cast<ncclDevComm*>(device_comm);
  const ncclResult_t r = ncclDevCommDestroy(comm, dc);
  delete dc;
  return r;
}

cudaError_t launch_peer_merge(const PeerMergeParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  if (dtype == DType::kF16) return launch_for_head_dim<cutlass::half_t>(params, head_dim, stream);
  if (dtype == DType::kBF16) return launch_for_head_dim<cutlass::bfloat16_t>(params, head_dim, stream);
  return cudaErrorInvalidValue;
}

}  // namespace splitkv::dist::detail
