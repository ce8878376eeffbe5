"""The numpy path of splitkv.prefill (the fp64 reference, rounded to the input dtype), padded and
varlen, against an independent numpy implementation."""

import numpy as np
import pytest

import splitkv
from conftest import assert_close_to_reference, attention_np


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(7, 7), (5, 19), (19, 5)])
def test_padded(causal, lq, lk, rng):
    b, hq, hkv, d = 2, 8, 2, 64
    q = rng.standard_normal((b, lq, hq, d)).astype(np.float16)
    k = rng.standard_normal((b, lk, hkv, d)).astype(np.float16)
    v = rng.standard_normal((b, lk, hkv, d)).astype(np.float16)
    out, lse = splitkv.prefill(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == np.float16
    assert lse.shape == (b, hq, lq) and lse.dtype == np.float32
    exp = [attention_np(q[i], k[i], v[i], causal) for i in range(b)]
    exp_out = np.stack([e[0] for e in exp])
    exp_lse = np.stack([e[1] for e in exp])
    assert_close_to_reference(out, lse, exp_out, exp_lse)
    ref_out, ref_lse = splitkv.reference.prefill(q, k, v, causal=causal)
    np.testing.assert_allclose(ref_out, exp_out, atol=1e-6, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen(causal, rng):
    hq, hkv, d = 4, 2, 128
    q_lens, k_lens = [3, 0, 9, 1], [3, 4, 20, 0]
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], hq, d)).astype(np.float16)
    k = rng.standard_normal((cu_k[-1], hkv, d)).astype(np.float16)
    v = rng.standard_normal((cu_k[-1], hkv, d)).astype(np.float16)
    out, lse = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal, return_lse=True)
    assert out.shape == q.shape and lse.shape == (hq, cu_q[-1])
    exp_out = np.zeros(q.shape)
    exp_lse = np.full((hq, cu_q[-1]), -np.inf)
    for b in range(len(q_lens)):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        o, l = attention_np(q[qs], k[ks], v[ks], causal)
        exp_out[qs], exp_lse[:, qs] = o, l
    assert_close_to_reference(out, lse, exp_out, exp_lse)
    # Lists work as cu_seqlens too, and given bounds give the same result.
    out2 = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q.tolist(), cu_seqlens_k=cu_k.tolist(), max_seqlen_q=9,
                           max_seqlen_k=20, causal=causal)
    assert np.array_equal(out, out2)


def test_out_argument_and_scale(rng):
    q = rng.standard_normal((1, 4, 2, 64)).astype(np.float16)
    k = rng.standard_normal((1, 6, 2, 64)).astype(np.float16)
    v = rng.standard_normal((1, 6, 2, 64)).astype(np.float16)
    out = np.empty_like(q)
    assert splitkv.prefill(q, k, v, softmax_scale=0.05, out=out) is out
    exp_out, _ = attention_np(q[0], k[0], v[0], False, scale=0.05)
    assert_close_to_reference(out[0], None, exp_out, None)
