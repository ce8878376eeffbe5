// cp.async.wait_group takes an immediate; unrolled loops compute the count as a plain int, which
// this switch turns back into a constant (folded away when the count is known at compile time).
#pragma once

#include <cute/arch/copy_sm80.hpp>

namespace splitkv::detail {

__device__ __forceinline__ void cp_async_wait_pending(int pending) {
  switch (pending) {
    case 0: cute::cp_async_wait<0>(); break;
    case 1: cute::cp_async_wait<1>(); break;
    case 2: cute::cp_async_wait<2>(); break;
    case 3: cute::cp_async_wait<3>(); break;
    case 4: cute::cp_async_wait<4>(); break;
    case 5: cute::cp_async_wait<5>(); break;
    case 6: cute::cp_async_wait<6>(); break;
    default: cute::cp_async_wait<7>(); break;
  }
}

}  // namespace splitkv::detail
