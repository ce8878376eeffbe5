# The kernel-family registry: one row per family of kernels. CMake reads it to generate
#   - one instantiation source per (family, dtype, head dim, KV format) this build compiles,
#   - generated/registry_families.cpp: the family table and the list of compiled instances, read
#     by the planner (which family serves a problem) and by compiled_*() (host code, no CUDA),
#   - generated/registry_launchers.cpp: (family, dtype, head dim, KV format) -> launcher, read by
#     dispatch.
# Adding a family is one row here plus its folder src/kernels/<family>/ (kernel, traits, tile
# shapes and the summary the row names, listed in src/kernels/tile_table.hpp, launcher, instance
# template).
#
#   NAME        the family's name: Plan::family, `splitkv plan`, `--family NAME`
#   KIND        decode | prefill | combine; append | dequant | normalize: the cache kernels (run_append_kv,
#               chunked prefill's staging copy, the atomic merge's normalization), launched by name
#   ARCH        sm80: runs on sm_80 and later, compiled for every target architecture;
#               sm90a: uses wgmma/TMA/setmaxnreg, compiled only when 90a is a target, runs on sm_90
#   STRATEGIES  the Strategy values it serves (split-q, split-kv, split-v, two-pass; none for the others)
#   PRIORITY    among the families that serve a request the planner takes the highest; a family
#               with a negative priority is never chosen automatically (only with --family)
#   HEAD_DIMS, DTYPES (of Q and O), KV_FORMATS (native: K/V stored in the Q/O dtype; fp8, int8, int4,
#               k8v4, int8_kc, int4_kc, k8v4_kc: quantized caches, docs/KV_FORMATS.md); builds select formats with SPLITKV_KV_FORMATS
#   EVERY_BUILD compiled for every DTYPES x HEAD_DIMS listed, whatever SPLITKV_DTYPES / SPLITKV_HEAD_DIMS select
#   TILE        (decode, prefill, combine) tile summary for the planner: a constexpr function of the family's *_tile.hpp
#   TEMPLATE    src/kernels/<TEMPLATE>.cu.in (the family folder's instance template); VARIANT is substituted
#   KV_CACHES   (prefill) the decode-cache layouts its kernel reads K/V from for chunked prefill
#               (PrefillProblem::kv_cache): contiguous, paged; none: K/V token tensors only
#   MIN_ROWS    (decode) the fewest packed query rows per KV head (q_len x Hq/Hkv) it serves
#               (default 1): a larger tile only pays where the rows fill it
#   STUDY       a study family (the original design's alternatives, measured in the strategies suite,
#               never chosen by the planner on its own): its instances are compiled only with
#               -DSPLITKV_STUDY_FAMILIES=ON (scripts/gpu_check.sh); elsewhere a plan naming it is
#               refused at run time as not compiled
splitkv_family(NAME decode_mma KIND decode ARCH sm80 STRATEGIES split-q split-kv PRIORITY 0
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native
  TILE decode_mma_summary TEMPLATE decode/decode_mma VARIANT 16)

# decode_mma with 32-row tiles, for KV heads with more than 16 packed query rows (speculative
# queries times the GQA group): each KV head is read by half as many tiles. The planner takes it
# where its grid gives every SM a block (docs/TUNING.md, "Decode tiles").
splitkv_family(NAME decode_mma_m32 KIND decode ARCH sm80 STRATEGIES split-q split-kv PRIORITY 1 MIN_ROWS 17
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS native
  TILE decode_mma_m32_summary TEMPLATE decode/decode_mma VARIANT 32)

# decode_mma's block over a quantized KV cache: codes (and per-token scales) streamed as stored,
# dequantized in registers, fp16 MMAs.
splitkv_family(NAME decode_quant KIND decode ARCH sm80 STRATEGIES split-q split-kv PRIORITY 0
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS fp8 int8 int4 k8v4
  TILE decode_quant_summary TEMPLATE decode_quant/decode_quant)

# decode_quant with the keys as the MMA's rows (S^T = K Q^T, O^T = V^T P^T), for KV heads with at most
# 8 packed query rows: half the MMAs, exponentials and O registers of a 16-row tile there
# (src/kernels/decode_quant/quant_keys_as_rows.cuh).
splitkv_family(NAME decode_quant_n8 KIND decode ARCH sm80 STRATEGIES split-q split-kv PRIORITY 1 MAX_ROWS 8
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS fp8 int8 int4 k8v4
  TILE decode_quant_n8_summary TEMPLATE decode_quant/decode_quant_keys_as_rows)

