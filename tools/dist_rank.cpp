#include "dist_rank.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace splitkv::dist_tools {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

}  // namespace

RankEnv join_ranks() {
  RankEnv env;
  env.rank = env_int("SPLITKV_DIST_RANK", 0);
  env.world = env_int("SPLITKV_DIST_WORLD", 1);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < env.world) {
    env.error = "needs " + std::to_string(env.world) + " GPU(s), found " + std::to_string(devices);
    return env;
  }
  if (cudaSetDevice(env.rank) != cudaSuccess) {
    env.error = "cannot use GPU " + std::to_string(env.rank);
    return env;
  }
  const char* file = std::getenv("SPLITKV_DIST_ID_FILE");
  if (env.world > 1 && file == nullptr) {
    env.error = "SPLITKV_DIST_ID_FILE not set (start the ranks with scripts/run_ranks.sh)";
    return env;
  }
  ncclUniqueId id;
  if (env.rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      env.error = "ncclGetUniqueId failed";
      return env;
    }
    if (env.world > 1) {  // write, then rename: a reader never sees half an id
      const std::string tmp = std::string(file) + ".tmp";
      std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof(id.internal));
      std::rename(tmp.c_str(), file);
    }
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      std::ifstream in(file, std::ios::binary);
      if (in.read(id.internal, sizeof(id.internal))) break;
      if (std::chrono::steady_clock::now() > deadline) {
        env.error = "no NCCL id in " + std::string(file) + " after 60 s";
        return env;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (ncclCommInitRank(&env.comm, env.world, id, env.rank) != ncclSuccess) env.error = "ncclCommInitRank failed";
  return env;
}

}  // namespace splitkv::dist_tools
