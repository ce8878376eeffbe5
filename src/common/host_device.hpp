// Qualifiers for code shared by host (planner, reference, CPU backend) and device (kernels).
#pragma once

#if defined(__CUDACC__)
#define SPLITKV_HD __host__ __device__ __forceinline__
#else
#define SPLITKV_HD inline
#endif
