#!/usr/bin/env bash
# Run 92, first call: run92_mw.sh, run92_fp8.sh and run92_m.sh in one machine start
# (run92_b.sh, the bound twin, next on the warm machine).
# Carry ["build-r92"]: hard links of the binaries those scripts name, put back in place here.
set -uo pipefail
mkdir -p build-r91 build-q31 build-q31x build-bis build-wide2 build-bt
ln -sf ../build-r92/q31-splitkv.xz build-q31/splitkv.xz
for c in stride guard; do ln -sf ../build-r92/$c.xz build-q31x/$c.xz; done
for c in 041f0e1 4890a36 55dcb6e ff52af0; do ln -sf ../build-r92/$c.xz build-bis/$c.xz; done
for c in head smem pf pffull; do ln -sf ../build-r92/$c.xz build-r91/$c.xz; done
ln -sf ../build-r92/gtm.xz build-r91/gt2.xz  # HEAD's GPU tests hold the builder's


[ "${SKIP_A:-0}" = 1 ] || { echo "== mw"; bash lab/calls/run92_mw.sh; echo "== fp8"; BINS="q31 head smem pf" ROUNDS=4 ROWS="1024:1 4096:1 16384:1 4096:8 4096:32" bash lab/calls/run92_fp8.sh; }
[ "${SKIP_M:-0}" = 1 ] || { echo "== mixed"; bash lab/calls/run92_m.sh; }

echo "total $SECONDS s"
