"""The attention variants (docs/VARIANTS.md) and the keys-per-channel tail through the torch
front: CPU tensors bit for bit equal to the numpy front (the CPU backend, itself checked against
an fp64 transcription in test_numpy_variants.py); CUDA tensors against an fp64 torch transcription
of the variants; the operator's schema (opcheck), the flash-attn compat front's window_size /
softcap / s_aux, and the combine's sinks. Skips without torch; the CUDA half without a GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import splitkv  # noqa: E402
from splitkv import _splitkv as C  # noqa: E402
from splitkv.compat.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402
from conftest import family_compiled  # noqa: E402

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def bits(t):
    return t.view(torch.int16)


def inputs(device="cpu", dtype=torch.float16, batch=3, q_len=1, hq=8, hkv=2, d=64, lens=(300, 7, 129), page_size=0,
           seed=0):
    g = torch.Generator().manual_seed(seed)
    lens_t = torch.tensor(lens, dtype=torch.int32)
    capacity = max(lens) + 3
    q = torch.randn(batch, q_len, hq, d, generator=g)
    if page_size:
        pages = (capacity + page_size - 1) // page_size
        total = batch * pages + 2
        k = torch.randn(total, page_size, hkv, d, generator=g)
        v = torch.randn(total, page_size, hkv, d, generator=g)
        bt = torch.randperm(total, generator=g)[: batch * pages].view(batch, pages).to(torch.int32)
    else:
        k = torch.randn(batch, capacity, hkv, d, generator=g)
        v = torch.randn(batch, capacity, hkv, d, generator=g)
        bt = None
    sinks = torch.randn(hq, generator=g) * 2
    move = (lambda t: None if t is None else t.to(device))
    return (q.to(dtype).to(device), k.to(dtype).to(device), v.to(dtype).to(device), move(lens_t), move(bt),
            sinks.to(device))


def sequence_kv(k, v, bt, b, n):
    if bt is None:
        return k[b, :n], v[b, :n]
    ps = k.shape[1]
    pages = bt[b, : (n + ps - 1) // ps].long()
    return k[pages].flatten(0, 1)[:n], v[pages].flatten(0, 1)[:n]


def variants_reference(q, k, v, lens, bt, causal, window=(-1, -1), softcap=0.0, sinks=None):
    """fp64 attention under the variants' definitions: out [B, Lq, Hq, D], lse [B, Hq, Lq] (the sink
    joins the denominator; rows that see nothing and have no sink: 0 and -inf)."""
    batch, q_len, hq, d = q.shape
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full((batch, hq, q_len), float("-inf"), dtype=torch.float64)
    for b in range(batch):
        n = int(lens[b])
        kb, vb = (x.cpu().double() for x in sequence_kv(k, v, bt, b, n))
        group = hq // kb.shape[1]
        kb, vb = kb.repeat_interleave(group, 1), vb.repeat_interleave(group, 1)  # [n, Hq, D]
        j = torch.arange(n)
        for i in range(q_len):
            pos = n - q_len + i
            seen = torch.ones(n, dtype=torch.bool)
            if window[0] >= 0:
                seen &= j >= pos - window[0]
            if window[1] >= 0:
                seen &= j <= pos + window[1]
            if causal:
                seen &= j <= pos
            s = torch.einsum("hd,nhd->hn", q[b, i].cpu().double(), kb) / d ** 0.5
            if softcap:
                s = softcap * torch.tanh(s / softcap)
            s = s.masked_fill(~seen, float("-inf"))
            if sinks is not None:
                s = torch.cat([s, sinks.cpu().double()[:, None]], 1)
            top = s.max(1, keepdim=True).values
            live = torch.isfinite(top[:, 0])
            w = torch.where(live[:, None], torch.exp(s - torch.where(live[:, None], top, 0)), 0)
            total = w.sum(1)
            wk = w[:, :n]
            out[b, i] = torch.where(live[:, None], torch.einsum("hn,nhd->hd", wk, vb) / total[:, None], 0)
            lse[b, :, i] = torch.where(live, top[:, 0] + torch.log(total), float("-inf"))
    return out, lse


def assert_close(out, lse, ref_out, ref_lse, atol=2e-3):
    ulp = 2.0 ** -10 if out.dtype == torch.float16 else 2.0 ** -7
    out, lse = out.cpu().double(), lse.cpu().double()
    assert not torch.isnan(out).any(), "NaN in the output"
    err = (out - ref_out).abs()
    bound = ref_out.abs() * ulp + atol
    assert (err <= bound).all(), f"max error {err.max():.3g} (worst excess {(err - bound).max():.3g})"
    empty = torch.isneginf(ref_lse)
    assert torch.equal(torch.isneginf(lse), empty)
    assert (lse[~empty] - ref_lse[~empty]).abs().max() <= 1e-3


VARIANTS = [dict(window_size=(64, -1)), dict(window_size=(0, -1)), dict(softcap=3.0), dict(sinks=True),
            dict(window_size=(16, -1), softcap=5.0, sinks=True), dict(window_size=(100000, -1))]


def _call_kwargs(variant, sinks):
    kw = dict(variant)
    if kw.pop("sinks", False):
        kw["sinks"] = sinks
    return kw


# ---- CPU tensors: the CPU backend through the torch front --------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("q_len,causal,page_size", [(1, False, 0), (3, True, 16)])
def test_cpu_tensors_equal_the_numpy_front(variant, q_len, causal, page_size):
    q, k, v, lens, bt, sinks = inputs(q_len=q_len, page_size=page_size, seed=q_len)
    kw = _call_kwargs(variant, sinks)
    out, lse = splitkv.decode(q, k, v, lens, bt, causal=causal, return_lse=True, **kw)
    np_kw = {n: (x.numpy() if isinstance(x, torch.Tensor) else x) for n, x in kw.items()}
    np_out, np_lse = splitkv.decode(q.numpy(), k.numpy(), v.numpy(), lens.numpy(),
                                    None if bt is None else bt.numpy(), causal=causal, return_lse=True, **np_kw)
    assert np.array_equal(out.numpy().view(np.uint16), np_out.view(np.uint16))
    assert np.array_equal(lse.numpy(), np_lse)
    ref_out, ref_lse = variants_reference(q, k, v, lens, bt, causal, kw.get("window_size", (-1, -1)),
                                          kw.get("softcap", 0.0), kw.get("sinks"))
    assert_close(out, lse, ref_out, ref_lse)


def test_cpu_tree_mask_equals_the_numpy_front():
    q, k, v, lens, _, _ = inputs(q_len=4, seed=5)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    mask[2, 1] = False  # a draft tree: token 2 does not see token 1
    tree = np.packbits(np.broadcast_to(mask, (3, 4, 4)), axis=-1, bitorder="little")
    out = splitkv.decode(q, k, v, lens, causal=True, tree_mask=torch.from_numpy(tree))
    np_out = splitkv.decode(q.numpy(), k.numpy(), v.numpy(), lens.numpy(), causal=True, tree_mask=tree)
    assert np.array_equal(out.numpy().view(np.uint16), np_out.view(np.uint16))
    with pytest.raises(ValueError, match="'tree_mask.dtype'"):
        splitkv.decode(q, k, v, lens, causal=True, tree_mask=torch.from_numpy(tree).to(torch.int32))


def test_cpu_keys_per_channel_tail_equals_the_numpy_front():
    from splitkv.quant import quantize_kv_kc

    g = np.random.default_rng(7)
    lens = np.array([200, 70], dtype=np.int32)
    k = g.standard_normal((2, 256, 2, 64)).astype(np.float16)
    v = g.standard_normal((2, 256, 2, 64)).astype(np.float16)
    q = g.standard_normal((2, 1, 8, 64)).astype(np.float16)
    kc, vc, ks, vs, tail = quantize_kv_kc(k, v, "int4_kc", seq_lens=lens)
    ref = splitkv.decode(q, kc, vc, lens, kv_format="int4_kc", k_scales=ks, v_scales=vs, k_tail=tail)
    t = torch.from_numpy
    out = splitkv.decode(t(q), t(kc), t(vc), t(lens), kv_format="int4_kc", k_scales=t(ks), v_scales=t(vs),
                         k_tail=t(tail))
    assert np.array_equal(out.numpy().view(np.uint16), ref.view(np.uint16))
    out = splitkv.decode(t(q), t(kc), t(vc), t(lens), kv_format="int4_kc", k_scales=t(ks), v_scales=t(vs),
                         k_tail=t(tail), tail_slots=torch.tensor([0, 1], dtype=torch.int32))
    assert np.array_equal(out.numpy().view(np.uint16), ref.view(np.uint16))


def test_variants_reach_the_operator_and_opcheck():
    q, k, v, lens, bt, sinks = inputs(q_len=2, page_size=16, seed=2)
    ref = splitkv.decode(q, k, v, lens, bt, causal=True, window_size=(32, -1), softcap=4.0, sinks=sinks)
    out = torch.empty_like(q)
    torch.ops.splitkv.decode_out(q, k, v, lens, bt, out, None, None, True, None, 0, 0, 0, None, None, None, None,
                                 None, [32, -1], 4.0, sinks)
    assert torch.equal(bits(out), bits(ref))
    torch.library.opcheck(torch.ops.splitkv.decode_out.default,
                          (q, k, v, lens, bt, torch.empty_like(q), torch.empty(3, 8, 2), None, True, None, 0, 0, 0,
                           None, None, None, None, None, [32, -1], 4.0, sinks))


def test_compile_fullgraph_with_variants():
    q, k, v, lens, bt, sinks = inputs(q_len=2, page_size=16, seed=4)

    def step(q, k, v, lens, bt, sinks):
        return splitkv.decode(q, k, v, lens, bt, causal=True, window_size=(8, -1), softcap=2.0, sinks=sinks) * 2

    eager = step(q, k, v, lens, bt, sinks)
    compiled = torch.compile(step, fullgraph=True, backend="eager")(q, k, v, lens, bt, sinks)
    assert torch.equal(bits(compiled), bits(eager))


def test_bad_variant_values_are_named():
    q, k, v, lens, _, sinks = inputs()
    with pytest.raises(ValueError, match="'window_size'"):
        splitkv.decode(q, k, v, lens, window_size=(3,))
    with pytest.raises(ValueError, match="'window_size'"):
        splitkv.decode(q, k, v, lens, window_size="wide")
    with pytest.raises(ValueError, match="'softcap'"):
        splitkv.decode(q, k, v, lens, softcap=-1.0)
    with pytest.raises(ValueError, match="'sinks"):
        splitkv.decode(q, k, v, lens, sinks=sinks[:3])
    with pytest.raises(ValueError, match="'sinks"):
        splitkv.decode(q, k, v, lens, sinks=sinks.double())


def test_compat_kvcache_variants_equal_the_native_call():
    q, k, v, lens, bt, sinks = inputs(q_len=2, page_size=16, seed=6)
    ref = splitkv.decode(q, k, v, lens, bt, causal=True, window_size=(20, 0), softcap=6.0, sinks=sinks)
    out = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, block_table=bt, causal=True, window_size=(20, 0),
                                  softcap=6.0, s_aux=sinks)
    assert torch.equal(bits(out), bits(ref))


def test_combine_sinks_on_cpu_tensors_equal_the_host_merge():
    g = torch.Generator().manual_seed(3)
    po = torch.randn(3, 4, 2, 64, generator=g)
    pl = torch.randn(3, 4, 2, generator=g)
    pl[:, 3] = float("-inf")  # a row with no keys: the sink alone, out 0
    sinks = torch.tensor([0.5, -3.0])
    out, lse = splitkv.combine(po, pl, seq_len=2, dtype=torch.float16, return_lse=True, sinks=sinks)
    np_out, np_lse = splitkv.combine(po.numpy(), pl.numpy(), seq_len=2, return_lse=True, sinks=sinks.numpy())
    assert np.abs(out.numpy().astype(np.float64) - np_out.astype(np.float64)).max() <= 2 ** -10
    np.testing.assert_allclose(lse.numpy(), np_lse, rtol=0, atol=1e-6)
    assert (out[1, 1] == 0).all() and torch.equal(lse[1, :, 1], sinks)
    torch.library.opcheck(torch.ops.splitkv.combine_out.default,
                          (po, pl, torch.empty(2, 2, 2, 64, dtype=torch.bfloat16), torch.empty(2, 2, 2), sinks))


def prefill_reference(q, k, v, causal, window=(-1, -1), softcap=0.0, sinks=None):
    """Padded prefill [B, L, H, D] in fp64 through variants_reference (every key of k is in range)."""
    batch, lk = k.shape[0], k.shape[1]
    lens = torch.full((batch,), lk, dtype=torch.int32)
    return variants_reference(q, k, v, lens, None, causal, window, softcap, sinks)


PREFILL_VARIANTS = [dict(window_size=(32, 0)), dict(window_size=(16, 8)), dict(softcap=2.0),
                    dict(window_size=(20, 0), softcap=4.0)]


@pytest.mark.parametrize("variant", PREFILL_VARIANTS)
def test_cpu_prefill_variants_match_the_numpy_front(variant):
    q, k, v, _, _, _ = inputs(batch=2, q_len=40, lens=(60, 60), seed=30)
    k, v = k[:, :60].contiguous(), v[:, :60].contiguous()
    causal = variant.get("window_size", (0, 0))[1] == 0
    out, lse = splitkv.prefill(q, k, v, causal=causal, return_lse=True, **variant)
    np_out, np_lse = splitkv.prefill(q.numpy(), k.numpy(), v.numpy(), causal=causal, return_lse=True, **variant)
    ref_out, ref_lse = prefill_reference(q, k, v, causal, variant.get("window_size", (-1, -1)),
                                         variant.get("softcap", 0.0))
    # Both round the same fp64 reference (torch's float64 -> float16 copy rounds through float32).
    assert_close(out, lse, ref_out, ref_lse)
    assert_close(torch.from_numpy(np_out), torch.from_numpy(np_lse), ref_out, ref_lse)


@pytest.mark.parametrize("variant", [dict(), dict(window_size=(12, 0)), dict(softcap=4.0)])
def test_cpu_prefill_sinks_match_the_numpy_front(variant):
    q, k, v, _, _, sinks = inputs(batch=2, q_len=40, lens=(60, 60), seed=32)
    k, v = k[:, :60].contiguous(), v[:, :60].contiguous()
    out, lse = splitkv.prefill(q, k, v, causal=True, return_lse=True, sinks=sinks, **variant)
    np_out, np_lse = splitkv.prefill(q.numpy(), k.numpy(), v.numpy(), causal=True, return_lse=True,
                                     sinks=sinks.numpy(), **variant)
    ref_out, ref_lse = prefill_reference(q, k, v, True, variant.get("window_size", (-1, -1)),
                                         variant.get("softcap", 0.0), sinks)
    assert_close(out, lse, ref_out, ref_lse)
    assert_close(torch.from_numpy(np_out), torch.from_numpy(np_lse), ref_out, ref_lse)
    plain = splitkv.prefill(q, k, v, causal=True, **variant)
    assert not torch.equal(bits(plain), bits(out)), "the sinks did not change the answer"


def test_prefill_operator_takes_sinks():
    q, k, v, _, _, sinks = inputs(batch=1, q_len=8, lens=(8,), seed=33)
    k, v = k[:, :8].contiguous(), v[:, :8].contiguous()
    schema = str(torch.ops.splitkv.prefill_out.default._schema)
    assert "Tensor? sinks=None" in schema
    torch.library.opcheck(torch.ops.splitkv.prefill_out.default,
                          (q, k, v, None, None, torch.empty_like(q), torch.empty(1, 8, 8), None, 8, 8, True, None, 0),
                          {"sinks": sinks})
    native = splitkv.prefill(q, k, v, causal=True, sinks=sinks)
    compiled = torch.compile(lambda q, k, v, s: splitkv.prefill(q, k, v, causal=True, sinks=s), fullgraph=True,
                             backend="aot_eager")
    assert torch.equal(bits(compiled(q, k, v, sinks)), bits(native))


def test_compat_varlen_takes_window_and_softcap():
    q, k, v, _, _, _ = inputs(batch=1, q_len=50, lens=(50,), seed=31)
    q3, k3, v3 = q[0], k[0, :50].contiguous(), v[0, :50].contiguous()
    cu = torch.tensor([0, 50], dtype=torch.int32)
    ref = splitkv.prefill(q3, k3, v3, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=50, max_seqlen_k=50,
                          causal=True, window_size=(10, 0), softcap=3.0)
    out = flash_attn_varlen_func(q3, k3, v3, cu, cu, 50, 50, causal=True, window_size=(10, 0), softcap=3.0)
    assert torch.equal(bits(out), bits(ref))


# ---- CUDA tensors: the decode kernels' variants instances ---------------------------------------------

GPU_DTYPE = torch.bfloat16 if C.dtype_compiled(C.DType.bf16) else torch.float16
GPU_D = 128 if 128 in splitkv.compiled_head_dims() else splitkv.compiled_head_dims()[0]


@needs_cuda
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("q_len,causal,page_size", [(1, False, 0), (4, True, 16), (1, False, 64)])
def test_cuda_variants_match_the_fp64_transcription(variant, q_len, causal, page_size):
    q, k, v, lens, bt, sinks = inputs("cuda", GPU_DTYPE, q_len=q_len, hq=16, hkv=4, d=GPU_D, page_size=page_size,
                                      lens=(1500, 7, 640), seed=10 + q_len + page_size)
    kw = _call_kwargs(variant, sinks)
    out, lse = splitkv.decode(q, k, v, lens, bt, causal=causal, return_lse=True, **kw)
    ref_out, ref_lse = variants_reference(q, k, v, lens.cpu(), None if bt is None else bt.cpu(), causal,
                                          kw.get("window_size", (-1, -1)), kw.get("softcap", 0.0), kw.get("sinks"))
    assert_close(out, lse, ref_out, ref_lse)


@needs_cuda
def test_cuda_compat_kvcache_takes_s_aux_window_and_softcap():
    q, k, v, lens, bt, sinks = inputs("cuda", GPU_DTYPE, q_len=1, hq=16, hkv=4, d=GPU_D, page_size=16, seed=21)
    ref = splitkv.decode(q, k, v, lens, bt, window_size=(128, -1), softcap=30.0, sinks=sinks)
    out = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, block_table=bt, window_size=(128, -1), softcap=30.0,
                                  s_aux=sinks)
    assert torch.equal(bits(out), bits(ref))


@needs_cuda
@pytest.mark.parametrize("page_size", [0, 16])
def test_cuda_tree_mask_matches_the_cpu_backend(page_size):
    q, k, v, lens, bt, _ = inputs("cuda", GPU_DTYPE, q_len=4, hq=16, hkv=4, d=GPU_D, page_size=page_size,
                                  lens=(1500, 3, 640), seed=22)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    mask[2, 1] = mask[3, 1] = False  # a draft tree: tokens 2 and 3 hang under token 0
    masks = np.stack([mask, np.eye(4, dtype=bool), np.zeros((4, 4), dtype=bool)])  # the last hides every draft
    tree = torch.from_numpy(np.packbits(masks, axis=-1, bitorder="little"))
    out, lse = splitkv.decode(q, k, v, lens, bt, causal=True, tree_mask=tree.cuda(), return_lse=True)
    cpu = lambda t: None if t is None else t.cpu()
    ref_out, ref_lse = splitkv.decode(cpu(q), cpu(k), cpu(v), cpu(lens), cpu(bt), causal=True, tree_mask=tree,
                                      return_lse=True)
    assert_close(out, lse, ref_out.double(), ref_lse.double())
    plain = splitkv.decode(q, k, v, lens, bt, causal=True)
    assert not torch.equal(bits(out), bits(plain)), "the tree mask did not change the answer"


@needs_cuda
def test_cuda_combine_folds_sinks():
    g = torch.Generator().manual_seed(8)
    po = torch.randn(3, 4, 2, GPU_D, generator=g)
    pl = torch.randn(3, 4, 2, generator=g)
    pl[:, 3] = float("-inf")
    sinks = torch.tensor([0.5, -3.0])
    host_out, host_lse = splitkv.combine(po, pl, seq_len=2, dtype=GPU_DTYPE, return_lse=True, sinks=sinks)
    out, lse = splitkv.combine(po.cuda(), pl.cuda(), seq_len=2, dtype=GPU_DTYPE, return_lse=True, sinks=sinks.cuda())
    ulp = 2.0 ** -7 if GPU_DTYPE == torch.bfloat16 else 2.0 ** -10
    assert (out.cpu().double() - host_out.double()).abs().max() <= 2 * ulp
    torch.testing.assert_close(lse.cpu(), host_lse, atol=1e-5, rtol=0)


@needs_cuda
def test_cuda_windowed_graph_replays_with_new_lengths():
    q, k, v, lens, bt, sinks = inputs("cuda", GPU_DTYPE, q_len=1, hq=16, hkv=4, d=GPU_D, page_size=16,
                                      lens=(900, 33, 400), seed=23)
    kw = dict(window_size=(64, -1), softcap=10.0, sinks=sinks)
    out = splitkv.decode(q, k, v, lens, bt, max_seqlen_k=903, **kw)  # plans (and warms) outside capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = splitkv.decode(q, k, v, lens, bt, max_seqlen_k=903, **kw)
    for new in ((903, 1, 64), (65, 500, 0)):
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        eager = splitkv.decode(q, k, v, lens, bt, max_seqlen_k=903, **kw)
        assert torch.equal(bits(out), bits(eager))


def _exact_in_both_16_bit_types(x):
    """x rounded to bf16 and cleared below fp16's normal range: the same values in fp16 and bf16."""
    x = torch.from_numpy(x).to(torch.bfloat16).float()
    return torch.where(x.abs() < 2.0 ** -14, 0.0, x).numpy()


