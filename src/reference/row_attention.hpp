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
  int n_visible;    // the row sees keys [0, n_visible)
  int d;
  double scale;
  DType dtype;      // input dtype (kLowPrecision rounds to it)
};

// Writes o[0..d) and *lse by the chosen method.
void attend_row(const RowInput& row, const Options& options, double* o, double* lse);

}  // namespace splitkv::ref
