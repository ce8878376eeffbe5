// The merge of split partials works through a row's splits in chunks of kCombineChunk (the
// combine, the fused and cluster merges, the peer merge: kernels/common/combine_state.cuh), a
// fixed order that makes every merge deterministic.
#pragma once

namespace splitkv::tiles {

constexpr int kCombineChunk = 8;
constexpr int combine_chunks(int num_splits) { return (num_splits + kCombineChunk - 1) / kCombineChunk; }

}  // namespace splitkv::tiles