@needs_cuda
@pytest.mark.parametrize("fmt", ["int8_kc", "int4_kc", "k8v4_kc"])
@pytest.mark.parametrize("family", [None, "decode_kc_n8"])
def test_cuda_keys_per_channel_decode_with_its_tail(fmt, family):
    """The host definition (fp16 tail, CPU backend) against the GPU in the build's dtype: inputs
    exact in both 16-bit types, so only the output rounding differs."""
    from splitkv.quant import quantize_kv_kc

    if family is not None and not family_compiled(family, fmt, GPU_D):
        pytest.skip(f"kernel family {family} for kv_format={fmt}, D={GPU_D} is not compiled into this build")
    g = np.random.default_rng(9)
    lens = np.array([1000, 70, 129], dtype=np.int32)
    k = _exact_in_both_16_bit_types(g.standard_normal((3, 1024, 4, GPU_D)).astype(np.float32))
    v = _exact_in_both_16_bit_types(g.standard_normal((3, 1024, 4, GPU_D)).astype(np.float32))
    q = _exact_in_both_16_bit_types(g.standard_normal((3, 1, 16, GPU_D)).astype(np.float32))
    kc, vc, ks, vs, tail = quantize_kv_kc(k, v, fmt, seq_lens=lens)
    ref = splitkv.decode(q.astype(np.float16), kc, vc, lens, kv_format=fmt, k_scales=ks, v_scales=vs, k_tail=tail)
    cuda = (lambda x: torch.from_numpy(x).cuda())
    out = splitkv.decode(cuda(q).to(GPU_DTYPE), cuda(kc), cuda(vc), cuda(lens), kv_format=fmt, k_scales=cuda(ks),
                         v_scales=cuda(vs), k_tail=cuda(tail).to(GPU_DTYPE), family=family)
    err = np.abs(out.float().cpu().numpy().astype(np.float64) - ref.astype(np.float64))
    assert err.max() <= 1e-2, err.max()


