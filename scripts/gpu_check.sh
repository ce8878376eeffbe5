#!/usr/bin/env bash
# Everything the GPU machine does, in one call: build for sm_90a, run the GPU tests (optionally
# under compute-sanitizer), run the benchmark suites with the PyTorch peers, and leave results and
# logs in $OUT (at most 8 files), printing a short table last.
#
#   SPLITKV_STEPS   comma list of: build,test,sanitize,adversarial,racecheck,probe,sweep,decode,prefill,strategies,quant,
#                   (adversarial: the adversarial suite and promise tests under memcheck, docs/CONTRACTS.md;
#                   SPLITKV_HOSTILE_SEEDS base cases, default 12)
#                   decodefused (the decode suite with --merge fused: table in bench.log, decode-fused.json),
#                   decodeatomic (the same with --merge atomic: decode-atomic.json),
#                   python (tests/python/gpu_run.sh: its own build, the torch tests, the overhead bench),
#                   dist (splitkv::dist: tests and the multi-GPU benchmark, one process per GPU),
#                   profile (ncu over one `splitkv bench` shape: SPLITKV_PROFILE_ARGS, SPLITKV_PROFILE_KERNEL),
#                   cutlasspeer (the CUTLASS Hopper FMHA example timed on the prefill suite's dense rows,
#                   bench/cutlass_peer; needs its headers: scripts/device_deps.sh; joined into the prefill table)
#                   (default: build,test,decode)
#   SPLITKV_PREBUILT  a build directory made elsewhere (splitkv, tests/splitkv_gpu_tests): no build
#   SPLITKV_CMAKE_ARGS  extra configure arguments, e.g. "-DSPLITKV_HEAD_DIMS=128 -DSPLITKV_DTYPES=bf16"
#   SPLITKV_TEST_FILTER  gtest filter for test/sanitize (default: all)
#   SPLITKV_TEST_SHARDS  gtest shards the test step runs at once (default 4)
#   SPLITKV_EXPECT_TESTS gtest filter that must match at least one test of the binary, e.g. the cases
#                   of the change under test: a test binary linked before they were written (a stale
#                   prebuilt one) fails here instead of passing without them
#   SPLITKV_SANITIZE_FILTER  gtest filter for sanitize alone (default: SPLITKV_TEST_FILTER)
#   SPLITKV_RACE_FILTER  gtest filter for racecheck (default: a few small decode and prefill cases)
#   SPLITKV_STEP_TIMEOUT seconds any one step may run (default 420): a hung kernel fails fast
#   SPLITKV_COMMIT  commit id recorded in the results: pass it (the device copy may carry a stale .git)
#   OUT             output folder (default ./gpu-out)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=",${SPLITKV_STEPS:-build,test,decode},"
FILTER=${SPLITKV_TEST_FILTER:-*}
export SPLITKV_COMMIT=${SPLITKV_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
WORK=/tmp/splitkv-gpu-check
mkdir -p "$WORK"
has() { [[ "$STEPS" == *",$1,"* ]]; }
T=${SPLITKV_STEP_TIMEOUT:-420}
# Every step that runs kernels runs under timeout: a barrier bug must not hang the card.
guard() { timeout -k 10 "$T" "$@"; }
summary=()

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$WORK/gpu.txt"

BIN=${SPLITKV_PREBUILT:-build-gpu}
if [[ -z "${SPLITKV_PREBUILT:-}" ]] && has build; then
  start=$(date +%s)
  # shellcheck disable=SC2086
  cmake -S . -B build-gpu -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DSPLITKV_STUDY_FAMILIES=ON ${SPLITKV_CMAKE_ARGS:-} \
    >"$WORK/configure.log" 2>&1 \
    && ninja -C build-gpu -j16 splitkv_cli splitkv_gpu_tests $(has cutlasspeer && echo splitkv_cutlass_peer) \
      >"$OUT/build.log" 2>&1
  rc=$?
  summary+=("build: rc=$rc in $(( $(date +%s) - start )) s")
  if [[ $rc -ne 0 ]]; then
    tail -40 "$OUT/build.log"
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
fi

if has test || has sanitize; then
  listed=$("$BIN/tests/splitkv_gpu_tests" --gtest_list_tests --gtest_filter="$FILTER" | grep -c '^  ')
  summary+=("gpu tests matching the filter: $listed")
  expected=0
  if [[ -n "${SPLITKV_EXPECT_TESTS:-}" ]]; then
    expected=$("$BIN/tests/splitkv_gpu_tests" --gtest_list_tests --gtest_filter="$SPLITKV_EXPECT_TESTS" | grep -c '^  ')
    summary+=("gpu tests matching SPLITKV_EXPECT_TESTS ($SPLITKV_EXPECT_TESTS): $expected")
  fi
  if [[ $listed -eq 0 || ( -n "${SPLITKV_EXPECT_TESTS:-}" && $expected -eq 0 ) ]]; then
    printf '%s\n' "${summary[@]}"
    echo "gpu_check: no test to run (filter or SPLITKV_EXPECT_TESTS matches nothing in $BIN: a stale binary?)"
    exit 1
  fi
fi

if has test; then
  # SPLITKV_TEST_SHARDS gtest shards at once (default 4): the fp64 references run on the host's cores,
  # so the whole suite takes ~3 minutes instead of ~7. Line-buffered and not brief: when the timeout
  # kills a hung test, each shard's log still ends at its RUN line.
  shards=${SPLITKV_TEST_SHARDS:-4}
  rm -f "$WORK"/gpu_tests.*.log
  pids=()
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i guard stdbuf -oL -eL "$BIN/tests/splitkv_gpu_tests" \
      --gtest_filter="$FILTER" >"$WORK/gpu_tests.$i.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for ((i = 0; i < shards; ++i)); do
    wait "${pids[$i]}" || rc=$?
    summary+=("gpu tests, shard $i of $shards: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$WORK/gpu_tests.$i.log" |
      tr '\n' ' ')skipped $(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)' "$WORK/gpu_tests.$i.log")")
    grep -q '^\[  PASSED' "$WORK/gpu_tests.$i.log" ||
      summary+=("gpu tests, shard $i: stopped in $(grep -E '^\[ RUN' "$WORK/gpu_tests.$i.log" | tail -1)")
  done
  cat "$WORK"/gpu_tests.*.log >"$OUT/gpu_tests.log"
  summary+=("gpu tests: rc=$rc")
fi

if has sanitize; then
  guard compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/tests/splitkv_gpu_tests" \
    --gtest_filter="${SPLITKV_SANITIZE_FILTER:-$FILTER}" \
    --gtest_brief=1 >"$OUT/sanitizer.log" 2>&1
  summary+=("compute-sanitizer memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)")
fi

if has adversarial; then  # the adversarial suite and the promise tests under memcheck (docs/CONTRACTS.md)
  guard env SPLITKV_HOSTILE_SEEDS="${SPLITKV_HOSTILE_SEEDS:-12}" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$BIN/tests/splitkv_gpu_tests" --gtest_filter='AdversarialGpu.*:PromisesGpu.*:CombineGpu.*' \
    >"$OUT/adversarial.log" 2>&1
  summary+=("adversarial suite under memcheck: rc=$? $(grep -E '^adversarial|ERROR SUMMARY|^\[  (PASSED|FAILED)' \
    "$OUT/adversarial.log" | tr '\n' ' ')")
fi

if has racecheck; then
  RACE_FILTER=${SPLITKV_RACE_FILTER:-*len1000*:*len129_*:*varlen_causal_splitv*:*varlen_causal_k16v64*}
  guard compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/tests/splitkv_gpu_tests" --gtest_filter="$RACE_FILTER" \
    --gtest_brief=1 >"$OUT/racecheck.log" 2>&1
  summary+=("compute-sanitizer racecheck: rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)")
fi

if has probe; then  # fixed per-call cost: a tiny decode with one split, and with a combine
  for args in "--lk 64 --splits 1" "--lk 128 --splits 2" "--lk 1024 --splits 1" "--lk 1024 --splits 16"; do
    guard "$BIN/splitkv" bench -b 1 --hq 32 --hkv 8 $args 2>&1 | tail -1 | sed "s/^/probe [$args]: /" | tee -a "$WORK/probe.txt"
  done
  summary+=("$(cat "$WORK/probe.txt")")
fi

run_suite() {  # suite name, splitkv bench args...
  local suite=$1
  shift
  guard "$BIN/splitkv" bench "$@" --json "$WORK/$suite-ours.json" >"$WORK/$suite-ours.log" 2>&1
  local rc=$?
  cat "$WORK/$suite-ours.log" >>"$OUT/bench.log"
  summary+=("bench $suite: rc=$rc")
}

if has sweep; then
  run_suite decode-sweep --suite sweep
  cp "$WORK/decode-sweep-ours.json" "$OUT/decode-sweep.json"
fi
if has decode; then
  run_suite decode --suite decode
  guard python3 bench/peers.py --suite decode --json "$WORK/decode-peers.json" >>"$OUT/bench.log" 2>&1
  python3 bench/merge_results.py --suite decode --ours "$WORK/decode-ours.json" --peers "$WORK/decode-peers.json" --out "$OUT"
fi
if has decodefused; then
  run_suite decode-fused --suite decode --merge fused
  cp "$WORK/decode-fused-ours.json" "$OUT/decode-fused.json" 2>/dev/null
fi
if has decodeatomic; then
  run_suite decode-atomic --suite decode --merge atomic
  cp "$WORK/decode-atomic-ours.json" "$OUT/decode-atomic.json" 2>/dev/null
fi
cutlass_args=()
if has cutlasspeer; then
  guard "$BIN/splitkv_cutlass_peer" --json "$WORK/prefill-cutlass.json" >"$WORK/cutlass-peer.log" 2>&1
  summary+=("cutlass peer: rc=$?")
  cat "$WORK/cutlass-peer.log" >>"$OUT/bench.log"
  cp "$WORK/prefill-cutlass.json" "$OUT/" 2>/dev/null && cutlass_args=(--cutlass "$WORK/prefill-cutlass.json")
fi
if has prefill; then
  run_suite prefill --suite prefill
  guard python3 bench/peers.py --suite prefill --json "$WORK/prefill-peers.json" >>"$OUT/bench.log" 2>&1
  python3 bench/merge_results.py --suite prefill --ours "$WORK/prefill-ours.json" --peers "$WORK/prefill-peers.json" \
    "${cutlass_args[@]}" --out "$OUT"
fi
if has quant; then
  run_suite quant --suite quant
  python3 bench/merge_results.py --suite quant --ours "$WORK/quant-ours.json" --out "$OUT"
fi
if has strategies; then
  run_suite strategies --suite strategies
  python3 bench/merge_results.py --suite strategies --ours "$WORK/strategies-ours.json" --out "$OUT"
fi

if has dist; then
  # NCCL from the toolkit, or from the nvidia-nccl wheel PyTorch brings.
  wheel=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
  gpus=$(nvidia-smi --list-gpus | wc -l)
  cmake -S . -B build-gpu -DSPLITKV_NCCL_WHEEL="$wheel" >>"$WORK/configure.log" 2>&1 \
    && ninja -C build-gpu -j16 splitkv_dist_tests splitkv_dist_bench >>"$OUT/build.log" 2>&1
  summary+=("dist build: rc=$?")
  OUT="$WORK" bash scripts/run_dist_tests.sh build-gpu "$gpus" >"$WORK/dist-tests.txt" 2>&1
  summary+=("dist tests on $gpus GPU(s): rc=$? $(tr '\n' ' ' <"$WORK/dist-tests.txt")")
  cat "$WORK"/dist-rank*.log >"$OUT/dist_tests.log"
  for n in 1 "$gpus"; do
    bash scripts/run_ranks.sh "$n" "$WORK/dist-bench$n-rank" build-gpu/splitkv_dist_bench --json "$OUT/multigpu-$n.json" \
      >/dev/null 2>&1
    summary+=("dist bench on $n GPU(s): rc=$?")
    cat "$WORK/dist-bench$n-rank0.log" >>"$OUT/bench.log"
  done
fi

if has profile; then  # Nsight Compute at the card's own clocks (never changes them)
  guard ncu --clock-control none --kernel-name "regex:${SPLITKV_PROFILE_KERNEL:-.*}" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
    "$BIN/splitkv" bench ${SPLITKV_PROFILE_ARGS:---mode prefill --lq 4096 --lk 4096 -b 4 --hq 16 --hkv 16} \
    >"$OUT/profile.txt" 2>&1
  summary+=("profile: rc=$? ($(grep -c . "$OUT/profile.txt") lines in profile.txt)")
fi

if has python; then
  # Its own folder: gpu_run.sh writes build.log / bench.log too; two of its files come back.
  OUT="$WORK/python" DEADLINE="${SPLITKV_PYTHON_DEADLINE:-240}" guard bash tests/python/gpu_run.sh >"$WORK/python.log" 2>&1
  summary+=("python: rc=$? $(grep -E '^SUMMARY' "$WORK/python.log" | tail -1)")
  cp "$WORK/python/pytest.log" "$WORK/python/python-overhead.json" "$OUT/" 2>/dev/null
fi

echo "==== summary ===="
cat "$WORK/gpu.txt"
printf '%s\n' "${summary[@]}"
[[ -f "$OUT/gpu_tests.log" ]] && grep -E '^\[  FAILED|Failure|FAIL:' "$OUT/gpu_tests.log" | head -20
for md in "$OUT"/*-latest.md; do [[ -f "$md" ]] && cat "$md"; done
has dist && grep -h '^|' "$WORK"/dist-bench*-rank0.log 2>/dev/null
exit 0
