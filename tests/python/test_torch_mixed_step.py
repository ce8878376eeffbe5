"""A serving step in one call on CPU tensors: splitkv.prefill over a paged cache (seq_lens given)
and flash-attn's varlen function over one (block_table, seqused_k as FlashAttention 3 and vLLM
pass them), bit for bit against each other, the FP8 descales, the operator (opcheck,
torch.compile) and the errors. Skips without torch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import splitkv  # noqa: E402
from conftest import assert_close_to_reference, attention_np, gather_pages  # noqa: E402
from splitkv.compat.flash_attn import flash_attn_varlen_func  # noqa: E402

HQ, HKV, D, PAGE = 8, 2, 64, 16
Q_LENS = [1, 4, 7, 0, 1]
LENS = [37, 20, 20, 9, 1]


def bits(t):
    return t.view(torch.int16)


def step(q_lens=Q_LENS, lens=LENS, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(q_lens)]), dtype=torch.int32)
    q = torch.randn(int(cu_q[-1]), HQ, D, generator=g).to(dtype)
    pages = (max(lens) + PAGE - 1) // PAGE
    num_pages = len(lens) * pages + 2
    k = torch.randn(num_pages, PAGE, HKV, D, generator=g).to(dtype)
    v = torch.randn(num_pages, PAGE, HKV, D, generator=g).to(dtype)
    block_table = torch.randperm(num_pages, generator=g)[: len(lens) * pages].view(len(lens), pages).to(torch.int32)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    return q, k, v, cu_q, seq_lens, block_table


def test_prefill_over_a_paged_cache_matches_attention():
    q, k, v, cu_q, lens, bt = step()
    out, lse = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, causal=True,
                               return_lse=True)
    assert out.shape == q.shape and lse.shape == (HQ, q.shape[0])
    kn, vn = k.float().numpy(), v.float().numpy()
    for b, n in enumerate(LENS):
        qs = slice(int(cu_q[b]), int(cu_q[b + 1]))
        o, l = attention_np(q[qs].float().numpy(), gather_pages(kn, bt[b].numpy(), n),
                            gather_pages(vn, bt[b].numpy(), n), True)
        assert_close_to_reference(out[qs].float().numpy(), lse[:, qs].numpy(), o, l, dtype="bf16")
    # The numpy path (fp16 here: numpy has no bf16) over the same values.
    np_out = splitkv.prefill(q.float().numpy().astype(np.float16), kn.astype(np.float16), vn.astype(np.float16),
                             cu_seqlens_q=cu_q.numpy(), seq_lens=lens.numpy(), block_table=bt.numpy(), causal=True)
    assert np.allclose(np_out.astype(np.float32), out.float().numpy(), atol=1e-2)


def test_compat_paged_varlen_is_bitwise_native():
    q, k, v, cu_q, lens, bt = step()
    native, native_lse = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, max_seqlen_q=7,
                                         max_seqlen_k=37, causal=True, return_lse=True)
    # vLLM's call: keywords only, seqused_k, out=, FA3 arguments it ignores.
    out = torch.full_like(q, float("nan"))
    got, lse = flash_attn_varlen_func(q=q, k=k, v=v, out=out, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens,
                                      max_seqlen_k=37, softmax_scale=None, causal=True, window_size=(-1, -1),
                                      block_table=bt, softcap=0.0, scheduler_metadata=None, fa_version=3,
                                      num_splits=0, return_softmax_lse=True)
    assert got is out and lse.shape == (HQ, q.shape[0])
    assert torch.equal(bits(out), bits(native)) and torch.equal(lse, native_lse)
    # flash-attn 2's paged varlen: the key counts from cu_seqlens_k.
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(LENS)]), dtype=torch.int32)
    out2 = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 37, causal=True, block_table=bt)
    assert torch.equal(bits(out2), bits(native))
    out3, lse3, none = flash_attn_varlen_func(q, k, v, cu_q, None, 7, 37, causal=True, block_table=bt,
                                              seqused_k=lens, return_attn_probs=True)
    assert none is None and torch.equal(lse3, native_lse)
    # 16-bit caches ignore the descales, as FlashAttention 3 does.
    ones = torch.ones(1, dtype=torch.float32).expand(len(LENS), HKV)
    out4 = flash_attn_varlen_func(q, k, v, cu_q, None, 7, 37, causal=True, block_table=bt, seqused_k=lens,
                                  q_descale=ones, k_descale=ones * 3, v_descale=ones)
    assert torch.equal(bits(out4), bits(native))


def test_compat_paged_varlen_takes_s_aux_as_gpt_oss():
    """vLLM's gpt-oss call: the sinks as s_aux with a sliding window, over the paged cache."""
    q, k, v, cu_q, lens, bt = step(seed=4)
    sinks = torch.linspace(-2.0, 3.0, HQ)
    native = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, max_seqlen_q=7,
                             max_seqlen_k=37, causal=True, window_size=(8, 0), sinks=sinks)
    got = flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens, max_seqlen_k=37,
                                 causal=True, window_size=(8, 0), block_table=bt, s_aux=sinks)
    assert torch.equal(bits(got), bits(native))
    plain = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, max_seqlen_q=7,
                            max_seqlen_k=37, causal=True, window_size=(8, 0))
    assert not torch.equal(bits(got), bits(plain)), "s_aux did not change the answer"


