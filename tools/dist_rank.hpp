// Joining the ranks of a splitkv::dist program started by scripts/run_ranks.sh (one process per
// GPU): the rank and world size from the environment, the device set, the NCCL communicator made.
#pragma once

#include <nccl.h>

#include <string>

namespace splitkv::dist_tools {

struct RankEnv {
  int rank = 0;
  int world = 1;
  ncclComm_t comm = nullptr;
  std::string error;  // non-empty: no communicator (too few GPUs, no id, NCCL failure)
};

// SPLITKV_DIST_RANK / SPLITKV_DIST_WORLD (default 0 / 1) and SPLITKV_DIST_ID_FILE (needed when the
// world has more than one rank: rank 0 writes the NCCL unique id there, the others wait up to 60 s
// for it). Touches neither CUDA nor NCCL when this machine has fewer GPUs than ranks.
RankEnv join_ranks();

}  // namespace splitkv::dist_tools
