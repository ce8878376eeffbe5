"""Attention variants through the numpy front (the CPU backend), against an fp64 numpy transcription
of docs/VARIANTS.md: sliding window, softcap, sinks, tree masks and their combination."""

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase, assert_close_to_reference


def expected(c, causal, window=(-1, -1), softcap=0.0, sinks=None, tree=None):
    """fp64 attention of every row under the variants' definitions."""
    q, k, v, lens, bt = c.args()
    batch, q_len, hq, d = q.shape
    hkv = k.shape[2]
    out = np.zeros((batch, q_len, hq, d))
    lse = np.full((batch, hq, q_len), -np.inf)
    for b in range(batch):
        n = int(lens[b])
        if bt is None:
            keys, values = k[b, :n].astype(np.float64), v[b, :n].astype(np.float64)
        else:
            ps = k.shape[1]
            rows = [(bt[b, t // ps], t % ps) for t in range(n)]
            keys = np.array([k[p, s] for p, s in rows], dtype=np.float64).reshape(n, hkv, d)
            values = np.array([v[p, s] for p, s in rows], dtype=np.float64).reshape(n, hkv, d)
        for i in range(q_len):
            pos = n - q_len + i
            seen = np.ones(n, dtype=bool)
            j = np.arange(n)
            if window[0] >= 0:
                seen &= j >= pos - window[0]
            if window[1] >= 0:
                seen &= j <= pos + window[1]
            drafts = j >= n - q_len
            if causal:
                seen &= (j <= pos) | (drafts if tree is not None else False)
            if tree is not None:
                bits = np.unpackbits(tree[b, i], bitorder="little")[:q_len]
                seen &= ~drafts | bits[np.clip(j - (n - q_len), 0, q_len - 1)].astype(bool)
            for h in range(hq):
                s = keys[:, h // (hq // hkv)] @ q[b, i, h].astype(np.float64) / np.sqrt(d)
                if softcap:
                    s = softcap * np.tanh(s / softcap)
                s = np.where(seen, s, -np.inf)
                sink = -np.inf if sinks is None else float(sinks[h])
                top = max(s.max(initial=-np.inf), sink)
                if top == -np.inf:
                    continue
                w = np.exp(s - top)
                total = w.sum() + (np.exp(sink - top) if sink > -np.inf else 0.0)
                out[b, i, h] = w @ values[:, h // (hq // hkv)] / total
                lse[b, h, i] = top + np.log(total)
    return out, lse


def random_tree(rng, batch, q_len):
    mask = np.zeros((batch, q_len, q_len), dtype=bool)
    for b in range(batch):
        parent = [-1] * q_len
        for i in range(q_len):
            parent[i] = int(rng.integers(-1, i)) if i > 0 else -1
            j = i
            while j >= 0:
                mask[b, i, j] = True
                j = parent[j]
    return np.packbits(mask, axis=-1, bitorder="little")


@pytest.mark.parametrize("page_size", [0, 16])
@pytest.mark.parametrize("variant", ["window", "softcap", "sinks", "tree", "all"])
def test_variants_match_their_definition(variant, page_size):
    rng = np.random.default_rng(7)
    c = DecodeCase(batch=3, q_len=4, hq=8, hkv=2, d=64, lens=(300, 6, 0), page_size=page_size, seed=3)
    kw = {}
    if variant in ("window", "all"):
        kw["window_size"] = (50, 0)
    if variant in ("softcap", "all"):
        kw["softcap"] = 2.0
    if variant in ("sinks", "all"):
        kw["sinks"] = rng.uniform(-2, 6, size=8).astype(np.float32)
    if variant in ("tree", "all"):
        kw["tree_mask"] = random_tree(rng, 3, 4)
    out, lse = splitkv.decode(*c.args(), causal=True, num_splits=3, return_lse=True, **kw)
    ref_out, ref_lse = expected(c, True, kw.get("window_size", (-1, -1)), kw.get("softcap", 0.0), kw.get("sinks"),
                                kw.get("tree_mask"))
    if "sinks" in kw:  # a row without keys: O = 0, LSE = its sink
        assert (out[2] == 0).all() and np.allclose(lse[2], kw["sinks"][:, None])
        ref_lse[2] = lse[2]
    assert_close_to_reference(out, lse, ref_out, ref_lse)


def test_bad_variants_are_named():
    c = DecodeCase(batch=1, q_len=2, hq=4, hkv=2, d=64, lens=(30,))
    with pytest.raises(splitkv.InvalidArgumentError) as e:
        splitkv.decode(*c.args(), causal=True, window_size=(-1, 3))
    assert e.value.argument == "window_right"
    with pytest.raises(splitkv.InvalidArgumentError) as e:
        splitkv.decode(*c.args(), softcap=-1.0)
    assert e.value.argument == "softcap"
    with pytest.raises(splitkv.InvalidArgumentError) as e:
        splitkv.decode(*c.args(), window_size=5)
    assert e.value.argument == "window_size"
    with pytest.raises(splitkv.InvalidArgumentError) as e:
        splitkv.decode(*c.args(), sinks=np.zeros(3, dtype=np.float32))
    assert e.value.argument.startswith("sinks")


def test_sinks_enter_once_when_shards_are_merged():
    """Two shards of each context attended without sinks, merged by combine(sinks=...), equal one
    call over the whole context with the sinks."""
    rng = np.random.default_rng(11)
    c = DecodeCase(batch=2, q_len=2, hq=8, hkv=2, d=64, lens=(400, 90), seed=5)
    sinks = rng.uniform(-1, 5, size=8).astype(np.float32)
    whole_out, whole_lse = splitkv.decode(*c.args(), causal=True, sinks=sinks, return_lse=True)
    q, k, v, lens, _ = c.args()
    cut = np.array([150, 40], dtype=np.int32)
    parts = []
    for lo, hi in ((np.zeros(2, np.int32), cut), (cut, lens)):
        ks = np.full_like(k, np.nan)
        vs = np.full_like(v, np.nan)
        for b in range(2):
            n = hi[b] - lo[b]
            ks[b, :n], vs[b, :n] = k[b, lo[b]:hi[b]], v[b, lo[b]:hi[b]]
        parts.append(splitkv.decode_shard(q, ks, vs, (hi - lo).astype(np.int32), keys_after=(lens - hi).astype(np.int32),
                                          causal=True))
    partial_o = np.concatenate([p[0] for p in parts])
    partial_lse = np.concatenate([p[1] for p in parts])
    out, lse = splitkv.combine(partial_o, partial_lse, seq_len=2, sinks=sinks, return_lse=True)
    np.testing.assert_allclose(out.astype(np.float64), whole_out.astype(np.float64), atol=2e-3, rtol=1e-2)
    np.testing.assert_allclose(lse, whole_lse, atol=1e-4)
    # The sink matters here: the merge without it is visibly different.
    _, plain_lse = splitkv.combine(partial_o, partial_lse, seq_len=2, return_lse=True)
    assert np.abs(plain_lse - whole_lse).max() > 1e-3


def test_prefill_variants_match_their_definition():
    """Padded prefill on the numpy front (the fp64 reference) with a window, a softcap and sinks."""
    rng = np.random.default_rng(2)
    b, lq, lk, hq, hkv, d = 2, 24, 60, 4, 2, 64
    q = rng.standard_normal((b, lq, hq, d)).astype(np.float16)
    k = rng.standard_normal((b, lk, hkv, d)).astype(np.float16)
    v = rng.standard_normal((b, lk, hkv, d)).astype(np.float16)
    sinks = rng.uniform(-2, 5, size=hq).astype(np.float32)
    out, lse = splitkv.prefill(q, k, v, causal=True, window_size=(10, 0), softcap=3.0, sinks=sinks, return_lse=True)
    want_lse = np.zeros((b, hq, lq))
    for bi in range(b):
        for i in range(lq):
            pos = lk - lq + i
            j = np.arange(lk)
            seen = (j <= pos) & (j >= pos - 10)
            for h in range(hq):
                s = k[bi, :, h // 2].astype(np.float64) @ q[bi, i, h].astype(np.float64) / 8.0
                s = np.where(seen, 3.0 * np.tanh(s / 3.0), -np.inf)
                top = max(s.max(), float(sinks[h]))
                w = np.exp(s - top)
                total = w.sum() + np.exp(float(sinks[h]) - top)
                want = w @ v[bi, :, h // 2].astype(np.float64) / total
                want_lse[bi, h, i] = top + np.log(total)
                np.testing.assert_allclose(out[bi, i, h].astype(np.float64), want, atol=2e-3, rtol=2e-3)
    np.testing.assert_allclose(lse, want_lse, atol=1e-5)
