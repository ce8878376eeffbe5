// The host's record of which plan last prepared, and which plan last used, each workspace: the
// cheap part of the workspace contract (docs/CONTRACTS.md). The fused and atomic merges keep
// arrival counters and accumulators in the workspace between calls; they are right only if
// prepare_workspace zeroed them for this plan and no other plan's call wrote the workspace since.
// Every run records its plan on its workspace; a fused or atomic run refuses a workspace that was
// not prepared for its plan since another plan last used it. (What the host cannot see, a
// workspace written by other code or used by two streams at once, stays the caller's contract.)
#pragma once

#include <cstdint>

namespace splitkv::detail {

// prepare_workspace(plan) zeroed the merge's state in `workspace` for the plan with this seal.
void note_workspace_prepared(const void* workspace, uint64_t seal);

// A call of the plan with this seal is about to use `workspace`: true when the workspace is ready
// for a merge that keeps state (prepared for this plan, no other plan's call since); records the use.
bool note_workspace_use(const void* workspace, uint64_t seal);

}  // namespace splitkv::detail
