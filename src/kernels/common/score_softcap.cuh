// The logit softcap inside a key loop (docs/VARIANTS.md), as compile-time policies: the plain
// instances (kOn = false) keep their code. Applied before the masks (a masked -inf stays -inf). Two
// policies, for two kinds of kernel:
//
// ScoreSoftcap (decode: memory-bound; kOn = true only in the capped version of a variants instance,
// which the launcher runs when cap > 0). A kernel keeps raw scores s
// whose logit is s * scale (scale: softmax_scale times whatever the kernel folded into Q or the keys,
// e.g. Q's power-of-two shift or an FP8 cache's key scale); the capped logit cap * tanh(s * scale / cap)
// is again a raw score, out * tanh(in * s) with in = scale / cap and out = cap / scale, so the online
// softmax, the merges and the LSE run unchanged. tanh is softcap_tanh: a relative error of ~1e-6 with
// two MUFU instructions and a few FMAs (tanhf's longer code spilled the 32-row 16-bit kernel).
//
// ScoreSoftcapFast (prefill: compute-bound, where every score already costs one MUFU exp2 and the
// MUFU pipe is a quarter of the tensor cores' rate per score at D = 128). A score becomes
// t = tanh.approx(in * s): one FMUL and one MUFU; the kernel's softmax then runs with the logit
// scale cap * log2(e) (logit_scale_log2) instead of scale * log2(e). tanh.approx's error (about
// 2^-11 of |tanh|) moves a logit by at most cap * 2^-11 (0.024 at a cap of 50, near the cap), the
// approximation FlashAttention and FlashInfer make.
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

// The elements of a fragment: a CuTe register tensor or a plain array.
template <class Fragment>
__device__ constexpr int softcap_fragment_size() {
  if constexpr (std::is_array_v<Fragment>) {
    return int(std::extent_v<Fragment>);
  } else {
    return int(decltype(std::declval<Fragment&>().size())::value);
  }
}

template <bool kOn>
struct ScoreSoftcap {
  __device__ __forceinline__ ScoreSoftcap(float /*cap*/, float /*scale_log2*/) {}
  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment&) const {}
};

// The instance with a cap: a decode kernel's variants instance has two versions, capped and not
// (decode_softcap_on picks one at launch), so the key loop of the uncapped one holds no softcap code:
// as a branch inside one loop the compiler predicated the tanh, which every sub-tile then issued
// with the cap off (docs/TUNING.md, "Kernels").
template <>
struct ScoreSoftcap<true> {
  float in, out;  // s -> out * tanh(in * s)

  // cap: > 0; scale_log2: the kernel's raw-score-to-log2-logit factor (scale * log2(e)). A zero
  // factor (an FP8 cache's key scale of 0) makes every logit 0, capped or not.
  __device__ __forceinline__ ScoreSoftcap(float cap, float scale_log2)
      : in(scale_log2 / (cap * 1.4426950408889634f)),
        out(scale_log2 == 0.f ? 0.f : cap * 1.4426950408889634f / scale_log2) {}

  __device__ __forceinline__ float operator()(float s) const { return out * softcap_tanh(in * s); }

  // Every element of a fragment (a CuTe register tensor or a plain array).
  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment& s) const {
    constexpr int kSize = softcap_fragment_size<Fragment>();
#pragma unroll
    for (int i = 0; i < kSize; ++i) s[i] = (*this)(s[i]);
  }
};

// s -> tanh.approx(in * s) for every element of a fragment: one FMUL and one MUFU each
// (ScoreSoftcapFast).
template <class Fragment>
__device__ __forceinline__ void tanh_approx_all(Fragment& s, float in) {
  constexpr int kSize = softcap_fragment_size<Fragment>();
#pragma unroll
  for (int i = 0; i < kSize; ++i) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(in * s[i]));
    s[i] = t;
  }
}

// kOn: the instance may cap; kAlways: it caps (the capped version of a variants instance whose
// launcher picks the version by the cap, as prefill_mma's: with the cap a runtime branch in the key
// loop, ptxas predicated the tanh into every score tile, cap or not). prefill_sm90 keeps the
// runtime branch (<true, false>), which it compiles as a branch.
template <bool kOn, bool kAlways = false>
struct ScoreSoftcapFast {
  __device__ __forceinline__ ScoreSoftcapFast(float /*cap*/, float /*scale_log2*/) {}
  __device__ __forceinline__ float logit_scale_log2(float scale_log2) const { return scale_log2; }
  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment&) const {}
};

template <>
struct ScoreSoftcapFast<true, false> {
  bool on;         // cap > 0
  float in;        // s -> tanh(in * s)
  float cap_log2;  // the capped scores' logit scale: cap * log2(e)

  // cap: 0 (off) or > 0; scale_log2: the kernel's raw-score-to-log2-logit factor (scale * log2(e)).
  __device__ __forceinline__ ScoreSoftcapFast(float cap, float scale_log2)
      : on(cap > 0.f), in(scale_log2 / (cap * 1.4426950408889634f)), cap_log2(cap * 1.4426950408889634f) {}

  // The factor the softmax and the LSE take in place of scale_log2.
  __device__ __forceinline__ float logit_scale_log2(float scale_log2) const { return on ? cap_log2 : scale_log2; }

  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment& s) const {
    if (!on) return;
    tanh_approx_all(s, in);
  }
};

template <>
struct ScoreSoftcapFast<true, true> {
  float in;        // s -> tanh(in * s)
  float cap_log2;  // the capped scores' logit scale: cap * log2(e)

  // cap: > 0; scale_log2 as above.
  __device__ __forceinline__ ScoreSoftcapFast(float cap, float scale_log2)
      : in(scale_log2 / (cap * 1.4426950408889634f)), cap_log2(cap * 1.4426950408889634f) {}

  __device__ __forceinline__ float logit_scale_log2(float /*scale_log2*/) const { return cap_log2; }

  template <class Fragment>
  __device__ __forceinline__ void apply(Fragment& s) const {
    tanh_approx_all(s, in);
  }
};

}  // namespace splitkv::detail
