"""Shared helpers of the Python tests: an independent fp64 attention in numpy, random cases and
capability checks. The numpy path needs neither torch nor a GPU (CI runs it); torch tests skip
without torch, GPU tests without CUDA."""

import math

import numpy as np
import pytest

import splitkv


def has_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def has_cuda():
    if not has_torch():
        return False
    import torch

    return torch.cuda.is_available()


def gpu_present():
    """Whether the extension sees a GPU (independent of torch)."""
    try:
        splitkv.query_device(0)
    except splitkv.NoDeviceError:
        return False
    return True


def family_compiled(family, kv_format, head_dim):
    """Whether this build compiled kernel family `family` for a KV format (its name) at head_dim."""
    fmt = splitkv._common.kv_format(kv_format)
    return any(c.head_dim == head_dim and c.kv_format == fmt
               for f in splitkv.kernel_families() if f.name == family for c in f.compiled)


def visible_keys(causal, q_len, kv_len, i):
    if not causal:
        return kv_len
    return min(max(kv_len - q_len + i + 1, 0), kv_len)


def attention_np(q, k, v, causal, scale=None):
    """One sequence in fp64: q [Lq, Hq, D], k/v [Lk, Hkv, D] -> out [Lq, Hq, D], lse [Hq, Lq].
    Bottom-right causal; rows that see no key give 0 and -inf."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lq, hq, d = q.shape
    lk, hkv = k.shape[0], k.shape[1]
    group = hq // hkv
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = np.zeros((lq, hq, d))
    lse = np.full((hq, lq), -np.inf)
    for h in range(hq):
        kh, vh = k[:, h // group], v[:, h // group]
        for i in range(lq):
            n = visible_keys(causal, lq, lk, i)
            if n == 0:
                continue
            s = kh[:n] @ q[i, h] * scale
            m = s.max()
            p = np.exp(s - m)
            out[i, h] = p @ vh[:n] / p.sum()
            lse[h, i] = m + math.log(p.sum())
    return out, lse


def gather_pages(cache, block_table_row, length):
    """Tokens [0, length) of a paged cache [pages, page_size, H, D] in order."""
    page_size = cache.shape[1]
    pages = [cache[p] for p in block_table_row[: (length + page_size - 1) // page_size]]
    if not pages:
        return cache[:0, 0]
    return np.concatenate(pages, axis=0)[:length]


def decode_expected(q, k, v, seq_lens, block_table, causal, scale=None):
    """Independent fp64 decode: out [B, Lq, Hq, D], lse [B, Hq, Lq]."""
    b_count = q.shape[0]
    outs, lses = [], []
    for b in range(b_count):
        n = int(seq_lens[b])
        if block_table is None:
            kb, vb = k[b, :n], v[b, :n]
        else:
            kb, vb = gather_pages(k, block_table[b], n), gather_pages(v, block_table[b], n)
        o, l = attention_np(q[b], kb, vb, causal, scale)
        outs.append(o)
        lses.append(l)
    return np.stack(outs), np.stack(lses)


class DecodeCase:
    """Random decode inputs (fp16 numpy). Unused cache slots and pages hold NaN: a kernel that
    reads past a length or a wrong page turns the output NaN."""

    def __init__(self, batch=2, q_len=1, hq=8, hkv=2, d=64, lens=(37, 5), page_size=0, extra_pages=3, seed=0,
                 dtype=np.float16, q_scale=1.0):
        rng = np.random.default_rng(seed)
        self.lens = np.asarray(lens, dtype=np.int32)
        assert len(self.lens) == batch
        self.q = (rng.standard_normal((batch, q_len, hq, d)) * q_scale).astype(dtype)
        capacity = max(int(self.lens.max()), 1)
        if page_size:
            max_pages = (capacity + page_size - 1) // page_size
            num_pages = batch * max_pages + extra_pages
            self.k = np.full((num_pages, page_size, hkv, d), np.nan, dtype=dtype)
            self.v = np.full((num_pages, page_size, hkv, d), np.nan, dtype=dtype)
            perm = rng.permutation(num_pages).astype(np.int32)
            self.block_table = perm[: batch * max_pages].reshape(batch, max_pages).copy()
            for b in range(batch):
                n = int(self.lens[b])
                for t in range(n):
                    page, slot = self.block_table[b, t // page_size], t % page_size
                    self.k[page, slot] = rng.standard_normal((hkv, d)).astype(dtype)
                    self.v[page, slot] = rng.standard_normal((hkv, d)).astype(dtype)
        else:
            capacity += 3
            self.k = np.full((batch, capacity, hkv, d), np.nan, dtype=dtype)
            self.v = np.full((batch, capacity, hkv, d), np.nan, dtype=dtype)
            for b in range(batch):
                n = int(self.lens[b])
                self.k[b, :n] = rng.standard_normal((n, hkv, d)).astype(dtype)
                self.v[b, :n] = rng.standard_normal((n, hkv, d)).astype(dtype)
            self.block_table = None

    def args(self):
        return self.q, self.k, self.v, self.lens, self.block_table


def assert_close_to_reference(out, lse, ref_out, ref_lse, dtype=np.float16):
    """Output rounded to `dtype` from fp32 arithmetic: within one ulp of the fp64 value (plus a
    small absolute term); LSE (fp32) within 1e-4; rows without keys exactly 0 and -inf."""
    ulp = 2.0 ** -10 if dtype == np.float16 else 2.0 ** -7
    out = np.asarray(out, dtype=np.float64)
    assert not np.isnan(out).any(), "NaN in the output"
    err = np.abs(out - ref_out)
    bound = np.abs(ref_out) * ulp + 1e-4
    assert (err <= bound).all(), f"max error {err.max():.3g} (worst excess {(err - bound).max():.3g})"
    if lse is not None:
        lse = np.asarray(lse, dtype=np.float64)
        empty = np.isneginf(ref_lse)
        assert np.array_equal(np.isneginf(lse), empty), "rows without keys must have LSE = -inf"
        assert np.abs(lse[~empty] - ref_lse[~empty]).max(initial=0.0) <= 1e-4


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
