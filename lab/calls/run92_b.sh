#!/usr/bin/env bash
# Run 92, the bound short twin (run92_bt.sh). Carry ["build-r92b"]: hard links of its binaries.
set -uo pipefail
mkdir -p build-wide2 build-bt
ln -sf ../build-r92b/wide2-splitkv.xz build-wide2/splitkv.xz
ln -sf ../build-r92b/bt-gt.xz build-bt/gt.xz; ln -sf ../build-r92b/bt-new.xz build-bt/new.xz
bash lab/calls/run92_bt.sh