# decode_quant_n8's kernel over keys quantized per channel (*_kc): each 64-key group's scales folded
# into Q once per group, the tail's 16-bit keys multiplied as stored (quant_keys_as_rows_kc.cuh).
# The planner takes it only when options.family names it (KvFormatTraits::decode_kernels_by_default).
# Not at D = 256, where the per-group Q fragment spills at 255 registers.
splitkv_family(NAME decode_kc_n8 KIND decode ARCH sm80 STRATEGIES split-q split-kv PRIORITY 1 MAX_ROWS 8
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS int8_kc int4_kc k8v4_kc
  TILE decode_quant_n8_summary TEMPLATE decode_quant/decode_quant_keys_as_rows)

# The keys-as-rows kernel of decode_quant_n8 over a 16-bit cache (K and V in the Q/O dtype, its MMA,
# no conversion), for KV heads with at most 8 packed query rows (q_len 1 with GQA 4 or 8, q_len 2
# with GQA 4), which decode_mma's 16-row tile pads to 16. Half the MMAs and exponentials per key:
# measured faster than decode_mma on every such decode-suite row (docs/TUNING.md, "Kernels").
splitkv_family(NAME decode_mma_n8 KIND decode ARCH sm80 STRATEGIES split-q split-kv PRIORITY 1 MAX_ROWS 8
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native
  TILE decode_quant_n8_summary TEMPLATE decode_quant/decode_quant_keys_as_rows)

splitkv_family(NAME prefill_mma KIND prefill ARCH sm80 STRATEGIES split-q split-kv PRIORITY 0
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS native
  TILE prefill_mma_summary TEMPLATE prefill/prefill_mma VARIANT kDefault KV_CACHES contiguous paged)

# Hopper (sm_90a): TMA loads into swizzled shared memory, wgmma for Q K^T and P V, a producer
# warpgroup and two consumer warpgroups with register reallocation.
splitkv_family(NAME prefill_sm90 KIND prefill ARCH sm90a STRATEGIES split-q split-kv PRIORITY 1
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native KV_CACHES contiguous paged
  TILE prefill_sm90_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kDefault)

# prefill_sm90 with three consumer warpgroups (192 query rows) at D=64, FlashAttention-3's D=64
# tile. Priority -1: the planner picks it itself where its grid makes at least 2.5 waves (faster
# from 1.5k queries, slower at 1k: docs/TUNING.md), see prefer_sm90_tile_variant in src/plan/planner.cpp.
splitkv_family(NAME prefill_sm90_m192 KIND prefill ARCH sm90a STRATEGIES split-q split-kv PRIORITY -1
  HEAD_DIMS 64 DTYPES fp16 bf16 KV_FORMATS native KV_CACHES contiguous paged
  TILE prefill_sm90_m192_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kM192)

# prefill_sm90 with FlashAttention-3's D=256 tile, 128 x 80 (4 stages of 40 KB). Priority -1: the
# planner picks it itself at D=256 (faster than the 64-key tile: docs/TUNING.md, "Kernels"), see
# prefer_sm90_tile_variant in src/plan/planner.cpp. wgmma N=80 needs CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED.
splitkv_family(NAME prefill_sm90_n80 KIND prefill ARCH sm90a STRATEGIES split-q split-kv PRIORITY -1
  HEAD_DIMS 256 DTYPES fp16 bf16 KV_FORMATS native KV_CACHES contiguous paged
  TILE prefill_sm90_n80_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kN80)

# prefill_sm90's tile holding the query heads of one KV head (GQA packing): row r of a tile is query
# q0 + r % m of the KV head's query head r / m, with m = 128 / group in whole 8-row atoms (groups of
# at most 16). Priority -1: the planner packs where that takes fewer tiles than one query head per
# tile (queries per sequence fewer than a tile's rows), see plan_gqa_packing in src/plan/planner.cpp.
splitkv_family(NAME prefill_sm90_gqa KIND prefill ARCH sm90a STRATEGIES split-q split-kv PRIORITY -1
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native KV_CACHES contiguous paged
  TILE prefill_sm90_gqa_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kPackGqa)

# GQA packing in a 64-row tile (D=128): a producer and one consumer warpgroup, 64-key K/V tiles, two
# blocks per SM. For decode-shaped rows (speculative queries, short chunks: q_len x group <= 64 per
# KV head), which the 128-row packed tile pads to 128. Priority -1: chosen by name while it is
# measured (the planner's route for speculative rows names it: docs/TUNING.md); groups of at most 8
# query heads.
splitkv_family(NAME prefill_sm90_gqa64 KIND prefill ARCH sm90a STRATEGIES split-q split-kv PRIORITY -1
  HEAD_DIMS 128 DTYPES fp16 bf16 KV_FORMATS native KV_CACHES contiguous paged
  TILE prefill_sm90_gqa64_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kGqa64)