@needs_cuda
@pytest.mark.parametrize("variant", PREFILL_VARIANTS + [dict(window_size=(100, 0)), dict(softcap=30.0),
                                     dict(sinks=True), dict(sinks=True, window_size=(64, 0)),
                                     dict(sinks=True, num_splits=3)])
@pytest.mark.parametrize("lq,lk", [(300, 300), (129, 700)])
def test_cuda_prefill_variants_match_the_fp64_transcription(variant, lq, lk):
    q, k, v, _, _, sinks = inputs("cuda", GPU_DTYPE, batch=2, q_len=lq, hq=8, hkv=2, d=GPU_D, lens=(lk, lk), seed=lq)
    k, v = k[:, :lk].contiguous(), v[:, :lk].contiguous()
    variant = dict(variant)
    if variant.get("sinks"):
        variant["sinks"] = sinks.cuda().float() + 4  # near the rows' LSE, so that they weigh
    causal = variant.get("window_size", (0, 0))[1] == 0
    out, lse = splitkv.prefill(q, k, v, causal=causal, return_lse=True, **variant)
    ref_out, ref_lse = prefill_reference(q.cpu(), k.cpu(), v.cpu(), causal, variant.get("window_size", (-1, -1)),
                                         variant.get("softcap", 0.0), variant.get("sinks"))
    # P enters P V in the 16-bit type (as in every prefill kernel): test_torch_gpu.py's tolerance.
    assert_close(out, lse, ref_out, ref_lse, atol=1e-2 if GPU_DTYPE == torch.bfloat16 else 4e-3)


