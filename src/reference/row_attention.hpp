// Attention for one query row against one (sequence, KV head): the core of the CPU reference.
#pragma once

#include "reference/reference.hpp"
#include "splitkv/types.hpp"

namespace splitkv::ref {

struct RowInput {
  const float* q;   // [d]
  const float* k;   // [n_keys, d]
  const float* v;   // [n_keys, d]
  int n_keys;       // keys in the sequence
  int n_visible;    // the row sees keys [first_visible, n_visible)
  int d;
  double scale;
  DType dtype;      // input dtype (kLowPrecision rounds to it)
  // Attention variants (kernels/common/attention_variants.hpp, docs/VARIANTS.md).
  int first_visible = 0;                       // a sliding window's first key
  double softcap = 0;                          // > 0: scaled scores s become softcap * tanh(s / softcap)
  const unsigned char* tree_bits = nullptr;    // the row's tree mask over keys [tree_first, n_keys)
  int tree_first = 0;
  bool has_sink = false;                       // a sink logit joins the denominator once
  double sink = 0;
};

// Writes o[0..d) and *lse by the chosen method; with a sink, o is normalized over the sink too and
// *lse includes it (a row that sees no key: o = 0, *lse = the sink).
void attend_row(const RowInput& row, const Options& options, double* o, double* lse);

}  // namespace splitkv::ref