def test_compat_fp8_cache_takes_the_layer_scale():
    q, k, v, cu_q, lens, bt = step(seed=3)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, "fp8")
    assert kc.dtype == torch.float8_e4m3fn and ks.shape == (HKV,)
    native = splitkv.prefill(q, kc, vc, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, max_seqlen_q=7,
                             max_seqlen_k=37, causal=True, kv_format="fp8", k_scales=ks, v_scales=vs)
    batch = len(LENS)
    got = flash_attn_varlen_func(q=q, k=kc, v=vc, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens,
                                 max_seqlen_k=37, causal=True, block_table=bt,
                                 k_descale=ks.expand(batch, HKV), v_descale=vs.expand(batch, HKV))
    assert torch.equal(bits(got), bits(native))
    # Without descales an FP8 cache's scale is 1.
    unit = splitkv.prefill(q, kc, vc, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, max_seqlen_q=7,
                           max_seqlen_k=37, causal=True, kv_format="fp8", k_scales=torch.ones(HKV),
                           v_scales=torch.ones(HKV))
    got1 = flash_attn_varlen_func(q=q, k=kc, v=vc, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens,
                                  max_seqlen_k=37, causal=True, block_table=bt)
    assert torch.equal(bits(got1), bits(unit)) and not torch.equal(bits(got1), bits(native))
    with pytest.raises(NotImplementedError, match="'k_descale'"):  # a scale per sequence
        flash_attn_varlen_func(q=q, k=kc, v=vc, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens, max_seqlen_k=37,
                               causal=True, block_table=bt, k_descale=ks.expand(batch, HKV).contiguous(),
                               v_descale=vs.expand(batch, HKV))
    with pytest.raises(ValueError, match=r"'v_descale.shape'"):
        flash_attn_varlen_func(q=q, k=kc, v=vc, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens, max_seqlen_k=37,
                               causal=True, block_table=bt, k_descale=ks.expand(batch, HKV), v_descale=vs)


def test_operator_over_a_cache():
    q, k, v, cu_q, lens, bt = step()
    native = splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, seq_lens=lens, block_table=bt, max_seqlen_q=7,
                             max_seqlen_k=37, causal=True)
    schema = str(torch.ops.splitkv.prefill_out.default._schema)
    assert "Tensor? seq_lens=None, Tensor? block_table=None" in schema
    out = torch.empty_like(q)
    torch.ops.splitkv.prefill_out(q, k, v, cu_q, None, out, None, None, 7, 37, True, None, 0, seq_lens=lens,
                                  block_table=bt)
    assert torch.equal(bits(out), bits(native))
    torch.library.opcheck(torch.ops.splitkv.prefill_out.default,
                          (q, k, v, cu_q, None, torch.empty_like(q), torch.empty(HQ, q.shape[0]), None, 7, 37, True,
                           None, 0),
                          {"seq_lens": lens, "block_table": bt})

    def serve(q, k, v, cu_q, lens, bt):
        return flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu_q, max_seqlen_q=7, seqused_k=lens,
                                      max_seqlen_k=37, causal=True, block_table=bt)

    compiled = torch.compile(serve, fullgraph=True, backend="aot_eager")
    assert torch.equal(bits(compiled(q, k, v, cu_q, lens, bt)), bits(native))


@pytest.mark.parametrize("kwargs,error,argument", [
    (dict(seqused_k="lens"), NotImplementedError, "seqused_k"),       # without block_table
    (dict(block_table="bt"), ValueError, "seqused_k"),                # neither seqused_k nor cu_seqlens_k
    (dict(block_table=1, seqused_k="lens"), ValueError, "block_table"),
    (dict(block_table="bt", seqused_k="lens", cp_world_size=2), NotImplementedError, "cp_world_size"),
    (dict(block_table="bt", seqused_k="lens", dropout_p=0.1), NotImplementedError, "dropout_p"),
])
def test_compat_paged_errors(kwargs, error, argument):
    q, k, v, cu_q, lens, bt = step()
    named = {"lens": lens, "bt": bt}
    kwargs = {key: named.get(val, val) if isinstance(val, str) else val for key, val in kwargs.items()}
    with pytest.raises(error) as e:
        flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu_q, max_seqlen_q=7, max_seqlen_k=37, causal=True,
                               **kwargs)
    assert e.value.argument == argument


def test_bad_length_is_named_on_cpu():
    q, k, v, cu_q, lens, bt = step()
    bad = lens.clone()
    bad[2] = 38
    with pytest.raises(ValueError, match=r"'seq_lens\[2\]'"):
        splitkv.prefill(q, k, v, cu_seqlens_q=cu_q, seq_lens=bad, block_table=bt, max_seqlen_k=37, causal=True)