@needs_cuda
@pytest.mark.parametrize("fmt", ["int8_kc", "int4_kc"])
def test_cuda_keys_per_channel_append_builds_the_host_definitions_cache(fmt):
    """Tokens appended on the GPU in ragged chunks (positions, tail ring) give the cache the host
    definition builds at once: equal group scales, and the same decode."""
    from splitkv.quant import quantize_kv_kc

    g = np.random.default_rng(11)
    lens = [300, 64, 129]
    batch, capacity, hkv, d = 3, 320, 4, GPU_D
    k = _exact_in_both_16_bit_types(g.standard_normal((batch, capacity, hkv, d)).astype(np.float32))
    v = _exact_in_both_16_bit_types(g.standard_normal((batch, capacity, hkv, d)).astype(np.float32))
    q = _exact_in_both_16_bit_types(g.standard_normal((batch, 1, 16, d)).astype(np.float32))
    lens_np = np.array(lens, dtype=np.int32)
    kc, vc, ks, vs, tail = quantize_kv_kc(k, v, fmt, seq_lens=lens_np)
    cuda = (lambda x: torch.from_numpy(x).cuda())
    k_codes, v_codes = torch.zeros_like(cuda(kc)), torch.zeros_like(cuda(vc))
    k_scales, v_scales = torch.zeros_like(cuda(ks)), torch.zeros_like(cuda(vs))
    k_tail = torch.zeros(tail.shape, dtype=GPU_DTYPE, device="cuda")
    kt, vt = cuda(k).to(GPU_DTYPE), cuda(v).to(GPU_DTYPE)
    done = [0] * batch
    while any(done[b] < lens[b] for b in range(batch)):  # each call: a ragged chunk of every unfinished sequence
        rows, slots, positions, seqs = [], [], [], []
        for b in range(batch):
            n = min(lens[b] - done[b], int(g.integers(1, 90)))
            for p in range(done[b], done[b] + n):
                rows.append((b, p))
            done[b] += n
        idx_b = torch.tensor([r[0] for r in rows], device="cuda")
        idx_p = torch.tensor([r[1] for r in rows], device="cuda")
        splitkv.append_kv(kt[idx_b, idx_p], vt[idx_b, idx_p], k_codes, v_codes, idx_b * capacity + idx_p,
                          k_scales=k_scales, v_scales=v_scales, kv_format=fmt, positions=idx_p,
                          tail_slots=idx_b.to(torch.int32), k_tail=k_tail)
    torch.cuda.synchronize()
    for b in range(batch):
        whole = lens[b] // 64
        assert torch.equal(k_scales[b, :, :whole].cpu(), torch.from_numpy(ks[b, :, :whole])), f"sequence {b}"
    ref = splitkv.decode(q.astype(np.float16), kc, vc, lens_np, kv_format=fmt, k_scales=ks, v_scales=vs, k_tail=tail)
    out = splitkv.decode(cuda(q).to(GPU_DTYPE), k_codes, v_codes, cuda(lens_np), kv_format=fmt, k_scales=k_scales,
                         v_scales=v_scales, k_tail=k_tail)
    err = np.abs(out.float().cpu().numpy().astype(np.float64) - ref.astype(np.float64))
    assert err.max() <= 1e-2, err.max()


def test_keys_per_channel_append_on_cpu_tensors_is_refused_by_name():
    k = torch.zeros(2, 2, 64, dtype=torch.float16)
    cache = torch.zeros(1, 128, 2, 64, dtype=torch.uint8)
    with pytest.raises(NotImplementedError, match="'kv_format'"):
        splitkv.append_kv(k, k, cache, cache, torch.tensor([0, 1]), kv_format="int8_kc")
    with pytest.raises(ValueError, match="'positions'"):
        splitkv.append_kv(k, k, torch.zeros(1, 128, 2, 64, dtype=torch.float16),
                          torch.zeros(1, 128, 2, 64, dtype=torch.float16), torch.tensor([0, 1]),
                          positions=torch.tensor([0, 1]))
