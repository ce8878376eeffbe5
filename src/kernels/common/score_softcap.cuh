// The logit softcap inside a key loop (docs/VARIANTS.md). A compile-time policy: the plain
// instances (kOn = false) keep their code; a variants instance (kOn = true) caps when cap > 0 (a
// warp-uniform branch: the same instance serves the window without a cap). A kernel keeps raw
// scores s whose logit is s * scale (scale: softmax_scale times whatever the kernel folded into Q or the keys, e.g. Q's power-of-two
// shift or an FP8 cache's key scale), so the capped logit cap * tanh(s * scale / cap) is again a raw
// score, out * tanh(in * s) with in = scale / cap and out = cap / scale, and the online softmax,
// the merges and the LSE run unchanged. Applied before the masks (a masked -inf stays -inf).
//
// tanh here (softcap_tanh) holds a relative error of ~1e-6 at every magnitude with two MUFU
// instructions and a few FMAs: tanh.approx's relative error of 2^-11 would move a logit near a cap of
// 50 by 0.02, and tanhf's longer code spilled the 32-row 16-bit kernel at its register bound.
#pragma once

#include <type_traits>
#include <utility>

namespace splitkv::detail {

// tanh(x): 1 - 2 / (e^(2|x|) + 1) with its sign, whose absolute error (~2e-7) is a small relative one
// from |x| = 0.1 on, and below that x - x^3 / 3 + 2 x^5 / 15 (the next term is 17 x^7 / 315: < 6e-8
// relative). Saturates to +-1; NaN stays NaN.
__device__ __forceinline__ float softcap_tanh(float x) {
  const float a = fabsf(x);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(a * 2.8853900817779268f));  // e^(2a)
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(e + 1.f));
  const float large = fmaf(-2.f, r, 1.f);
  const float a2 = a * a;
  const float small = a * fmaf(a2, fmaf(a2, 0.13333333333f, -0.33333333333f), 1.f);
  return copysignf(a < 0.1f ? small : large, x);
}

template <bool kOn>
struct ScoreSoftcap {
  __device__ __forceinline__ ScoreSoftcap(float /*cap*/, float /*scale_log2*/) {}
  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment&) const {}
};

template <>
struct ScoreSoftcap<true> {
  bool on;        // cap > 0
  float in, out;  // s -> out * tanh(in * s)

  // cap: 0 (off) or > 0; scale_log2: the kernel's raw-score-to-log2-logit factor (scale * log2(e)).
  // A zero factor (an FP8 cache's key scale of 0) makes every logit 0, capped or not.
  __device__ __forceinline__ ScoreSoftcap(float cap, float scale_log2)
      : on(cap > 0.f),
        in(scale_log2 / (cap * 1.4426950408889634f)),
        out(scale_log2 == 0.f ? 0.f : cap * 1.4426950408889634f / scale_log2) {}

  __device__ __forceinline__ float operator()(float s) const { return out * softcap_tanh(in * s); }

  // Every element of a fragment (a CuTe register tensor or a plain array).
  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment& s) const {
    if (!on) return;
    constexpr int kSize = fragment_size<Fragment>();
#pragma unroll
    for (int i = 0; i < kSize; ++i) s[i] = (*this)(s[i]);
  }

 private:
  template <class Fragment>
  __device__ static constexpr int fragment_size() {
    if constexpr (std::is_array_v<Fragment>) {
      return int(std::extent_v<Fragment>);
    } else {
      return int(decltype(std::declval<Fragment&>().size())::value);
    }
  }
};

}  // namespace splitkv::detail
