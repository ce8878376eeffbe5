// Every family's tile shapes, read through the tile summaries the kernel registry names by the
// planner (host): heuristics and kernels can never disagree about block sizes or shared-memory use.
// Each family keeps its shapes in its own folder; a kernel's traits include only its own.
#pragma once

#include "kernels/combine/combine_tile.hpp"
#include "kernels/common/tile_summary.hpp"
#include "kernels/decode/decode_tile.hpp"
#include "kernels/decode_quant/decode_quant_tile.hpp"
#include "kernels/prefill/prefill_tile.hpp"
#include "kernels/prefill_sm90/prefill_sm90_tile.hpp"
