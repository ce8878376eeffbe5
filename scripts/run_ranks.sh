#!/usr/bin/env bash
# Starts one process per GPU for splitkv::dist programs (NCCL ranks 0..N-1 on GPUs 0..N-1) and
# waits for all of them.
#   scripts/run_ranks.sh N LOG_PREFIX PROGRAM [ARGS...]
# Rank r gets SPLITKV_DIST_RANK=r, SPLITKV_DIST_WORLD=N and a shared SPLITKV_DIST_ID_FILE (rank 0
# writes the NCCL unique id there); its output goes to LOG_PREFIX<r>.log. Every rank runs under a
# timeout (SPLITKV_DIST_TIMEOUT, default 300 s), so a collective that never completes fails fast.
# Prints one line per rank (its last line of output) and exits non-zero when any rank failed.
set -uo pipefail
N=${1:?usage: run_ranks.sh N LOG_PREFIX PROGRAM [ARGS...]}
PREFIX=${2:?usage: run_ranks.sh N LOG_PREFIX PROGRAM [ARGS...]}
shift 2
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared hosts
ID_FILE=$(mktemp -u /tmp/splitkv-nccl-id.XXXXXX)
pids=()
for ((r = 0; r < N; ++r)); do
  SPLITKV_DIST_RANK=$r SPLITKV_DIST_WORLD=$N SPLITKV_DIST_ID_FILE=$ID_FILE \
    timeout -k 10 "${SPLITKV_DIST_TIMEOUT:-300}" "$@" >"$PREFIX$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for ((r = 0; r < N; ++r)); do
  wait "${pids[$r]}"
  status=$?
  [[ $status -ne 0 ]] && rc=1
  echo "rank $r (rc $status): $(tail -1 "$PREFIX$r.log")"
done
rm -f "$ID_FILE" "$ID_FILE.tmp"
exit $rc
