"""Quantized KV caches on the host (CI, no GPU): the host quantizer through splitkv.quantize_kv,
its dequantization against an independent numpy decoder of docs/KV_FORMATS.md (bit for bit),
the CPU backend over quantized caches against numpy fp64 attention over the values the cache
stands for, and the errors for bad codes and scales, each naming its argument."""

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase, assert_close_to_reference, decode_expected

FORMATS = ["fp8", "int8", "int4", "k8v4"]
SIDES = {"fp8": ("fp8", "fp8"), "int8": ("int8", "int8"), "int4": ("int4", "int4"), "k8v4": ("int8", "int4")}


# ---- an independent decoder of the formats (docs/KV_FORMATS.md) ---------------------------------

def _e4m3_values():
    table = np.empty(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 15 and m == 7:
            table[code] = np.nan
        elif e == 0:
            table[code] = sign * m / 8 * 2.0 ** -6
        else:
            table[code] = sign * (1 + m / 8) * 2.0 ** (e - 7)
    return table


E4M3 = _e4m3_values()


def dequantize_np(codes, scales, side):
    """fp32 values [blocks, slots, Hkv, D] of one side of a quantized cache, as the format defines
    them: fp8 fl32(scale * e4m3(code)); int fl32(scale16 * q + min16) (the product is exact)."""
    if side == "fp8":
        return np.float32(1) * scales.astype(np.float32)[None, None, :, None] * E4M3[codes]
    if side == "int4":
        q = np.stack([codes & 0x0F, codes >> 4], axis=-1).reshape(codes.shape[:-1] + (2 * codes.shape[-1],))
    else:
        q = codes
    pairs = scales.astype(np.float32).transpose(0, 2, 1, 3)  # [blocks, slots, Hkv, 2]
    return pairs[..., 0:1] * q.astype(np.float32) + pairs[..., 1:2]


def same_bits(a, b):
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and np.array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan])


def quantized_case(fmt, page_size=16, q_len=1, lens=(37, 5, 0), hq=8, hkv=2, d=64, seed=0):
    c = DecodeCase(batch=len(lens), q_len=q_len, hq=hq, hkv=hkv, d=d, lens=lens, page_size=page_size, seed=seed)
    k_codes, v_codes, k_scales, v_scales = splitkv.quantize_kv(c.k, c.v, fmt)
    k_side, v_side = SIDES[fmt]
    k_values = dequantize_np(k_codes, k_scales, k_side)
    v_values = dequantize_np(v_codes, v_scales, v_side)
    return c, (k_codes, v_codes, k_scales, v_scales), (k_values, v_values)


