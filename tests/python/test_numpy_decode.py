"""The numpy path of splitkv.decode (the CPU backend: split-KV partials + ordered combine in fp32)
against the fp64 reference, and the reference against an independent numpy implementation."""

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase, assert_close_to_reference, decode_expected


@pytest.mark.parametrize("page_size", [0, 16])
@pytest.mark.parametrize("q_len", list(range(1, 17)))
def test_causal_q_len_1_to_16_gqa(q_len, page_size):
    c = DecodeCase(batch=3, q_len=q_len, hq=8, hkv=2, d=64, lens=(40, 9, 0), page_size=page_size, seed=q_len)
    out, lse = splitkv.decode(*c.args(), causal=True, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=True)
    assert out.shape == c.q.shape and out.dtype == np.float16
    assert lse.shape == (3, 8, q_len) and lse.dtype == np.float32
    assert_close_to_reference(out, lse, ref_out, ref_lse)
    # Sequence 2 has no keys: zeros and -inf.
    assert (out[2] == 0).all() and np.isneginf(lse[2]).all()


@pytest.mark.parametrize("page_size", [0, 16, 64])
@pytest.mark.parametrize("num_splits", [1, 2, 5])
@pytest.mark.parametrize("hq,hkv,d", [(4, 4, 128), (8, 1, 64), (16, 4, 256)])
def test_paged_and_contiguous_splits_gqa(page_size, num_splits, hq, hkv, d):
    c = DecodeCase(batch=2, q_len=2, hq=hq, hkv=hkv, d=d, lens=(300, 77), page_size=page_size, seed=hq + d)
    for causal in (False, True):
        out, lse = splitkv.decode(*c.args(), causal=causal, num_splits=num_splits, return_lse=True)
        ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=causal)
        assert_close_to_reference(out, lse, ref_out, ref_lse)


def test_peaked_softmax_and_scale():
    c = DecodeCase(batch=2, q_len=4, hq=8, hkv=2, d=128, lens=(500, 130), page_size=32, seed=7, q_scale=6.0)
    out, lse = splitkv.decode(*c.args(), causal=True, softmax_scale=0.3, num_splits=4, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=True, softmax_scale=0.3)
    assert_close_to_reference(out, lse, ref_out, ref_lse)


def test_reference_matches_independent_numpy():
    for page_size, causal in [(0, False), (16, True), (32, False)]:
        c = DecodeCase(batch=3, q_len=5, hq=6, hkv=3, d=64, lens=(50, 3, 17), page_size=page_size, seed=page_size)
        ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=causal)
        exp_out, exp_lse = decode_expected(*c.args(), causal=causal)
        np.testing.assert_allclose(ref_out, exp_out, atol=1e-6, rtol=0)
        finite = np.isfinite(exp_lse)
        assert np.array_equal(finite, np.isfinite(ref_lse))
        np.testing.assert_allclose(ref_lse[finite], exp_lse[finite], atol=1e-6, rtol=0)


def test_bf16_via_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    c = DecodeCase(batch=2, q_len=3, hq=8, hkv=2, d=128, lens=(90, 33), page_size=16, dtype=ml_dtypes.bfloat16)
    out, lse = splitkv.decode(*c.args(), causal=True, return_lse=True)
    assert out.dtype == ml_dtypes.bfloat16
    ref_out, ref_lse = splitkv.reference.decode(*c.args(), causal=True)
    assert_close_to_reference(out.astype(np.float32), lse, ref_out, ref_lse, dtype="bf16")


def test_strided_views_and_out_argument():
    # q, k, v and out as views with padded head dims (rows 16-byte aligned, not contiguous).
    rng = np.random.default_rng(3)
    b, lq, hq, hkv, d, cap = 2, 2, 4, 2, 64, 70
    q_big = rng.standard_normal((b, lq, hq, d + 16)).astype(np.float16)
    k_big = rng.standard_normal((b, cap, hkv, d + 8)).astype(np.float16)
    v_big = rng.standard_normal((b, cap, hkv, d + 8)).astype(np.float16)
    q, k, v = q_big[..., :d], k_big[..., :d], v_big[..., :d]
    assert not q.flags.c_contiguous
    lens = np.array([70, 41], dtype=np.int32)
    out_big = np.full((b, lq, hq, d + 8), np.nan, dtype=np.float16)
    out = out_big[..., :d]
    result = splitkv.decode(q, k, v, lens, causal=True, out=out)
    assert result is out
    ref_out, _ = splitkv.reference.decode(np.ascontiguousarray(q), np.ascontiguousarray(k),
                                          np.ascontiguousarray(v), lens, causal=True)
    assert_close_to_reference(out, None, ref_out, None)
    assert np.isnan(out_big[..., d:]).all(), "padding next to out must stay untouched"


