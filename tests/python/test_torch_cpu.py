"""The torch front on CPU tensors (runs wherever torch is installed, GPU or not): the operators'
registration (opcheck), torch.compile(fullgraph=True), and the flash-attn compat front, bit for
bit equal to the native call. CPU tensors run on the CPU backend (decode) and the reference
(prefill)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import splitkv  # noqa: E402
from conftest import assert_close_to_reference  # noqa: E402
from splitkv.compat.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402


def decode_inputs(batch=2, q_len=3, hq=8, hkv=2, d=64, lens=(40, 9), page_size=0, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, q_len, hq, d, generator=g).to(dtype)
    lens_t = torch.tensor(lens, dtype=torch.int32)
    capacity = max(lens) + 5
    if page_size:
        pages = (capacity + page_size - 1) // page_size
        k = torch.randn(batch * pages + 2, page_size, hkv, d, generator=g).to(dtype)
        v = torch.randn(batch * pages + 2, page_size, hkv, d, generator=g).to(dtype)
        block_table = torch.randperm(batch * pages + 2, generator=g)[: batch * pages].view(batch, pages).to(torch.int32)
    else:
        k = torch.randn(batch, capacity, hkv, d, generator=g).to(dtype)
        v = torch.randn(batch, capacity, hkv, d, generator=g).to(dtype)
        block_table = None
    return q, k, v, lens_t, block_table


def bits(t):
    return t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t


def test_operators_are_registered():
    assert hasattr(torch.ops.splitkv, "decode_out")
    assert hasattr(torch.ops.splitkv, "prefill_out")
    schema = str(torch.ops.splitkv.decode_out.default._schema)
    assert "Tensor(a!) out" in schema and "Tensor(b!)? lse" in schema and "-> ()" in schema


@pytest.mark.parametrize("page_size", [0, 16])
def test_cpu_tensors_match_reference(page_size):
    q, k, v, lens, bt = decode_inputs(page_size=page_size)
    out, lse = splitkv.decode(q, k, v, lens, bt, causal=True, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(q, k, v, lens, bt, causal=True)
    assert out.dtype == torch.bfloat16 and lse.shape == (2, 8, 3)
    assert_close_to_reference(out.float().numpy(), lse.numpy(), ref_out, ref_lse, dtype="bf16")


def test_direct_op_call_equals_eager():
    q, k, v, lens, bt = decode_inputs(page_size=16)
    ref = splitkv.decode(q, k, v, lens, bt, causal=True, num_splits=3)
    out = torch.empty_like(q)
    torch.ops.splitkv.decode_out(q, k, v, lens, bt, out, None, None, True, None, 3, 0, 0, None)
    assert torch.equal(bits(out), bits(ref))


def test_opcheck_decode_and_prefill():
    q, k, v, lens, bt = decode_inputs(page_size=16)
    out = torch.empty_like(q)
    lse = torch.empty(2, 8, 3)
    torch.library.opcheck(torch.ops.splitkv.decode_out.default,
                          (q, k, v, lens, bt, out, lse, None, True, None, 2, 0, 0, None))
    qp = torch.randn(2, 5, 4, 64, dtype=torch.bfloat16)
    kp = torch.randn(2, 7, 2, 64, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.splitkv.prefill_out.default,
                          (qp, kp, kp, None, None, torch.empty_like(qp), torch.empty(2, 4, 5), None, None, None, True,
                           None, 0))


def test_compile_fullgraph():
    q, k, v, lens, bt = decode_inputs(page_size=16)

    def step(q, k, v, lens, bt):
        out, lse = splitkv.decode(q, k, v, lens, bt, causal=True, return_lse=True)
        return out.float() * 2, lse

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    out, lse = compiled(q, k, v, lens, bt)
    ref_out, ref_lse = step(q, k, v, lens, bt)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    lens2 = torch.tensor([17, 40], dtype=torch.int32)  # new lengths, same graph
    assert torch.equal(compiled(q, k, v, lens2, bt)[0], step(q, k, v, lens2, bt)[0])


def test_compile_prefill_fullgraph():
    q = torch.randn(9, 4, 64, dtype=torch.bfloat16)
    k = torch.randn(12, 2, 64, dtype=torch.bfloat16)
    cu_q = torch.tensor([0, 4, 9], dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 12], dtype=torch.int32)

    def f(q, k, cu_q, cu_k):
        return splitkv.prefill(q, k, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=5, max_seqlen_k=7,
                               causal=True, return_lse=True)

    out, lse = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, cu_q, cu_k)
    ref_out, ref_lse = f(q, k, cu_q, cu_k)
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)
    assert lse.shape == (4, 9)


def test_prefill_cpu_matches_numpy_path():
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 6, 4, 64, generator=g).half()
    k = torch.randn(2, 8, 2, 64, generator=g).half()
    v = torch.randn(2, 8, 2, 64, generator=g).half()
    out, lse = splitkv.prefill(q, k, v, causal=True, return_lse=True)
    np_out, np_lse = splitkv.prefill(q.numpy(), k.numpy(), v.numpy(), causal=True, return_lse=True)
    assert np.array_equal(out.numpy().view(np.uint16), np_out.view(np.uint16))
    assert np.array_equal(lse.numpy(), np_lse)


def test_device_and_dtype_errors():
    q, k, v, lens, bt = decode_inputs()
    with pytest.raises(ValueError, match=r"'seq_lens.dtype': expected int32, got int64"):
        splitkv.decode(q, k, v, lens.long())
    with pytest.raises(ValueError, match=r"'k.dtype': expected bf16, got fp16"):
        splitkv.decode(q, k.half(), v, lens)
    with pytest.raises(ValueError, match=r"'q.dtype': expected fp16 or bf16, got float64"):
        splitkv.decode(q.double(), k, v, lens)
    with pytest.raises(ValueError, match=r"'seq_lens': expected an int32 tensor on the device of q, got list"):
        splitkv.decode(q, k, v, [40, 9])


# ---- flash-attn compat ----------------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [0, 16])
def test_kvcache_compat_is_bitwise_native(page_size):
    q, k, v, lens, bt = decode_inputs(page_size=page_size, q_len=2)
    native, native_lse = splitkv.decode(q, k, v, lens, bt, causal=True, return_lse=True)
    out, lse = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, block_table=bt, causal=True,
                                       return_softmax_lse=True)
    assert torch.equal(bits(out), bits(native)) and torch.equal(lse, native_lse)
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1])  # flash-attn: [B, H, Sq]
    only_out = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, block_table=bt, causal=True)
    assert torch.equal(bits(only_out), bits(native))


def test_kvcache_compat_int_and_default_seqlens():
    q, k, v, _, _ = decode_inputs(lens=(20, 20))
    a = flash_attn_with_kvcache(q, k, v, cache_seqlens=20)
    b = splitkv.decode(q, k, v, torch.tensor([20, 20], dtype=torch.int32))
    assert torch.equal(bits(a), bits(b))
    full = flash_attn_with_kvcache(q, k, v)  # None: the whole cache
    c = splitkv.decode(q, k, v, torch.full((2,), k.shape[1], dtype=torch.int32))
    assert torch.equal(bits(full), bits(c))


@pytest.mark.parametrize("page_size", [0, 16])
def test_kvcache_compat_appends_new_tokens(page_size):
    q, k_cache, v_cache, lens, bt = decode_inputs(page_size=page_size, q_len=3, lens=(30, 7))
    k_new = torch.randn(2, 3, 2, 64).to(torch.bfloat16)
    v_new = torch.randn(2, 3, 2, 64).to(torch.bfloat16)
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    for b in range(2):  # what flash-attn does: new tokens at positions lens[b] .. lens[b] + 2
        for j in range(3):
            pos = int(lens[b]) + j
            if bt is None:
                k_ref[b, pos], v_ref[b, pos] = k_new[b, j], v_new[b, j]
            else:
                page, slot = int(bt[b, pos // page_size]), pos % page_size
                k_ref[page, slot], v_ref[page, slot] = k_new[b, j], v_new[b, j]
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=lens, block_table=bt,
                                  causal=True)
    assert torch.equal(bits(k_cache), bits(k_ref)) and torch.equal(bits(v_cache), bits(v_ref))
    native = splitkv.decode(q, k_ref, v_ref, lens + 3, bt, causal=True)
    assert torch.equal(bits(out), bits(native))
    assert torch.equal(lens, torch.tensor([30, 7], dtype=torch.int32)), "cache_seqlens itself is not changed"


def test_varlen_compat_is_bitwise_native():
    q = torch.randn(9, 4, 64).half()
    k = torch.randn(12, 2, 64).half()
    v = torch.randn(12, 2, 64).half()
    cu_q = torch.tensor([0, 4, 9], dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 12], dtype=torch.int32)
    native, native_lse = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=5,
                                         max_seqlen_k=7, causal=True, return_lse=True)
    out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, causal=True)
    assert torch.equal(bits(out), bits(native))
    out2, lse, s_dmask = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, causal=True, return_attn_probs=True)
    assert torch.equal(bits(out2), bits(native)) and torch.equal(lse, native_lse) and s_dmask is None
    assert lse.shape == (4, 9)  # flash-attn varlen: [H, total_q]


@pytest.mark.parametrize("kwargs,argument", [
    (dict(rotary_cos=1), "rotary_cos"),
    (dict(rotary_sin=1), "rotary_sin"),
    (dict(cache_batch_idx=1), "cache_batch_idx"),
    (dict(cache_leftpad=1), "cache_leftpad"),
    (dict(alibi_slopes=1), "alibi_slopes"),
])
def test_kvcache_compat_unsupported_arguments(kwargs, argument):
    q, k, v, lens, _ = decode_inputs()
    with pytest.raises(NotImplementedError, match=f"'{argument}'") as e:
        flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kwargs)
    assert e.value.argument == argument


def test_kvcache_compat_other_limits():
    q, k, v, lens, _ = decode_inputs()
    with pytest.raises(NotImplementedError, match=r"'q.shape\[1\]'"):
        flash_attn_with_kvcache(torch.zeros(2, 17, 8, 64, dtype=torch.bfloat16), k, v, cache_seqlens=lens)
    with pytest.raises(NotImplementedError, match="'head_dim'"):
        z = torch.zeros(2, 1, 8, 96, dtype=torch.bfloat16)
        flash_attn_with_kvcache(z, torch.zeros(2, 8, 2, 96, dtype=torch.bfloat16),
                                torch.zeros(2, 8, 2, 96, dtype=torch.bfloat16), cache_seqlens=4)
    with pytest.raises(NotImplementedError, match="'q.requires_grad'"):
        flash_attn_with_kvcache(q.float().requires_grad_().bfloat16(), k, v, cache_seqlens=lens)
    with torch.no_grad():
        flash_attn_with_kvcache(q.float().requires_grad_().bfloat16(), k, v, cache_seqlens=lens)


@pytest.mark.parametrize("kwargs,argument", [
    (dict(dropout_p=0.1), "dropout_p"),
    (dict(alibi_slopes=1), "alibi_slopes"),
])
def test_varlen_compat_unsupported_arguments(kwargs, argument):
    q = torch.zeros(4, 2, 64, dtype=torch.half)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match=f"'{argument}'"):
        flash_attn_varlen_func(q, q, q, cu, cu, 4, 4, **kwargs)


def test_combine_cpu_and_opcheck():
    g = torch.Generator().manual_seed(2)
    po = torch.randn(3, 4, 2, 64, generator=g)
    pl = torch.randn(3, 4, 2, generator=g)
    pl[:, 3] = float("-inf")  # a row with no keys in any split
    pl[1, 0] = float("-inf")  # an empty partial
    out, lse = splitkv.combine(po, pl, seq_len=2, dtype=torch.float16, return_lse=True)
    np_out, np_lse = splitkv.combine(po.numpy(), pl.numpy(), seq_len=2, return_lse=True)
    assert out.shape == (2, 2, 2, 64) and lse.shape == (2, 2, 2)
    assert np.array_equal(out.numpy().view(np.uint16), np_out.view(np.uint16))
    assert torch.equal(lse, torch.from_numpy(np_lse))
    assert (out[1, 1] == 0).all() and torch.isneginf(lse[1, :, 1]).all()
    torch.library.opcheck(torch.ops.splitkv.combine_out.default,
                          (po, pl, torch.empty(2, 2, 2, 64, dtype=torch.bfloat16), torch.empty(2, 2, 2)))


def test_family_option_reaches_the_plan():
    q, k, v, lens, bt = decode_inputs()
    name = splitkv.plan_decode(q, k, v, lens, bt).family
    assert splitkv.plan_decode(q, k, v, lens, bt, family=name).family == name
    a = splitkv.decode(q, k, v, lens, bt, family=name)
    assert torch.equal(bits(a), bits(splitkv.decode(q, k, v, lens, bt)))
    with pytest.raises(ValueError, match="'options.family'"):
        splitkv.decode(q, k, v, lens, bt, family="no_such_family")


# ---- quantized KV caches on CPU tensors (the CPU backend) -------------------------------------------


@pytest.mark.parametrize("fmt", ["fp8", "int8", "int4", "k8v4"])
@pytest.mark.parametrize("page_size", [0, 16])
def test_quantized_cache_cpu_tensors_match_numpy_path(fmt, page_size):
    q, k, v, lens, bt = decode_inputs(page_size=page_size, dtype=torch.float16, seed=3)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, fmt)
    assert kc.device.type == "cpu" and ks.device.type == "cpu"
    assert kc.dtype == (torch.float8_e4m3fn if fmt == "fp8" else torch.uint8)
    assert vc.shape[-1] == (32 if fmt in ("int4", "k8v4") else 64)
    out, lse = splitkv.decode(q, kc, vc, lens, bt, causal=True, num_splits=2, return_lse=True, kv_format=fmt,
                              k_scales=ks, v_scales=vs)
    # The numpy path over the same bytes (fp8 codes as uint8), and the quantizer on numpy input.
    kn, vn = kc.view(torch.uint8).numpy(), vc.view(torch.uint8).numpy()
    np_out, np_lse = splitkv.decode(q.numpy(), kn, vn, lens.numpy(), None if bt is None else bt.numpy(), causal=True,
                                    num_splits=2, return_lse=True, kv_format=fmt, k_scales=ks.numpy(),
                                    v_scales=vs.numpy())
    assert np.array_equal(out.numpy().view(np.uint16), np_out.view(np.uint16))
    assert np.array_equal(lse.numpy(), np_lse)
    np_codes = splitkv.quantize_kv(k.numpy(), v.numpy(), fmt)
    assert np.array_equal(np_codes[0], kn) and np.array_equal(np_codes[1], vn)
    # The reference over the same cache, and the dequantized values through torch.
    ref_out, ref_lse = splitkv.reference.decode(q, kc, vc, lens, bt, causal=True, kv_format=fmt, k_scales=ks,
                                                v_scales=vs)
    assert_close_to_reference(out.float().numpy(), lse.numpy(), ref_out, ref_lse)
    kd, vd = splitkv.dequantize_kv(kc, vc, fmt, ks, vs)
    assert kd.dtype == torch.float32 and kd.shape == k.shape
    assert torch.equal(kd, torch.from_numpy(splitkv.dequantize_kv(kn, vn, fmt, ks.numpy(), vs.numpy())[0]))


def test_quantized_decode_operator():
    q, k, v, lens, bt = decode_inputs(page_size=16)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, "int8")
    schema = str(torch.ops.splitkv.decode_out.default._schema)
    assert "Tensor? k_scales=None, Tensor? v_scales=None, str? kv_format=None" in schema
    assert "str? kv_format=None" in str(torch.ops.splitkv.prefill_out.default._schema)
    ref = splitkv.decode(q, kc, vc, lens, bt, causal=True, kv_format="int8", k_scales=ks, v_scales=vs)
    out = torch.empty_like(q)
    torch.ops.splitkv.decode_out(q, kc, vc, lens, bt, out, None, None, True, None, 0, 0, 0, None, None, ks, vs, "int8")
    assert torch.equal(bits(out), bits(ref))
    torch.library.opcheck(torch.ops.splitkv.decode_out.default,
                          (q, kc, vc, lens, bt, torch.empty_like(q), torch.empty(2, 8, 3), None, True, None, 2, 0, 0,
                           None, None, ks, vs, "int8"))

    def step(q, kc, vc, lens, bt, ks, vs):
        return splitkv.decode(q, kc, vc, lens, bt, causal=True, kv_format="int8", k_scales=ks, v_scales=vs)

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    assert torch.equal(bits(compiled(q, kc, vc, lens, bt, ks, vs)), bits(ref))


def test_quantized_cache_errors_on_torch_tensors():
    q, k, v, lens, bt = decode_inputs(page_size=16)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, "int4")
    with pytest.raises(ValueError, match=r"^splitkv: invalid argument 'k_scales': expected float16 \(scale, min\) "
                                         r"pairs \[blocks, Hkv, slots, 2\] for an int4 cache, got None$"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int4", v_scales=vs)
    with pytest.raises(ValueError, match=r"'v_scales.dtype': expected .*, got float64"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int4", k_scales=ks, v_scales=vs.double())
    with pytest.raises(ValueError, match=r"'k_scales.dtype': expected fp16, got fp32"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int4", k_scales=ks.float(), v_scales=vs)
    with pytest.raises(ValueError, match=r"'k.dtype': expected uint8 int4 codes .*, got int8"):
        splitkv.decode(q, kc.view(torch.int8), vc, lens, bt, kv_format="int4", k_scales=ks, v_scales=vs)
    with pytest.raises(ValueError, match=r"'v.shape\[3\]': expected 32 bytes"):
        splitkv.decode(q, kc, torch.zeros(v.shape, dtype=torch.uint8), lens, bt, kv_format="int4", k_scales=ks,
                       v_scales=vs)
    with pytest.raises(ValueError, match=r"'k_scales': expected empty for a bf16 cache"):
        splitkv.decode(q, k, v, lens, bt, k_scales=ks, v_scales=vs)


# ---- append_kv on CPU tensors (the host quantizer) ---------------------------------------------------


def append_scenario(fmt, page_size, device="cpu", dtype=torch.bfloat16, lens=(40, 9), hkv=2, d=64, seed=0):
    """Caches filled token by token with append_kv, and the host-quantized cache of the same values.
    Returns (q, lens, block_table, appended (k, v, k_scales, v_scales), reference (same), slots)."""
    g = torch.Generator().manual_seed(seed)
    batch = len(lens)
    capacity = max(lens) + 5
    q = torch.randn(batch, 2, 4 * hkv, d, generator=g).to(dtype)
    if page_size:
        pages = (capacity + page_size - 1) // page_size
        shape = (batch * pages + 2, page_size, hkv, d)
        bt = torch.randperm(shape[0], generator=g)[: batch * pages].view(batch, pages).to(torch.int32)
    else:
        shape = (batch, capacity, hkv, d)
        bt = None
    k = torch.randn(shape, generator=g).to(dtype)
    v = torch.randn(shape, generator=g).to(dtype)
    slots = []
    for b, n in enumerate(lens):
        for t in range(n):
            slots.append(int(bt[b, t // page_size]) * page_size + t % page_size if page_size else b * capacity + t)
    slots = torch.tensor(slots, dtype=torch.int32)
    rows = slots.long()
    k_new, v_new = k.flatten(0, 1)[rows], v.flatten(0, 1)[rows]
    if fmt is None:
        reference = (k, v, None, None)
        appended = (torch.zeros_like(k), torch.zeros_like(v), None, None)
    else:
        reference = splitkv.quantize_kv(k, v, fmt)
        kc, vc, ks, vs = (torch.zeros_like(t) if t.dim() == 4 else t.clone() for t in reference)
        appended = (kc, vc, ks, vs)
    move = lambda t: None if t is None else t.to(device)  # noqa: E731
    return (move(q), move(torch.tensor(lens, dtype=torch.int32)), move(bt), tuple(move(t) for t in appended),
            tuple(move(t) for t in reference), move(k_new), move(v_new), move(slots))


def written_rows_equal(appended, reference, slots, per_block):
    rows = slots.long().cpu()
    for a, r in zip(appended[:2], reference[:2]):
        a8, r8 = a.cpu().view(torch.uint8), r.cpu().view(torch.uint8)
        if not torch.equal(a8.flatten(0, 1)[rows], r8.flatten(0, 1)[rows]):
            return False
    for a, r in zip(appended[2:], reference[2:]):
        if a is None or a.dim() == 1:
            continue
        a16, r16 = a.cpu().view(torch.int16), r.cpu().view(torch.int16)
        block, pos = rows // per_block, rows % per_block
        if not torch.equal(a16[block, :, pos], r16[block, :, pos]):
            return False
    return True


@pytest.mark.parametrize("fmt", [None, "fp8", "int8", "int4", "k8v4"])
@pytest.mark.parametrize("page_size", [0, 16])
def test_append_kv_cpu_round_trip(fmt, page_size):
    q, lens, bt, appended, reference, k_new, v_new, slots = append_scenario(fmt, page_size)
    kc, vc, ks, vs = appended
    slots = slots.long() if page_size else slots  # int64 (vLLM's slot mapping) or int32
    splitkv.append_kv(k_new, v_new, kc, vc, slots, k_scales=ks, v_scales=vs, kv_format=fmt)
    assert written_rows_equal(appended, reference, slots, kc.shape[1])
    kw = dict(causal=True, return_lse=True, kv_format=fmt)
    out, lse = splitkv.decode(q, kc, vc, lens, bt, k_scales=ks, v_scales=vs, **kw)
    ref_out, ref_lse = splitkv.decode(q, *reference[:2], lens, bt, k_scales=reference[2], v_scales=reference[3], **kw)
    assert torch.equal(bits(out), bits(ref_out)) and torch.equal(lse, ref_lse)


def test_append_kv_skips_invalid_slots_and_is_an_operator():
    q, lens, bt, appended, reference, k_new, v_new, slots = append_scenario("int8", 16)
    kc, vc, ks, vs = appended
    before = [t.clone() for t in appended]
    skip = slots.clone()
    skip[:] = -1
    skip[1] = kc.shape[0] * kc.shape[1]  # one past the last row
    splitkv.append_kv(k_new, v_new, kc, vc, skip, k_scales=ks, v_scales=vs, kv_format="int8")
    assert all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(appended, before))
    schema = str(torch.ops.splitkv.append_kv.default._schema)
    assert "Tensor(a!) k_cache, Tensor(b!) v_cache" in schema and "Tensor(c!)? k_scales=None" in schema
    torch.library.opcheck(torch.ops.splitkv.append_kv.default, (k_new, v_new, kc, vc, slots, ks, vs, "int8"))

    def step(k_new, v_new, kc, vc, slots, ks, vs, q, lens, bt):
        splitkv.append_kv(k_new, v_new, kc, vc, slots, k_scales=ks, v_scales=vs, kv_format="int8")
        return splitkv.decode(q, kc, vc, lens, bt, causal=True, kv_format="int8", k_scales=ks, v_scales=vs)

    fresh = [torch.zeros_like(t) for t in appended]
    out = torch.compile(step, fullgraph=True, backend="aot_eager")(k_new, v_new, fresh[0], fresh[1], slots, fresh[2],
                                                                   fresh[3], q, lens, bt)
    assert written_rows_equal(fresh, reference, slots, kc.shape[1])
    ref = splitkv.decode(q, *reference[:2], lens, bt, causal=True, kv_format="int8", k_scales=reference[2],
                         v_scales=reference[3])
    assert torch.equal(bits(out), bits(ref))


def test_append_kv_errors():
    q, lens, bt, appended, reference, k_new, v_new, slots = append_scenario("int4", 16)
    kc, vc, ks, vs = appended
    with pytest.raises(ValueError, match=r"'v_scales': expected float16 \(scale, min\) pairs"):
        splitkv.append_kv(k_new, v_new, kc, vc, slots, k_scales=ks, kv_format="int4")
    with pytest.raises(ValueError, match=r"'slots': expected int64 or int32 \[\d+\], got float32"):
        splitkv.append_kv(k_new, v_new, kc, vc, slots.float(), k_scales=ks, v_scales=vs, kv_format="int4")
    with pytest.raises(ValueError, match=r"'k_cache.dtype': expected uint8 int4 codes"):
        splitkv.append_kv(k_new, v_new, kc.view(torch.int8), vc, slots, k_scales=ks, v_scales=vs, kv_format="int4")
    with pytest.raises(ValueError, match=r"'k_cache.shape': expected \[blocks, slots, 2, 64\], got \[\d+, 16, 2, 32\]"):
        splitkv.append_kv(k_new, v_new, kc, vc, slots, k_scales=ks, v_scales=vs, kv_format="k8v4")
    with pytest.raises(ValueError, match=r"'k_cache'"):
        splitkv.append_kv(k_new, v_new, kc.numpy(), vc, slots, k_scales=ks, v_scales=vs, kv_format="int4")


def test_append_kv_fp8_bad_scale_writes_nan_codes():
    _, _, _, (kc, vc, ks, vs), reference, k_new, v_new, slots = append_scenario("fp8", 16)
    ks[1] = 0.0  # not positive: that head's rows become NaN codes, the other head is quantized
    vs[0] = float("inf")
    splitkv.append_kv(k_new, v_new, kc, vc, slots, k_scales=ks, v_scales=vs, kv_format="fp8")
    rows = slots.long()
    k_rows, v_rows = kc.view(torch.uint8).flatten(0, 1)[rows], vc.view(torch.uint8).flatten(0, 1)[rows]
    assert (k_rows[:, 1] == 0x7F).all() and (v_rows[:, 0] == 0x7F).all()
    assert torch.equal(k_rows[:, 0], reference[0].view(torch.uint8).flatten(0, 1)[rows][:, 0])
    assert torch.equal(v_rows[:, 1], reference[1].view(torch.uint8).flatten(0, 1)[rows][:, 1])


# ---- shards of a context (decode_shard) ----------------------------------------------------------


def test_decode_shard_plans_on_the_decode_kernels_where_decode_takes_the_prefill_route():
    # 28/4 heads, q_len 8, 16 KV heads x 4102 slots: decode's plan is chunked prefill, which on the
    # GPU takes no keys_after and writes no partials; decode_shard's partials carry the decode
    # kernels' split count.
    q, k, v, lens, bt = decode_inputs(batch=4, q_len=8, hq=28, hkv=4, d=128, lens=(4097, 9, 0, 20), seed=7)
    routed = splitkv.plan_decode(q, k, v, lens, bt, causal=True)
    if not routed.decode_via_prefill:
        pytest.skip("this build lacks prefill_sm90_gqa64 for bf16 at D=128, so no route to keep off")
    kernels = splitkv.plan_decode(q, k, v, lens, bt, causal=True, prefill_route=False)
    assert not kernels.decode_via_prefill and kernels.num_splits != routed.num_splits
    po, pl = splitkv.decode_shard(q, k, v, lens, bt, keys_after=torch.zeros(4, dtype=torch.int32), causal=True)
    assert po.shape[0] == kernels.num_splits
    out, lse = splitkv.combine(po, pl, seq_len=8, dtype=torch.bfloat16, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(q, k, v, lens, bt, causal=True)
    assert_close_to_reference(out.float().numpy(), lse.numpy(), ref_out, ref_lse, dtype="bf16")


def test_decode_shard_partials_merge_to_decode_and_opcheck():
    q, k, v, lens, bt = decode_inputs(q_len=4, lens=(40, 9), page_size=16, seed=5)
    cut = torch.tensor([32, 0], dtype=torch.int32)  # sequence 0: keys [0, 32) and [32, 40); 1: all in the second
    table1 = bt.clone()
    table1[0, : bt.shape[1] - 2] = bt[0, 2:]
    first = splitkv.decode_shard(q, k, v, cut, bt, keys_after=lens - cut, causal=True, num_splits=2, max_seqlen_k=40)
    second = splitkv.decode_shard(q, k, v, lens - cut, table1, causal=True, max_seqlen_k=40)
    out, lse = splitkv.combine(torch.cat([first[0], second[0]]), torch.cat([first[1], second[1]]), seq_len=4,
                               dtype=torch.bfloat16, return_lse=True)
    ref_out, ref_lse = splitkv.reference.decode(q, k, v, lens, bt, causal=True)
    assert_close_to_reference(out.float().numpy(), lse.numpy(), ref_out, ref_lse, dtype="bf16")
    po, pl = first
    torch.library.opcheck(torch.ops.splitkv.decode_shard_out.default,
                          (q, k, v, cut, bt, lens - cut, torch.empty_like(po), torch.empty_like(pl), True, None, 2,
                           0, 0, 40))