# ---- the quantizer and its dequantization -----------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("page_size", [0, 16])
def test_dequantize_kv_is_the_format_bit_for_bit(fmt, page_size):
    c, (kc, vc, ks, vs), (k_np, v_np) = quantized_case(fmt, page_size)
    k_dtype = np.uint8
    assert kc.dtype == k_dtype and vc.dtype == k_dtype
    d = c.k.shape[3]
    for codes, side in ((kc, SIDES[fmt][0]), (vc, SIDES[fmt][1])):
        assert codes.shape == c.k.shape[:3] + ((d // 2,) if side == "int4" else (d,))
    if fmt == "fp8":
        assert ks.dtype == np.float32 and ks.shape == (c.k.shape[2],)
    else:
        assert ks.dtype == np.float16 and ks.shape == (c.k.shape[0], c.k.shape[2], c.k.shape[1], 2)
    k, v = splitkv.dequantize_kv(kc, vc, fmt, ks, vs)
    assert k.dtype == np.float32 and k.shape == c.k.shape
    assert same_bits(k, k_np) and same_bits(v, v_np)
    # Poisoned (NaN) slots stay NaN, written rows are finite.
    written = ~np.isnan(c.k.astype(np.float32))
    assert np.isfinite(k[written]).all() and np.isnan(k[~written]).all()


@pytest.mark.parametrize("side", ["int8", "int4"])
def test_int_rows_within_the_documented_error(side, rng):
    x = (rng.standard_normal((3, 16, 2, 128)) * rng.uniform(0.1, 20.0, (3, 16, 2, 1))).astype(np.float16)
    x[0, 3, 1, 7] = 30.0  # an outlier
    x[1, 2, 0, :] = 1.25  # a constant row
    fmt = side
    kc, vc, ks, vs = splitkv.quantize_kv(x, x, fmt)
    assert np.array_equal(kc, vc) and np.array_equal(ks.view(np.uint16), vs.view(np.uint16))
    n = 255 if side == "int8" else 15
    q = kc if side == "int8" else np.stack([kc & 15, kc >> 4], -1).reshape(x.shape)
    assert q.max() <= n
    deq = dequantize_np(kc, ks, side)
    xf = x.astype(np.float32)
    pairs = ks.astype(np.float64).transpose(0, 2, 1, 3)
    scale, min16 = pairs[..., 0:1], pairs[..., 1:2]
    bound = scale / 2 + np.abs(xf.min(axis=-1, keepdims=True) - min16) + 1e-3 * np.abs(xf).max()
    assert (np.abs(deq - xf) <= bound).all()
    assert (deq[1, 2, 0] == np.float32(1.25)).all() and ks[1, 0, 2, 0] == 0  # constant row: scale 0
    # The largest code reaches the row's maximum (the scale is rounded up).
    assert (min16 + n * scale >= xf.max(axis=-1, keepdims=True)).all()


def test_fp8_scales_default_and_given(rng):
    x = rng.standard_normal((2, 16, 4, 64)).astype(np.float16)
    x[..., 1, :] *= 100.0
    x[..., 3, :] = 0.0
    kc, vc, ks, vs = splitkv.quantize_kv(x, x, "fp8")
    amax = np.abs(x.astype(np.float32)).max(axis=(0, 1, 3))
    expected = np.where(amax > 0, amax / np.float32(448.0), np.float32(1.0)).astype(np.float32)
    assert np.array_equal(ks, expected) and np.array_equal(vs, expected)
    assert np.abs(dequantize_np(kc, ks, "fp8") - x.astype(np.float32)).max() <= 0.07 * np.abs(x).max()
    kc2, _, ks2, vs2 = splitkv.quantize_kv(x, x, "fp8", k_scale=0.5, v_scale=[1.0, 2.0, 3.0, 4.0])
    assert np.array_equal(ks2, np.full(4, 0.5, np.float32)) and np.array_equal(vs2, np.float32([1, 2, 3, 4]))
    assert same_bits(splitkv.dequantize_kv(kc2, kc2, "fp8", ks2, ks2)[0], dequantize_np(kc2, ks2, "fp8"))


def test_quantizer_is_deterministic_and_reads_strided_views(rng):
    x = rng.standard_normal((2, 32, 4, 64)).astype(np.float16)
    view = x[:, ::2, 1:3]  # strided slots and heads
    a = splitkv.quantize_kv(view, view, "k8v4")
    b = splitkv.quantize_kv(np.ascontiguousarray(view), np.ascontiguousarray(view), "k8v4")
    for u, w in zip(a, b):
        assert np.array_equal(u.view(np.uint8), w.view(np.uint8))


# ---- the CPU backend over quantized caches ----------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("page_size", [0, 16])
@pytest.mark.parametrize("q_len,num_splits", [(1, 1), (1, 3), (4, 2)])
def test_cpu_backend_over_quantized_cache(fmt, page_size, q_len, num_splits):
    c, (kc, vc, ks, vs), (k_np, v_np) = quantized_case(fmt, page_size, q_len=q_len, lens=(300, 41, 0),
                                                         seed=q_len + page_size)
    causal = q_len > 1
    out, lse = splitkv.decode(c.q, kc, vc, c.lens, c.block_table, causal=causal, num_splits=num_splits,
                              return_lse=True, kv_format=fmt, k_scales=ks, v_scales=vs)
    exp_out, exp_lse = decode_expected(c.q, k_np, v_np, c.lens, c.block_table, causal)
    assert_close_to_reference(out, lse, exp_out, exp_lse)
    assert (out[2] == 0).all() and np.isneginf(lse[2]).all()
    # The fp64 reference reads the same values.
    ref_out, ref_lse = splitkv.reference.decode(c.q, kc, vc, c.lens, c.block_table, causal=causal, kv_format=fmt,
                                                k_scales=ks, v_scales=vs)
    np.testing.assert_allclose(ref_out, exp_out, atol=1e-6, rtol=0)
    finite = np.isfinite(exp_lse)
    assert np.array_equal(finite, np.isfinite(ref_lse))
    np.testing.assert_allclose(ref_lse[finite], exp_lse[finite], atol=1e-6, rtol=0)


def test_quantized_cache_is_not_read_as_values():
    c, (kc, vc, ks, vs), _ = quantized_case("int8", 16, lens=(200, 30, 7))
    out = splitkv.decode(c.q, kc, vc, c.lens, c.block_table, kv_format="int8", k_scales=ks, v_scales=vs)
    native = splitkv.decode(c.q, c.k, c.v, c.lens, c.block_table)
    err = np.abs(out.astype(np.float64) - native.astype(np.float64)).max()
    assert 0 < err < 0.05  # close to the 16-bit cache, not equal to it


def test_strided_code_views_equal_dense_copies():
    c = DecodeCase(batch=2, q_len=2, hq=8, hkv=4, d=64, lens=(70, 33), page_size=16, seed=5)
    kc, vc, ks, vs = splitkv.quantize_kv(c.k, c.v, "k8v4")
    q = c.q[:, :, ::2]  # 4 query heads on KV heads 0 and 2
    views = (kc[:, :, ::2], vc[:, :, ::2], ks[:, ::2], vs[:, ::2])
    dense = tuple(np.ascontiguousarray(a) for a in views)
    a = splitkv.decode(q, views[0], views[1], c.lens, c.block_table, kv_format="k8v4", k_scales=views[2],
                       v_scales=views[3], causal=True, num_splits=2)
    b = splitkv.decode(q, dense[0], dense[1], c.lens, c.block_table, kv_format="k8v4", k_scales=dense[2],
                       v_scales=dense[3], causal=True, num_splits=2)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_fp8_codes_as_float8_dtype():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    c, (kc, vc, ks, vs), _ = quantized_case("fp8", 16)
    a = splitkv.decode(c.q, kc, vc, c.lens, c.block_table, kv_format="fp8", k_scales=ks, v_scales=vs)
    b = splitkv.decode(c.q, kc.view(ml_dtypes.float8_e4m3fn), vc.view(ml_dtypes.float8_e4m3fn), c.lens,
                       c.block_table, kv_format="fp8", k_scales=ks, v_scales=vs)
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_plans_name_the_format():
    plan = splitkv.plan_decode(batch=4, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=8192,
                               page_size=16, kv_format="int4", device="h200")
    assert plan.decode.kv_format == splitkv.KvFormat.int4
    assert "kv_format=int4" in str(plan).splitlines()[0]
    c, (kc, vc, ks, vs), _ = quantized_case("fp8", 16)
    from_arrays = splitkv.plan_decode(c.q, kc, vc, c.lens, c.block_table, kv_format="fp8")
    assert from_arrays.decode.kv_format == splitkv.KvFormat.fp8_e4m3


# ---- errors -------------------------------------------------------------------------------------

def _check(info, argument):
    assert isinstance(info.value, splitkv.Error) and info.value.argument == argument, str(info.value)


def test_missing_and_misshaped_scales_are_named():
    c, (kc, vc, ks, vs), _ = quantized_case("int8", 16)
    args = (c.q, kc, vc, c.lens, c.block_table)
    with pytest.raises(ValueError) as info:
        splitkv.decode(*args, kv_format="int8", v_scales=vs)
    _check(info, "k_scales")
    assert str(info.value) == ("splitkv: invalid argument 'k_scales': expected float16 (scale, min) pairs "
                               "[blocks, Hkv, slots, 2] for an int8 cache, got None")
    with pytest.raises(ValueError) as info:
        splitkv.decode(*args, kv_format="int8", k_scales=ks)
    _check(info, "v_scales")
    with pytest.raises(ValueError) as info:
        splitkv.decode(*args, kv_format="int8", k_scales=ks.astype(np.float32), v_scales=vs)
    _check(info, "k_scales.dtype")
    assert str(info.value) == "splitkv: invalid argument 'k_scales.dtype': expected fp16, got fp32"
    with pytest.raises(ValueError) as info:
        splitkv.decode(*args, kv_format="int8", k_scales=ks, v_scales=vs.astype(np.float64))
    _check(info, "v_scales.dtype")
    with pytest.raises(ValueError) as info:
        splitkv.decode(*args, kv_format="int8", k_scales=ks, v_scales=vs[:, :, :8])
    _check(info, "v_scales.shape[2]")
    assert str(info.value) == "splitkv: invalid argument 'v_scales.shape[2]': expected 16, got 8"
    with pytest.raises(ValueError) as info:  # the (scale, min) pair must be contiguous
        splitkv.decode(*args, kv_format="int8", k_scales=np.ascontiguousarray(ks[..., ::-1])[..., ::-1], v_scales=vs)
    _check(info, "k_scales.stride[3]")

    f, (fk, fv, fks, fvs), _ = quantized_case("fp8", 0)
    fargs = (f.q, fk, fv, f.lens, None)
    with pytest.raises(ValueError) as info:
        splitkv.decode(*fargs, kv_format="fp8", k_scales=fks, v_scales=np.ones(3, np.float32))
    _check(info, "v_scales.shape[0]")
    with pytest.raises(ValueError) as info:
        splitkv.decode(*fargs, kv_format="fp8", k_scales=fks.astype(np.float16), v_scales=fvs)
    _check(info, "k_scales.dtype")
    assert str(info.value) == "splitkv: invalid argument 'k_scales.dtype': expected fp32, got fp16"
    with pytest.raises(ValueError) as info:  # a 16-bit cache has no scales
        splitkv.decode(f.q, f.k, f.v, f.lens, k_scales=fks, v_scales=fvs)
    _check(info, "k_scales")
    with pytest.raises(ValueError) as info:
        splitkv.reference.decode(*fargs, kv_format="fp8", k_scales=fks)
    _check(info, "v_scales")


def test_code_tensors_are_checked():
    c, (kc, vc, ks, vs), _ = quantized_case("int4", 16)
    with pytest.raises(ValueError) as info:  # values where codes are expected
        splitkv.decode(c.q, c.k, c.v, c.lens, c.block_table, kv_format="int4", k_scales=ks, v_scales=vs)
    _check(info, "k.dtype")
    assert "uint8 int4 codes" in str(info.value) and str(info.value).endswith("got float16")
    wide = np.zeros(c.k.shape, dtype=np.uint8)  # D bytes: int4 holds D / 2
    with pytest.raises(ValueError) as info:
        splitkv.decode(c.q, kc, wide, c.lens, c.block_table, kv_format="int4", k_scales=ks, v_scales=vs)
    _check(info, "v.shape[3]")
    assert str(info.value) == ("splitkv: invalid argument 'v.shape[3]': expected 32 bytes (int4 codes of "
                               "head_dim 64, two a byte), got 64 bytes")
    with pytest.raises(ValueError) as info:  # k8v4: int8 keys, int4 values
        splitkv.decode(c.q, kc, vc, c.lens, c.block_table, kv_format="k8v4", k_scales=ks, v_scales=vs)
    _check(info, "k.shape[3]")
    with pytest.raises(ValueError) as info:
        splitkv.decode(c.q, kc, vc, c.lens, c.block_table, kv_format="int3", k_scales=ks, v_scales=vs)
    _check(info, "kv_format")


def test_unsupported_formats_raise_not_implemented_with_the_cpp_message():
    c = DecodeCase(batch=1, q_len=1, hq=4, hkv=2, d=64, lens=(20,))
    with pytest.raises(NotImplementedError) as info:  # a 16-bit cache holds the Q/O dtype
        splitkv.decode(*c.args(), kv_format="bf16")
    _check(info, "kv_format")
    assert str(info.value) == ("splitkv: unsupported 'kv_format': a 16-bit cache must hold the Q/O dtype (fp16), "
                               "got bf16")
    explicit = splitkv.decode(*c.args(), kv_format="fp16")
    assert np.array_equal(explicit.view(np.uint16), splitkv.decode(*c.args()).view(np.uint16))
    q = np.zeros((1, 8, 4, 64), dtype=np.float16)
    with pytest.raises(NotImplementedError) as info:  # no prefill kernel reads quantized caches
        splitkv.prefill(q, q, q, kv_format="int8")
    _check(info, "kv_format")
    with pytest.raises(NotImplementedError) as info:
        splitkv.plan_prefill(batch=1, num_q_heads=4, num_kv_heads=4, head_dim=128, max_q_len=64, max_kv_len=64,
                             kv_format="fp8", device="h200")
    _check(info, "kv_format")


def test_quantizer_errors_are_named():
    x = np.zeros((1, 16, 2, 64), dtype=np.float16)
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x, x, "native")
    _check(info, "kv_format")
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x[..., :63], x[..., :63], "int4")
    _check(info, "k.shape[3]")
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x, x, "fp8", k_scale=[1.0, 0.0])
    _check(info, "k_scale[1]")
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x, x, "fp8", v_scale=[1.0, 2.0, 3.0])
    _check(info, "v_scale")
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x, x, "int8", k_scale=1.0)
    _check(info, "k_scale")
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x.astype(np.int32), x, "int8")
    _check(info, "k.dtype")
    with pytest.raises(ValueError) as info:
        splitkv.quantize_kv(x[0], x[0], "int8")
    _check(info, "k.rank")
    with pytest.raises(ValueError) as info:
        splitkv.dequantize_kv(np.zeros((1, 16, 2, 64), np.uint8), np.zeros((1, 16, 2, 64), np.uint8), "int8",
                              np.zeros((1, 2, 16, 2), np.float16), None)
    _check(info, "v_scales")
