"""splitkv.decode_shard on host arrays (the CPU backend): the partials of every shard of a context,
concatenated in key order and merged by splitkv.combine, equal decode over the whole context."""

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase, assert_close_to_reference


def shard_args(c, lo, hi):
    """Shard [lo[b], hi[b]) of every sequence of a paged case: its lengths, block table and keys_after."""
    page = c.k.shape[1]
    lens = (hi - lo).astype(np.int32)
    table = np.zeros_like(c.block_table)
    for b in range(len(lens)):
        first = lo[b] // page
        table[b, : table.shape[1] - first] = c.block_table[b, first:]
    return lens, table, (c.lens - hi).astype(np.int32)


@pytest.mark.parametrize("q_len,num_splits", [(1, 0), (4, 3), (16, 1)])
def test_shards_merge_to_the_whole_context(q_len, num_splits):
    c = DecodeCase(batch=3, q_len=q_len, hq=8, hkv=2, d=64, lens=(300, 70, 0), page_size=16, seed=q_len)
    cuts = [np.zeros(3, np.int32), np.array([96, 64, 0], np.int32), np.array([208, 70, 0], np.int32), c.lens]
    partials = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        lens, table, after = shard_args(c, lo, hi)
        partials.append(splitkv.decode_shard(c.q, c.k, c.v, lens, table, keys_after=after, causal=True,
                                             num_splits=num_splits, max_seqlen_k=int(c.lens.max())))
    for o, lse in partials:
        assert o.dtype == np.float32 and o.shape[1:] == (3 * q_len, 8, 64) and lse.shape == o.shape[:3]
    all_o = np.concatenate([o for o, _ in partials])
    all_lse = np.concatenate([lse for _, lse in partials])
    out, lse = splitkv.combine(all_o, all_lse, seq_len=q_len, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=True)
    assert_close_to_reference(out, lse, ref_out, ref_lse)


def test_keys_after_is_checked_and_a_negative_one_gives_nan():
    c = DecodeCase(batch=2, q_len=2, hq=4, hkv=2, d=64, lens=(40, 20), page_size=16)
    with pytest.raises(ValueError, match="keys_after"):
        splitkv.decode_shard(*c.args(), keys_after=np.zeros(2, np.float32), causal=True)
    with pytest.raises(ValueError, match="keys_after"):
        splitkv.decode_shard(*c.args(), keys_after=[0, 0, 0], causal=True)
    o, lse = splitkv.decode_shard(*c.args(), keys_after=[3, -1], causal=True, num_splits=1)
    assert np.isfinite(o[0, :2]).all() and np.isnan(o[0, 2:]).all()  # rows b * q_len + i: sequence 1 is NaN
    assert np.isnan(lse[0, 2:]).all()


def test_a_shape_the_planner_routes_to_chunked_prefill_keeps_the_decode_kernels_as_a_shard():
    # 28/4 heads, q_len 8 (56 packed rows per KV head), 16 KV heads x 4097 keys: decode's plan is
    # chunked prefill (PlanOptions.prefill_route), which on the GPU takes no keys_after and writes no
    # partials; decode_shard plans on the decode kernels, whose split count its partials show (the
    # CPU backend would run either plan).
    c = DecodeCase(batch=4, q_len=8, hq=28, hkv=4, d=128, lens=(4097, 9, 0, 20), seed=5)
    routed = splitkv.plan_decode(*c.args(), causal=True)
    if not routed.decode_via_prefill:
        pytest.skip("this build lacks prefill_sm90_gqa64 for fp16 at D=128 (SPLITKV_DTYPES), so no route to keep off")
    kernels = splitkv.plan_decode(*c.args(), causal=True, prefill_route=False)
    assert not kernels.decode_via_prefill and kernels.num_splits != routed.num_splits
    o, lse = splitkv.decode_shard(*c.args(), keys_after=np.zeros(4, np.int32), causal=True)
    assert o.shape[0] == kernels.num_splits
    out, merged_lse = splitkv.combine(o, lse, seq_len=8, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=True)
    assert_close_to_reference(out, merged_lse, ref_out, ref_lse)