# The original design's two-pass strategy on the wgmma kernel: a statistics pass (Q K^T and each
# row's max and sum, K alone streamed) and an output pass (scores again, the final softmax applied,
# P V; no O rescale), two launches of prefill_sm90_kernel. Chosen by name (measured in the
# strategies suite against the one-pass kernel).
splitkv_family(NAME prefill_sm90_twopass STUDY KIND prefill ARCH sm90a STRATEGIES two-pass PRIORITY -1
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS native
  TILE prefill_sm90_twopass_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kTwoPass)

# The original design's independent K and V tiles: K consumed in 16-key sub-tiles, V in 64-column
# slices. Measured slower than prefill_mma, so only chosen by name.
splitkv_family(NAME prefill_mma_k16v64 STUDY KIND prefill ARCH sm80 STRATEGIES split-q split-kv PRIORITY -1
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS native
  TILE prefill_mma_k16v64_summary TEMPLATE prefill/prefill_mma VARIANT kK16V64)

splitkv_family(NAME prefill_mma_splitv STUDY KIND prefill ARCH sm80 STRATEGIES split-v PRIORITY 0
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS native
  TILE prefill_mma_splitv_summary TEMPLATE prefill/prefill_mma VARIANT kSplitV)

splitkv_family(NAME prefill_mma_twopass STUDY KIND prefill ARCH sm80 STRATEGIES two-pass PRIORITY 0
  HEAD_DIMS 64 128 DTYPES fp16 bf16 KV_FORMATS native
  TILE prefill_mma_twopass_summary TEMPLATE prefill/prefill_mma VARIANT kTwoPass)

# Merges split partials (O_i, LSE_i); used after split-KV decode and prefill, and by run_combine.
splitkv_family(NAME combine KIND combine ARCH sm80 STRATEGIES PRIORITY 0
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native
  TILE combine_summary TEMPLATE combine/combine)

# prefill_sm90 with the original design's independent K and V tile shapes (D=128): 128-key K tiles (in
# two 64-column slices) and 64-key V tiles, one ring of ten 16 KB stages (the default's memory), P V
# issued per V tile. Priority -1: chosen by name only; measured in the strategies suite.
splitkv_family(NAME prefill_sm90_v64 STUDY KIND prefill ARCH sm90a STRATEGIES split-q split-kv PRIORITY -1
  HEAD_DIMS 128 DTYPES fp16 bf16 KV_FORMATS native KV_CACHES contiguous paged
  TILE prefill_sm90_v64_summary TEMPLATE prefill_sm90/prefill_sm90 VARIANT kV64)

# The cache kernels: launched by name by host code, never chosen by the planner, compiled at every
# dtype and head dim (a cache must be writable and stageable at every head dim decode can be built
# for; the kernels are small).
# Writes new K/V rows into a cache of any format (quantizing on the way; *_kc: the group kernel first).
splitkv_family(NAME append_kv KIND append ARCH sm80 STRATEGIES PRIORITY -1 EVERY_BUILD
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native TEMPLATE quant/append_kv)
# Dequantizes a quantized cache into chunked prefill's 16-bit staging copy (DTYPES: of the copy).
splitkv_family(NAME dequant_kv KIND dequant ARCH sm80 STRATEGIES PRIORITY -1 EVERY_BUILD
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native TEMPLATE quant/dequant_kv)
# Normalizes the atomic merge's accumulated rows into the output (PlanOptions::merge = kAtomic).
splitkv_family(NAME atomic_normalize KIND normalize ARCH sm80 STRATEGIES PRIORITY -1 EVERY_BUILD
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native TEMPLATE combine/atomic_normalize)
# The mixed route's split and merge copies around a serving step's decode and prefill parts
# (PlanTuning::mixed_route, docs/MIXED_BATCH.md).
splitkv_family(NAME mixed_route KIND mixed ARCH sm80 STRATEGIES PRIORITY -1 EVERY_BUILD
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native TEMPLATE mixed/mixed_route)
# Builds a mixed step's work list on the GPU from the device's lengths (kernels/common/mixed_work.hpp;
# the persistent kernel that runs the list is not built yet). The kernel ignores dtype and head dim.
splitkv_family(NAME mixed_work KIND mixed ARCH sm80 STRATEGIES PRIORITY -1 EVERY_BUILD
  HEAD_DIMS 64 128 256 DTYPES fp16 bf16 KV_FORMATS native TEMPLATE mixed/mixed_work)
