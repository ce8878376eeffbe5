#!/usr/bin/env bash
# run79_all.sh fitted to a short budget (~430 s): no Python module, the new code's GPU tests only.
DEADLINE=${DEADLINE:-430} LEAN=1 exec bash "$(dirname "$0")/run79_all.sh"
