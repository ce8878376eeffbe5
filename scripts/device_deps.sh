#!/usr/bin/env bash
# Fills .deps/cutlass (ignored by git) from the CUTLASS pip package for the GPU machine, which has no
# CUTLASS: include/ (the build's headers) and examples/88_hopper_fmha (the prefill peer,
# splitkv_cutlass_peer). Pass `carry: [".deps"]` to the device call afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
"$PYTHON" -c "import cutlass_library" 2>/dev/null || "$PYTHON" -m pip install --quiet -r requirements.txt
src=$("$PYTHON" -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))")
mkdir -p .deps/cutlass/examples
rm -rf .deps/cutlass/include .deps/cutlass/examples/88_hopper_fmha
cp -r "$src/include" .deps/cutlass/include
cp -r "$src/examples/88_hopper_fmha" .deps/cutlass/examples/88_hopper_fmha
du -sh .deps/cutlass