def test_lists_for_lengths_and_block_table():
    c = DecodeCase(batch=2, q_len=1, hq=4, hkv=4, d=64, lens=(20, 33), page_size=16)
    a = splitkv.decode(c.q, c.k, c.v, c.lens.tolist(), c.block_table.tolist())
    b = splitkv.decode(*c.args())
    assert np.array_equal(a, b)


def test_batch_invariant_split_tokens_bitwise():
    # With fixed split sizes a sequence's bits do not depend on its batch-mates.
    alone = DecodeCase(batch=1, q_len=2, hq=8, hkv=2, d=64, lens=(700,), seed=11)
    pair = DecodeCase(batch=2, q_len=2, hq=8, hkv=2, d=64, lens=(700, 3000), seed=12)
    pair.q[0] = alone.q[0]
    pair.k[0, :700] = alone.k[0, :700]
    pair.v[0, :700] = alone.v[0, :700]
    a = splitkv.decode(*alone.args(), causal=True, split_tokens=128)
    p = splitkv.decode(*pair.args(), causal=True, split_tokens=128)
    assert np.array_equal(a[0].view(np.uint16), p[0].view(np.uint16))


def test_deterministic_runs():
    c = DecodeCase(batch=2, q_len=4, hq=8, hkv=2, d=64, lens=(600, 250), page_size=16)
    a = splitkv.decode(*c.args(), causal=True, num_splits=6)
    b = splitkv.decode(*c.args(), causal=True, num_splits=6)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_max_seqlen_k_bounds_the_plan():
    c = DecodeCase(batch=2, q_len=1, hq=8, hkv=2, d=64, lens=(100, 60), page_size=16)
    plan = splitkv.plan_decode(c.q, c.k, c.v, c.lens, c.block_table, max_seqlen_k=100)
    assert plan.decode.max_kv_len == 100
    out = splitkv.decode(*c.args(), max_seqlen_k=100)
    ref_out, _ = splitkv.reference.decode(*c.args())
    assert_close_to_reference(out, None, ref_out, None)
    # Lengths above the bound are rejected on the host (the numpy path has host lengths).
    with pytest.raises(ValueError, match=r"'seq_lens\[0\]'"):
        splitkv.decode(*c.args(), max_seqlen_k=99)


def shard_partials(c, cut, causal=False):
    """Reference partials of keys [0, cut) and [cut, len) of every sequence (contiguous case),
    in run_combine's layout: o [2, B * Lq, H, D], lse [2, B * Lq, H]."""
    b, lq, hq, d = c.q.shape
    parts_o, parts_lse = [], []
    for lo, hi in ((0, cut), (cut, None)):
        k = np.ascontiguousarray(c.k[:, lo:hi])
        v = np.ascontiguousarray(c.v[:, lo:hi])
        lens = np.clip(c.lens - lo, 0, k.shape[1]).astype(np.int32) if hi is None else np.minimum(c.lens, cut)
        o, lse = splitkv.reference.decode(c.q, k, v, lens.astype(np.int32), causal=causal)
        parts_o.append(o.reshape(b * lq, hq, d))
        parts_lse.append(lse.transpose(0, 2, 1).reshape(b * lq, hq))
    return np.stack(parts_o).astype(np.float32), np.stack(parts_lse).astype(np.float32)


def test_combine_of_shards_is_the_whole():
    c = DecodeCase(batch=3, q_len=2, hq=4, hkv=2, d=64, lens=(100, 30, 0), seed=21)
    po, pl = shard_partials(c, 64)
    out, lse = splitkv.combine(po, pl, seq_len=2, return_lse=True)
    assert out.shape == c.q.shape and lse.shape == (3, 4, 2)
    ref_out, ref_lse = splitkv.reference.decode(*c.args())
    assert_close_to_reference(out, lse, ref_out, ref_lse)
    assert (out[2] == 0).all() and np.isneginf(lse[2]).all()
