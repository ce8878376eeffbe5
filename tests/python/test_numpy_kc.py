"""Keys-per-channel caches (int8_kc, int4_kc, k8v4_kc; docs/KV_FORMATS.md) through the numpy front:
splitkv.quantize_kv_kc builds the cache with the host definition, splitkv.decode reads it on the CPU
backend. On keys with outlier channels, as real models' keys have, int4_kc stays close to exact
attention where the per-token int4 cache does not."""

import numpy as np
import pytest

import splitkv


def exact(q, k, v, lens, causal=False):
    """fp64 attention over the unquantized values."""
    batch, q_len, hq, d = q.shape
    hkv = k.shape[2]
    out = np.zeros(q.shape)
    for b in range(batch):
        n = int(lens[b])
        for i in range(q_len):
            visible = n - q_len + i + 1 if causal else n
            for h in range(hq):
                s = k[b, :visible, h // (hq // hkv)].astype(np.float64) @ q[b, i, h].astype(np.float64) / np.sqrt(d)
                if visible == 0:
                    continue
                w = np.exp(s - s.max())
                out[b, i, h] = w @ v[b, :visible, h // (hq // hkv)].astype(np.float64) / w.sum()
    return out


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


def case(outliers, lens=(700, 130, 5), q_len=1, seed=0):
    rng = np.random.default_rng(seed)
    batch, hq, hkv, d, length = len(lens), 8, 2, 64, max(lens)
    q = rng.standard_normal((batch, q_len, hq, d)).astype(np.float16)
    k = rng.standard_normal((batch, length, hkv, d)).astype(np.float32)
    v = rng.standard_normal((batch, length, hkv, d)).astype(np.float32)
    if outliers:
        k[..., [3, 19, 35, 51]] *= 20.0
    return q, k.astype(np.float16), v.astype(np.float16), np.asarray(lens, dtype=np.int32)


@pytest.mark.parametrize("fmt,bound", [("int8_kc", 0.03), ("k8v4_kc", 0.2), ("int4_kc", 0.25)])
def test_decode_over_a_kc_cache_is_close_to_exact_attention(fmt, bound):
    q, k, v, lens = case(outliers=False)
    k_codes, v_codes, k_scales, v_scales, k_tail = splitkv.quantize_kv_kc(k, v, fmt, seq_lens=lens)
    out = splitkv.decode(q, k_codes, v_codes, lens, kv_format=fmt, k_scales=k_scales, v_scales=v_scales,
                         k_tail=k_tail, num_splits=3)
    assert rel_l2(out, exact(q, k, v, lens)) < bound


def test_int4_kc_holds_up_on_outlier_channels_where_int4_does_not():
    q, k, v, lens = case(outliers=True)
    ref = exact(q, k, v, lens)
    k_codes, v_codes, k_scales, v_scales, k_tail = splitkv.quantize_kv_kc(k, v, "int4_kc", seq_lens=lens)
    kc = splitkv.decode(q, k_codes, v_codes, lens, kv_format="int4_kc", k_scales=k_scales, v_scales=v_scales,
                        k_tail=k_tail)
    k_codes, v_codes, k_scales, v_scales = splitkv.quantize_kv(k, v, "int4")
    per_token = splitkv.decode(q, k_codes, v_codes, lens, kv_format="int4", k_scales=k_scales, v_scales=v_scales)
    assert rel_l2(kc, ref) < 0.3 < rel_l2(per_token, ref)


def test_the_tail_holds_the_newest_keys_exactly():
    # One sequence of 40 keys: no group is complete, every key is read from the 16-bit tail.
    q, k, v, lens = case(outliers=True, lens=(40,))
    k_codes, v_codes, k_scales, v_scales, k_tail = splitkv.quantize_kv_kc(k, v, "int8_kc", seq_lens=lens)
    assert np.isnan(k_scales.astype(np.float32)).all()  # no group written
    assert (k_tail[0, :, :40].astype(np.float32) == k[0, :40].transpose(1, 0, 2)).all()
    out = splitkv.decode(q, k_codes, v_codes, lens, kv_format="int8_kc", k_scales=k_scales, v_scales=v_scales,
                         k_tail=k_tail)
    assert rel_l2(out, exact(q, k, v, lens)) < 0.03  # only the int8 values' error


def test_kc_arguments_are_named():
    q, k, v, lens = case(outliers=False, lens=(100,))
    k_codes, v_codes, k_scales, v_scales, k_tail = splitkv.quantize_kv_kc(k, v, "int4_kc")
    with pytest.raises(splitkv.InvalidArgumentError) as e:
        splitkv.decode(q, k_codes, v_codes, lens, kv_format="int4_kc", k_scales=k_scales, v_scales=v_scales)
    assert e.value.argument.startswith("k_tail")
    with pytest.raises(splitkv.InvalidArgumentError) as e:
        splitkv.quantize_kv_kc(k, v, "int4")
    assert e.value.argument == "kv_format"
    # A tail slot outside the tail: NaN in that sequence (device data on a GPU; the CPU backend agrees).
    out = splitkv.decode(q, k_codes, v_codes, lens, kv_format="int4_kc", k_scales=k_scales, v_scales=v_scales,
                         k_tail=k_tail, tail_slots=np.array([5], dtype=np.int32))
    assert np.isnan(out.astype(np.float32)).all()
