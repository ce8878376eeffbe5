"""splitkv.prefill over a KV cache (seq_lens given: chunked prefill, one varlen call for a serving
step's prefill chunks and decode rows) on the numpy path (the fp64 reference), against an
independent numpy attention over each sequence's gathered keys. Unused cache slots hold NaN, so
reading past a length or through a wrong page shows."""

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase, assert_close_to_reference, attention_np, gather_pages

HQ, HKV, D = 8, 2, 64


def step_case(q_lens, lens, page_size, seed=0, dtype=np.float16):
    """A cache holding len[b] keys per sequence and varlen queries, q_lens[b] of them per sequence."""
    cache = DecodeCase(batch=len(lens), q_len=1, hq=HQ, hkv=HKV, d=D, lens=lens, page_size=page_size, seed=seed,
                       dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cu_q[-1]), HQ, D)).astype(dtype)
    return q, cu_q, cache


def expected(q, cu_q, k, v, lens, block_table, causal):
    out = np.zeros(q.shape)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for b, n in enumerate(lens):
        qs = slice(cu_q[b], cu_q[b + 1])
        if block_table is None:
            kb, vb = k[b, :n], v[b, :n]
        else:
            kb, vb = gather_pages(k, block_table[b], n), gather_pages(v, block_table[b], n)
        out[qs], lse[:, qs] = attention_np(q[qs], kb, vb, causal)
    return out, lse


# A serving step: decode rows (1 query), a speculative row (4), a chunk over a prefix (7 over 20),
# an empty row, a first chunk (4 over 4) and a chunk longer than its keys (5 over 3: two queries see
# no key and give 0, LSE -inf).
Q_LENS = [1, 4, 7, 0, 4, 5, 1]
LENS = [37, 20, 20, 9, 4, 3, 1]


@pytest.mark.parametrize("page_size", [0, 16, 32])
@pytest.mark.parametrize("causal", [True, False])
def test_mixed_step_over_a_cache(page_size, causal):
    q, cu_q, c = step_case(Q_LENS, LENS, page_size)
    out, lse = splitkv.prefill(q, c.k, c.v, cu_seqlens_q=cu_q, seq_lens=c.lens, block_table=c.block_table,
                               causal=causal, return_lse=True)
    assert out.shape == q.shape and lse.shape == (HQ, q.shape[0])
    exp_out, exp_lse = expected(q, cu_q, c.k, c.v, LENS, c.block_table, causal)
    assert_close_to_reference(out, lse, exp_out, exp_lse)
    # Lists work for the index arrays; a tighter max_seqlen_k gives the same answer.
    out2 = splitkv.prefill(q, c.k, c.v, cu_seqlens_q=cu_q.tolist(), seq_lens=c.lens.tolist(),
                           block_table=None if c.block_table is None else c.block_table.tolist(), causal=causal,
                           max_seqlen_k=max(LENS))
    assert np.array_equal(out, out2)


def test_padded_queries_over_a_cache():
    c = DecodeCase(batch=2, q_len=6, hq=HQ, hkv=HKV, d=D, lens=(30, 6), page_size=16, seed=4)
    out, lse = splitkv.prefill(c.q, c.k, c.v, seq_lens=c.lens, block_table=c.block_table, causal=True,
                               return_lse=True)
    assert lse.shape == (2, HQ, 6)
    for b in range(2):
        n = int(c.lens[b])
        o, l = attention_np(c.q[b], gather_pages(c.k, c.block_table[b], n), gather_pages(c.v, c.block_table[b], n),
                            True)
        assert_close_to_reference(out[b], lse[b], o, l)


@pytest.mark.parametrize("fmt", ["fp8", "int8", "int4", "k8v4"])
def test_quantized_cache(fmt):
    q, cu_q, c = step_case([3, 1, 6], [40, 17, 6], 16, seed=7)
    k = np.nan_to_num(c.k)  # the quantizer reads every slot
    v = np.nan_to_num(c.v)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, fmt)
    out, lse = splitkv.prefill(q, kc, vc, cu_seqlens_q=cu_q, seq_lens=c.lens, block_table=c.block_table,
                               causal=True, return_lse=True, kv_format=fmt, k_scales=ks, v_scales=vs)
    kd, vd = splitkv.dequantize_kv(kc, vc, fmt, ks, vs)
    exp_out, exp_lse = expected(q, cu_q, kd, vd, c.lens, c.block_table, True)
    assert_close_to_reference(out, lse, exp_out, exp_lse)


def test_bad_input_is_named():
    q, cu_q, c = step_case([2, 1], [20, 9], 16)
    kw = dict(cu_seqlens_q=cu_q, block_table=c.block_table, causal=True)
    with pytest.raises(ValueError, match="'cu_seqlens_k'"):
        splitkv.prefill(q, c.k, c.v, seq_lens=c.lens, cu_seqlens_k=cu_q, **kw)
    with pytest.raises(ValueError, match=r"'seq_lens\[1\]': expected a length in \[0, max_kv_len=16\]"):
        splitkv.prefill(q, c.k, c.v, seq_lens=np.array([16, 17], dtype=np.int32), max_seqlen_k=16, **kw)
    bad_pages = c.block_table.copy()
    bad_pages[1, 0] = c.k.shape[0]
    with pytest.raises(ValueError, match=r"'block_table\[1\]\[0\]'"):
        splitkv.prefill(q, c.k, c.v, seq_lens=c.lens, cu_seqlens_q=cu_q, block_table=bad_pages, causal=True)
    with pytest.raises(ValueError, match="'block_table'"):
        splitkv.prefill(q, c.k, c.v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_q, block_table=c.block_table)
    with pytest.raises(ValueError, match="'k_scales'"):
        splitkv.prefill(q, c.k, c.v, seq_lens=c.lens, k_scales=np.ones(2, np.float32), **kw)
