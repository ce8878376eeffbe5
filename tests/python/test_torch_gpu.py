"""The torch front on CUDA tensors: the kernels against fp32 SDPA (enable_gqa; bottom-right causal
masks), a side stream, CUDA-graph capture replayed with new lengths, torch.compile(fullgraph=True)
(also with CUDA graphs), opcheck, the flash-attn compat front bit for bit against the native call,
and no host synchronization. Skips without torch or CUDA."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import splitkv  # noqa: E402
from splitkv import _splitkv as C  # noqa: E402
from splitkv.compat.flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402

DEV = torch.device("cuda", torch.cuda.current_device())
DIMS = splitkv.compiled_head_dims()
D = 128 if 128 in DIMS else DIMS[0]
DTYPE = torch.bfloat16 if C.dtype_compiled(C.DType.bf16) else torch.float16
PREFILL_D = D if D in (64, 128) else None
# The study families (two-pass, split-V, independent K/V tiles) are compiled only on request.
STUDY_FAMILIES_COMPILED = any(f.name == "prefill_mma_twopass" and len(f.compiled) > 0 for f in splitkv.kernel_families())
ATOL = 1e-2 if DTYPE == torch.bfloat16 else 4e-3


def bits(t):
    return t.view(torch.int16)


def decode_inputs(batch=3, q_len=1, hq=16, hkv=4, lens=(1500, 77, 640), page_size=0, seed=0):
    g = torch.Generator(device=DEV).manual_seed(seed)
    lens = torch.tensor(lens, dtype=torch.int32, device=DEV)
    capacity = int(lens.max()) + 8
    q = torch.randn(batch, q_len, hq, D, generator=g, device=DEV).to(DTYPE)
    if page_size:
        pages = (capacity + page_size - 1) // page_size
        total = batch * pages + 3
        k = torch.randn(total, page_size, hkv, D, generator=g, device=DEV).to(DTYPE)
        v = torch.randn(total, page_size, hkv, D, generator=g, device=DEV).to(DTYPE)
        perm = torch.randperm(total, generator=g, device=DEV)[: batch * pages]
        block_table = perm.view(batch, pages).to(torch.int32)
    else:
        k = torch.randn(batch, capacity, hkv, D, generator=g, device=DEV).to(DTYPE)
        v = torch.randn(batch, capacity, hkv, D, generator=g, device=DEV).to(DTYPE)
        block_table = None
    return q, k, v, lens, block_table


def sequence_kv(k, v, block_table, b, n):
    if block_table is None:
        return k[b, :n], v[b, :n]
    page_size = k.shape[1]
    pages = block_table[b, : (n + page_size - 1) // page_size].long()
    return k[pages].flatten(0, 1)[:n], v[pages].flatten(0, 1)[:n]


def sdpa_reference(q, k, v, causal, scale=None):
    """One sequence in fp32: q [Lq, Hq, D], k/v [Lk, Hkv, D] -> out [Lq, Hq, D], lse [Hq, Lq].
    Causal aligned bottom-right (query i sees keys j <= Lk - Lq + i)."""
    lq, lk = q.shape[0], k.shape[0]
    qf, kf, vf = (x.float().transpose(0, 1) for x in (q, k, v))  # [H, L, D]
    mask = None
    if causal:
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
    out = F.scaled_dot_product_attention(qf[None], kf[None], vf[None], attn_mask=mask, enable_gqa=True,
                                         scale=scale)[0]
    group = qf.shape[0] // kf.shape[0]
    scores = qf @ kf.repeat_interleave(group, 0).transpose(1, 2) * (scale or qf.shape[-1] ** -0.5)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out.transpose(0, 1), torch.logsumexp(scores, -1)


def check_decode(q, k, v, lens, bt, causal, out, lse, scale=None):
    for b in range(q.shape[0]):
        n = int(lens[b])
        kb, vb = sequence_kv(k, v, bt, b, n)
        ref_out, ref_lse = sdpa_reference(q[b], kb, vb, causal, scale)
        torch.testing.assert_close(out[b].float(), ref_out, atol=ATOL, rtol=1e-2)
        if lse is not None:
            torch.testing.assert_close(lse[b], ref_lse, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("page_size", [0, 16, 64])
@pytest.mark.parametrize("q_len", [1, 4, 16])
def test_decode_matches_sdpa(q_len, page_size):
    q, k, v, lens, bt = decode_inputs(q_len=q_len, page_size=page_size, seed=q_len + page_size)
    causal = q_len > 1
    out, lse = splitkv.decode(q, k, v, lens, bt, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == DTYPE and lse.shape == (3, 16, q_len)
    check_decode(q, k, v, lens, bt, causal, out, lse)


@pytest.mark.parametrize("options", [dict(num_splits=1), dict(num_splits=7), dict(max_splits=3),
                                     dict(split_tokens=256), dict(softmax_scale=0.05)])
def test_decode_options(options):
    q, k, v, lens, bt = decode_inputs(q_len=2, page_size=16, seed=3)
    out, lse = splitkv.decode(q, k, v, lens, bt, causal=True, return_lse=True, **options)
    check_decode(q, k, v, lens, bt, True, out, lse, scale=options.get("softmax_scale"))


def test_decode_caller_workspace_and_out():
    q, k, v, lens, bt = decode_inputs(page_size=16)
    plan = splitkv.plan_decode(q, k, v, lens, bt, num_splits=4)
    assert plan.num_splits == 4 and plan.workspace_bytes > 0
    ref = splitkv.decode(q, k, v, lens, bt, num_splits=4)
    ws = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=DEV)
    out = torch.full_like(q, float("nan"))
    assert splitkv.decode(q, k, v, lens, bt, num_splits=4, workspace=ws, out=out) is out
    assert torch.equal(bits(out), bits(ref))
    with pytest.raises(splitkv.WorkspaceTooSmallError, match="workspace_bytes"):
        splitkv.decode(q, k, v, lens, bt, num_splits=4, workspace=ws[:16])


def test_device_mismatch_is_named():
    q, k, v, lens, bt = decode_inputs()
    with pytest.raises(ValueError, match=r"'seq_lens.device': expected cuda:\d \(the device of q\), got cpu"):
        splitkv.decode(q, k, v, lens.cpu(), bt)


@pytest.mark.skipif(PREFILL_D is None, reason="no prefill head dim compiled")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(128, 128), (100, 333), (257, 64)])
def test_prefill_padded_matches_sdpa(causal, lq, lk):
    g = torch.Generator(device=DEV).manual_seed(lq + lk)
    q = torch.randn(2, lq, 8, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    k = torch.randn(2, lk, 2, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    v = torch.randn(2, lk, 2, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    out, lse = splitkv.prefill(q, k, v, causal=causal, return_lse=True)
    assert lse.shape == (2, 8, lq)
    for b in range(2):
        if causal and lq > lk:
            rows = slice(lq - lk, lq)  # earlier rows see no key (0 and -inf), SDPA gives NaN there
            assert (out[b, : lq - lk] == 0).all() and torch.isneginf(lse[b, :, : lq - lk]).all()
        else:
            rows = slice(0, lq)
        ref_out, ref_lse = sdpa_reference(q[b], k[b], v[b], causal)
        torch.testing.assert_close(out[b, rows].float(), ref_out[rows], atol=ATOL, rtol=1e-2)
        torch.testing.assert_close(lse[b][:, rows], ref_lse[:, rows], atol=1e-3, rtol=1e-4)


@pytest.mark.skipif(PREFILL_D is None, reason="no prefill head dim compiled")
@pytest.mark.parametrize("strategy", [None, "split-kv", "two-pass"])
@pytest.mark.parametrize("causal", [False, True])
def test_prefill_varlen_matches_sdpa(causal, strategy):
    if strategy == "two-pass" and not STUDY_FAMILIES_COMPILED:
        pytest.skip("the two-pass families are study families (-DSPLITKV_STUDY_FAMILIES=ON)")
    q_lens, k_lens = [5, 130, 64, 1], [5, 300, 64, 900]
    cu_q = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0] + list(torch.tensor(k_lens).cumsum(0)), dtype=torch.int32, device=DEV)
    g = torch.Generator(device=DEV).manual_seed(9)
    q = torch.randn(sum(q_lens), 8, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    k = torch.randn(sum(k_lens), 4, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    v = torch.randn(sum(k_lens), 4, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    out, lse = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(q_lens),
                               max_seqlen_k=max(k_lens), causal=causal, strategy=strategy, return_lse=True)
    assert lse.shape == (8, sum(q_lens))
    for b in range(len(q_lens)):
        qs = slice(int(cu_q[b]), int(cu_q[b + 1]))
        ks = slice(int(cu_k[b]), int(cu_k[b + 1]))
        ref_out, ref_lse = sdpa_reference(q[qs], k[ks], v[ks], causal)
        torch.testing.assert_close(out[qs].float(), ref_out, atol=ATOL, rtol=1e-2)
        torch.testing.assert_close(lse[:, qs], ref_lse, atol=1e-3, rtol=1e-4)


def test_side_stream_is_used():
    q, k, v, lens, bt = decode_inputs(page_size=16)
    ref = splitkv.decode(q, k, v, lens, bt, causal=False, num_splits=4)
    torch.cuda.synchronize()
    out = torch.full_like(q, float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on the side stream
        splitkv.decode(q, k, v, lens, bt, num_splits=4, out=out)
    # The default stream does not wait for the side stream: the output is not written yet.
    snapshot = out.cpu()
    assert torch.isnan(snapshot.float()).all(), "decode did not run on the current (side) stream"
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(bits(out), bits(ref))


@pytest.mark.parametrize("page_size", [0, 16])
def test_graph_capture_replays_with_new_lengths(page_size):
    q, k, v, lens, bt = decode_inputs(q_len=3, page_size=page_size, lens=(1500, 700, 64), seed=5)
    static_lens = lens.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (plan cache) outside capture
        splitkv.decode(q, k, v, static_lens, bt, causal=True, return_lse=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_lse = splitkv.decode(q, k, v, static_lens, bt, causal=True, return_lse=True)
    for new in ([1500, 700, 64], [3, 1501, 900], [1200, 5, 1508]):
        static_lens.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        e_out, e_lse = splitkv.decode(q, k, v, static_lens, bt, causal=True, return_lse=True)
        torch.cuda.synchronize()
        assert torch.equal(bits(g_out), bits(e_out)) and torch.equal(g_lse, e_lse)
        check_decode(q, k, v, static_lens, bt, True, g_out, g_lse)


def test_opcheck_cuda():
    q, k, v, lens, bt = decode_inputs(q_len=2, page_size=16)
    torch.library.opcheck(torch.ops.splitkv.decode_out.default,
                          (q, k, v, lens, bt, torch.empty_like(q), torch.empty(3, 16, 2, device=DEV), None, True,
                           None, 3, 0, 0, None))
    if PREFILL_D is not None:
        qp = torch.randn(2, 70, 8, PREFILL_D, device=DEV).to(DTYPE)
        kp = torch.randn(2, 90, 2, PREFILL_D, device=DEV).to(DTYPE)
        torch.library.opcheck(torch.ops.splitkv.prefill_out.default,
                              (qp, kp, kp, None, None, torch.empty_like(qp), torch.empty(2, 8, 70, device=DEV), None,
                               None, None, True, None, 0))


@pytest.mark.parametrize("page_size", [0, 16])
def test_compat_kvcache_bitwise_with_append(page_size):
    q, k_cache, v_cache, lens, bt = decode_inputs(q_len=4, page_size=page_size, lens=(1000, 30, 600))
    k_new = torch.randn(3, 4, 4, D, device=DEV).to(DTYPE)
    v_new = torch.randn(3, 4, 4, D, device=DEV).to(DTYPE)
    k_copy, v_copy = k_cache.clone(), v_cache.clone()
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=lens, block_table=bt,
                                       causal=True, return_softmax_lse=True)
    # The native call on caches updated by hand, with the appended lengths.
    for b in range(3):
        for j in range(4):
            pos = int(lens[b]) + j
            if bt is None:
                k_copy[b, pos], v_copy[b, pos] = k_new[b, j], v_new[b, j]
            else:
                page, slot = int(bt[b, pos // page_size]), pos % page_size
                k_copy[page, slot], v_copy[page, slot] = k_new[b, j], v_new[b, j]
    assert torch.equal(bits(k_cache), bits(k_copy)) and torch.equal(bits(v_cache), bits(v_copy))
    native, native_lse = splitkv.decode(q, k_copy, v_copy, lens + 4, bt, causal=True, return_lse=True)
    assert torch.equal(bits(out), bits(native)) and torch.equal(lse, native_lse)
    check_decode(q, k_copy, v_copy, lens + 4, bt, True, out, lse)


def test_compat_append_never_corrupts_another_sequence():
    # A block-table entry of -1 must not wrap to the last page (another sequence's); a position past
    # the sequence's pages is not written (no device assert); that sequence's output is NaN, the
    # others' are the native call's.
    q, k_cache, v_cache, lens, bt = decode_inputs(q_len=1, page_size=16, lens=(1000, 30, 600))
    bt = bt.clone()
    last_page = int(bt[2, -1])
    bt[0, int(lens[0]) // 16] = -1                  # sequence 0 appends into a page id of -1
    lens = lens.clone()
    lens[1] = bt.shape[1] * 16                      # sequence 1 appends past its last page
    k_new = torch.randn(3, 1, 4, D, device=DEV).to(DTYPE)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=k_new, cache_seqlens=lens, block_table=bt)
    torch.cuda.synchronize()
    assert torch.equal(bits(k_cache[last_page]), bits(k_before[last_page]))
    changed = (bits(k_cache) != bits(k_before)).flatten(1).any(1).nonzero().flatten().tolist()
    assert changed == [int(bt[2, int(lens[2]) // 16])]  # only sequence 2's page took its new token
    assert torch.isnan(out[0].float()).all() and torch.isnan(out[1].float()).all()
    assert not torch.isnan(out[2].float()).any()
    native = splitkv.decode(q, k_cache, v_cache, lens + 1, bt)
    assert torch.equal(bits(out[2]), bits(native[2]))


def test_compat_append_rejected_calls_write_nothing():
    q, k_cache, v_cache, lens, bt = decode_inputs(q_len=1, page_size=16)
    k_new = torch.randn(3, 1, 4, D, device=DEV).to(DTYPE)
    k_before = k_cache.clone()
    for kwargs, argument in ((dict(cache_seqlens=lens.long()), "cache_seqlens"),
                             (dict(cache_seqlens=lens, k=k_new.float()), "k.dtype"),
                             (dict(cache_seqlens=lens, k=k_new[:, :, :2]), "k.shape"),
                             (dict(cache_seqlens=lens, q=q.float()), "q.dtype")):
        call = dict(q=q, k=k_new, v=k_new, block_table=bt)
        call.update(kwargs)
        with pytest.raises(C.InvalidArgumentError) as e:
            flash_attn_with_kvcache(k_cache=k_cache, v_cache=v_cache, **call)
        assert e.value.argument == argument
        assert torch.equal(bits(k_cache), bits(k_before))


@pytest.mark.skipif(PREFILL_D is None, reason="no prefill head dim compiled")
def test_compat_varlen_bitwise():
    cu_q = torch.tensor([0, 100, 164], dtype=torch.int32, device=DEV)
    cu_k = torch.tensor([0, 300, 364], dtype=torch.int32, device=DEV)
    q = torch.randn(164, 8, PREFILL_D, device=DEV).to(DTYPE)
    k = torch.randn(364, 2, PREFILL_D, device=DEV).to(DTYPE)
    v = torch.randn(364, 2, PREFILL_D, device=DEV).to(DTYPE)
    out, lse, none = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 100, 300, causal=True, return_attn_probs=True)
    native, native_lse = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=100,
                                         max_seqlen_k=300, causal=True, return_lse=True)
    assert none is None and lse.shape == (8, 164)
    assert torch.equal(bits(out), bits(native)) and torch.equal(lse, native_lse)


@pytest.mark.skipif(PREFILL_D is None, reason="no prefill head dim compiled")
def test_mixed_step_over_a_paged_cache_replays_new_mixes():
    """One call for a serving step (flash-attn's varlen function over a paged cache, as vLLM makes
    it), planned for bounds, captured once and replayed with new mixes of chunks and rows: equal
    bit for bit to the eager call of each mix and close to SDPA per sequence."""
    hq, hkv, page, seqs, max_kv, max_q = 16, 4, 16, 6, 3072, 600
    g = torch.Generator(device=DEV).manual_seed(21)
    pages = max_kv // page
    num_pages = seqs * pages + 3
    k = torch.randn(num_pages, page, hkv, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    v = torch.randn(num_pages, page, hkv, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    bt = torch.randperm(num_pages, generator=g, device=DEV)[: seqs * pages].view(seqs, pages).to(torch.int32)
    q = torch.randn(1100, hq, PREFILL_D, generator=g, device=DEV).to(DTYPE)
    mixes = [([1, 4, 512, 0, 1, 16], [3000, 800, 2048, 77, 1, 16]),
             ([600, 1, 1, 4, 300, 1], [600, 3072, 5, 4, 2000, 1500]),
             ([1, 1, 1, 1, 1, 1], [3072, 2, 999, 64, 65, 1])]

    def lengths(mix):
        q_lens, lens = mix
        cu = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32, device=DEV)
        return cu, torch.tensor(lens, dtype=torch.int32, device=DEV)

    def serve(cu_q, seq_lens):
        return flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu_q, max_seqlen_q=max_q, seqused_k=seq_lens,
                                      max_seqlen_k=max_kv, causal=True, block_table=bt, return_softmax_lse=True)

    static_cu, static_lens = lengths(mixes[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (plan cache) outside capture
        serve(static_cu, static_lens)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_lse = serve(static_cu, static_lens)
    for mix in mixes:
        cu, lens = lengths(mix)
        static_cu.copy_(cu)
        static_lens.copy_(lens)
        g_out.fill_(float("nan"))
        graph.replay()
        e_out, e_lse = serve(cu, lens)
        torch.cuda.synchronize()
        used = int(cu[-1])
        assert torch.equal(bits(g_out[:used]), bits(e_out[:used])) and torch.equal(g_lse[:, :used], e_lse[:, :used])
        for b, n in enumerate(mix[1]):
            qs = slice(int(cu[b]), int(cu[b + 1]))
            if qs.start == qs.stop:
                continue
            kb, vb = sequence_kv(k, v, bt, b, n)
            ref_out, ref_lse = sdpa_reference(q[qs], kb, vb, True)
            torch.testing.assert_close(g_out[qs].float(), ref_out, atol=ATOL, rtol=1e-2)
            torch.testing.assert_close(g_lse[:, qs], ref_lse, atol=1e-3, rtol=1e-4)


def test_no_host_synchronization():
    q, k, v, lens, bt = decode_inputs(q_len=2, page_size=16)
    splitkv.decode(q, k, v, lens, bt, causal=True)  # plan cached
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        splitkv.decode(q, k, v, lens, bt, causal=True, return_lse=True)
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_no_host_synchronization_compat_append():
    q, k, v, lens, bt = decode_inputs(q_len=1, page_size=16)
    k_new = torch.randn(3, 1, 4, D, device=DEV).to(DTYPE)
    flash_attn_with_kvcache(q, k, v, k=k_new, v=k_new, cache_seqlens=lens, block_table=bt)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        flash_attn_with_kvcache(q, k, v, k=k_new, v=k_new, cache_seqlens=lens, block_table=bt)
    finally:
        torch.cuda.set_sync_debug_mode(0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensor_device_is_honoured():
    other = torch.device("cuda", 1 if torch.cuda.current_device() == 0 else 0)
    q, k, v, lens, bt = decode_inputs(page_size=16)
    ref = splitkv.decode(q, k, v, lens, bt)
    moved = [x.to(other) for x in (q, k, v, lens, bt)]
    out = splitkv.decode(*moved)  # the current device stays DEV
    assert out.device == other and torch.equal(bits(out.to(DEV)), bits(ref))


def test_combine_of_shards_matches_the_whole():
    q, k, v, lens, _ = decode_inputs(q_len=2, lens=(1500, 77, 640), seed=13)
    cut = 512
    parts_o, parts_lse = [], []
    for lo, hi in ((0, cut), (cut, k.shape[1])):
        shard_lens = (lens - lo).clamp(0, hi - lo).to(torch.int32)
        o, l = splitkv.decode(q, k[:, lo:hi].contiguous(), v[:, lo:hi].contiguous(), shard_lens, return_lse=True)
        parts_o.append(o.float().flatten(0, 1))                 # [B * Lq, H, D]
        parts_lse.append(l.permute(0, 2, 1).flatten(0, 1))      # [B * Lq, H]
    out, lse = splitkv.combine(torch.stack(parts_o), torch.stack(parts_lse), seq_len=2, dtype=DTYPE,
                               return_lse=True)
    assert out.shape == q.shape and lse.shape == (3, 16, 2)
    check_decode(q, k, v, lens, None, False, out, lse)


# torch.compile last: the slowest tests (inductor compiles).
def test_compile_fullgraph():
    q, k, v, lens, bt = decode_inputs(q_len=2, page_size=16)

    def step(q, k, v, lens, bt):
        return splitkv.decode(q, k, v, lens, bt, causal=True, return_lse=True)

    compiled = torch.compile(step, fullgraph=True)
    out, lse = compiled(q, k, v, lens, bt)
    ref_out, ref_lse = step(q, k, v, lens, bt)
    assert torch.equal(bits(out), bits(ref_out)) and torch.equal(lse, ref_lse)


def test_compile_reduce_overhead_replays_new_lengths():
    q, k, v, lens, bt = decode_inputs(q_len=1, page_size=16, seed=8)

    def step(q, k, v, lens, bt):
        return splitkv.decode(q, k, v, lens, bt)

    compiled = torch.compile(step, fullgraph=True, mode="reduce-overhead", dynamic=False)
    for new in ([1500, 77, 640], [20, 1500, 3], [700, 700, 700], [1, 2, 3]):
        lens_now = torch.tensor(new, dtype=torch.int32, device=DEV)
        out = compiled(q, k, v, lens_now, bt).clone()
        assert torch.equal(bits(out), bits(step(q, k, v, lens_now, bt)))


def test_decode_shard_on_cuda_merges_to_decode():
    """Two shards of a paged cache on the GPU, merged by combine: decode over the whole context."""
    q, k, v, lens, bt = (t.to(DEV) for t in _shard_inputs())
    cut = torch.tensor([2048, 0, 16], dtype=torch.int32, device=DEV)
    table1 = bt.clone()
    table1[0, : bt.shape[1] - 128] = bt[0, 128:]
    table1[2, : bt.shape[1] - 1] = bt[2, 1:]
    first = splitkv.decode_shard(q, k, v, cut, bt, keys_after=lens - cut, causal=True, max_seqlen_k=3000)
    second = splitkv.decode_shard(q, k, v, lens - cut, table1, causal=True, max_seqlen_k=3000)
    out = splitkv.combine(torch.cat([first[0], second[0]]), torch.cat([first[1], second[1]]), seq_len=4,
                          dtype=DTYPE)
    want = splitkv.decode(q, k, v, lens, bt, causal=True)
    torch.testing.assert_close(out.float(), want.float(), atol=2 * ATOL, rtol=2 * ATOL)


def _shard_inputs():
    g = torch.Generator().manual_seed(9)
    lens = torch.tensor([3000, 700, 33], dtype=torch.int32)
    pages = 3000 // 16 + 1
    k = torch.randn(3 * pages, 16, 8, D, generator=g).to(DTYPE)
    v = torch.randn(3 * pages, 16, 8, D, generator=g).to(DTYPE)
    bt = torch.randperm(3 * pages, generator=g).view(3, pages).to(torch.int32)
    q = torch.randn(3, 4, 32, D, generator=g).to(DTYPE)
    return q, k, v, lens, bt
