#!/usr/bin/env bash
# Run 57: SASS of our D=128 bf16 prefill_sm90 kernel and of the CUTLASS example's kernels, for an
# instruction count comparison (done here: no cuobjdump on the development machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
[[ -x build-full/splitkv ]] || { mkdir -p build-full && tar -xJf build-carry/bins.tar.xz -C build-full; }
cuobjdump -sass build-full/splitkv_cutlass_peer | xz -6 > "$OUT/cutlass-peer.sass.xz"
cuobjdump -sass build-full/splitkv | awk '/Function : /{keep = ($0 ~ /prefill_sm90_kernelINS0_17PrefillSm90TraitsIN7cutlass10bfloat16_tELi128ELNS_5tiles18PrefillSm90VariantE0EEELNS0_11PrefillPassE0/)} keep' \
  | xz -6 > "$OUT/prefill-sm90-d128-bf16.sass.xz"
ls -la "$OUT"
