"""flash-attn's inference entry points on splitkv, with flash-attn's signatures, layouts, defaults
and return values, for the subset splitkv supports:

    from splitkv.compat.flash_attn import flash_attn_with_kvcache, flash_attn_varlen_func

- flash_attn_with_kvcache: q [B, Sq, H, D] with Sq <= 16; k_cache/v_cache [B, Sk, Hk, D] or paged
  [num_blocks, page_block_size, Hk, D] with block_table int32 [B, max_blocks]; cache_seqlens an
  int or int32 [B] (None: the whole cache); k/v (new tokens [B, S_new, Hk, D]) are written into
  the cache at cache_seqlens before attention, as flash-attn does (through splitkv.append_kv, no
  host read; every argument is checked first, so a rejected call writes nothing; a position past a
  sequence's pages or a page id outside the cache is not written and the sequence's output is NaN). Returns out, or (out, softmax_lse [B, H, Sq]) with return_softmax_lse.
- flash_attn_varlen_func: q [total_q, H, D], k/v [total_k, Hk, D], cu_seqlens int32 [B + 1]; or,
  with block_table int32 [B, max_blocks] (flash-attn 2.6+, FlashAttention 3, vLLM's fork), k/v a
  paged cache [num_blocks, page_block_size, Hk, D] (page_block_size a multiple of 16) whose first
  seqused_k[b] tokens (else cu_seqlens_k[b + 1] - cu_seqlens_k[b]) are sequence b's keys, new ones
  included: one call for a serving step's mix of prefill chunks and decode rows (nothing is read
  on the host). A float8_e4m3fn cache is splitkv's 'fp8' format; k_descale /
  v_descale [B, Hk] must then be one scale per KV head for every sequence (stride 0 along B, as
  vLLM expands a layer's scale). Takes out=, returns out, (out, softmax_lse [H, total_q]) with
  return_softmax_lse, or (out, softmax_lse, None) with return_attn_probs.

Causal masks are aligned bottom-right, as in flash-attn >= 2.1. Forward only (no autograd).
Both take the sliding window and the softcap with flash-attn's semantics (docs/VARIANTS.md):
window_size=(left, right) (-1: unbounded), softcap (0: off), and vLLM's s_aux (a float32 sink
logit per query head, in every row's denominator).

Anything splitkv does not do raises NotImplementedError (splitkv.UnsupportedError) naming the
argument: rotary_cos/rotary_sin, cache_batch_idx, cache_leftpad, alibi_slopes, seqused_k without block_table, a
descale per sequence, FP8 queries, context parallelism (cp_world_size), dropout_p != 0,
gradients, Sq > 16 in flash_attn_with_kvcache, and head dims or dtypes this build lacks.

The outputs are those of splitkv.decode / splitkv.prefill with the same arguments, bit for bit.
"""

import torch

from .. import _common as cm
from .. import _torch_ops
from ..api import append_kv as _append
from ..api import decode as _decode
from ..api import prefill as _prefill

__all__ = ["flash_attn_with_kvcache", "flash_attn_varlen_func"]

_MAX_DECODE_Q = 16


def _unsupported(argument, what):
    return cm.unsupported(argument, what)


def _check_no_grad(*tensors):
    if torch.is_grad_enabled():
        for name, t in tensors:
            if t is not None and t.requires_grad:
                raise _unsupported(f"{name}.requires_grad", "splitkv is forward-only (no backward); "
                                   "call it under torch.no_grad() or torch.inference_mode()")


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _check_append_inputs(q, k_cache, k, v, cache_seqlens, block_table):
    """Everything the append and the decode after it read, checked before the cache is written:
    a rejected call writes nothing."""
    if not isinstance(cache_seqlens, torch.Tensor) or cache_seqlens.dtype != torch.int32 or \
            tuple(cache_seqlens.shape) != (q.shape[0],):
        got = (f"{_dtype_name(cache_seqlens)} {list(cache_seqlens.shape)}" if isinstance(cache_seqlens, torch.Tensor)
               else type(cache_seqlens).__name__)
        raise cm.invalid("cache_seqlens", f"an int or an int32 tensor [{q.shape[0]}]", got)
    if block_table is not None and block_table.dtype != torch.int32:
        raise cm.invalid("block_table.dtype", "int32", _dtype_name(block_table))
    if q.dtype != k_cache.dtype:
        raise cm.invalid("q.dtype", f"{_dtype_name(k_cache)} (the cache's dtype)", _dtype_name(q))
    for name, t in (("k", k), ("v", v)):
        cm.check_rank(name, t.shape, 4)
        want = [q.shape[0], k.shape[1], k_cache.shape[2], k_cache.shape[3]]
        if list(t.shape) != want:
            raise cm.invalid(f"{name}.shape", f"{want} ([B, S_new, Hk, D] of the cache)", str(list(t.shape)))
        if t.dtype != k_cache.dtype:
            raise cm.invalid(f"{name}.dtype", _dtype_name(k_cache), _dtype_name(t))
        if t.device != k_cache.device or cache_seqlens.device != k_cache.device:
            raise cm.invalid(f"{name}.device" if t.device != k_cache.device else "cache_seqlens.device",
                             str(k_cache.device), str(t.device if t.device != k_cache.device else cache_seqlens.device))


def _append_slots(k_cache, new, cache_seqlens, block_table):
    """Cache slots of the new tokens [B * new] (int64, on the device, no host read): position
    cache_seqlens[b] + j of sequence b; -1 where that position is outside the sequence's pages or
    the cache (append_kv then writes nothing for it, and the sequence's length past its capacity
    makes its decode output NaN)."""
    batch = cache_seqlens.shape[0]
    pos = cache_seqlens.to(torch.int64).unsqueeze(1) + torch.arange(new, device=k_cache.device)  # [B, new]
    if block_table is None:
        capacity = k_cache.shape[1]
        valid = (pos >= 0) & (pos < capacity)
        slots = torch.arange(batch, device=k_cache.device).unsqueeze(1) * capacity + pos
    else:
        page_size, max_pages = k_cache.shape[1], block_table.shape[1]
        entry = torch.div(pos, page_size, rounding_mode="floor")
        valid = (pos >= 0) & (entry < max_pages)
        page = block_table.gather(1, entry.clamp(0, max_pages - 1)).to(torch.int64)
        valid &= (page >= 0) & (page < k_cache.shape[0])  # a page id of -1 never wraps to the last page
        slots = page * page_size + pos % page_size
    return torch.where(valid, slots, torch.full_like(slots, -1)).reshape(-1)


def _append_kv(q, k_cache, v_cache, k, v, cache_seqlens, block_table):
    """Writes k, v [B, S_new, Hk, D] into the caches at positions cache_seqlens[b] + j through
    splitkv.append_kv, which validates every argument before it writes."""
    new = k.shape[1]
    slots = _append_slots(k_cache, new, cache_seqlens, block_table)
    rows = (q.shape[0] * new, k.shape[2], k.shape[3])
    _append(k.reshape(rows), v.reshape(rows), k_cache, v_cache, slots)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False,
                            s_aux=None):
    """flash_attn.flash_attn_with_kvcache on splitkv (see the module docstring for the subset)."""
    if rotary_cos is not None or rotary_sin is not None:
        raise _unsupported("rotary_cos" if rotary_cos is not None else "rotary_sin",
                           "rotary embedding is not supported; apply it to q and k before the call")
    if cache_batch_idx is not None:
        raise _unsupported("cache_batch_idx", "indexing the cache by batch is not supported")
    if cache_leftpad is not None:
        raise _unsupported("cache_leftpad", "left-padded caches are not supported")
    if alibi_slopes is not None:
        raise _unsupported("alibi_slopes", "ALiBi is not supported")
    if q.dim() == 4 and q.shape[1] > _MAX_DECODE_Q:
        raise _unsupported("q.shape[1]", f"decode takes 1..{_MAX_DECODE_Q} queries per sequence, got {q.shape[1]}")
    _check_no_grad(("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v))

    if cache_seqlens is None or isinstance(cache_seqlens, int):
        if cache_seqlens is None:  # flash-attn: the whole cache
            cache_seqlens = (k_cache.shape[1] if block_table is None
                             else block_table.shape[1] * k_cache.shape[1])
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    if k is not None or v is not None:
        if k is None or v is None:
            raise cm.invalid("v" if v is None else "k", "k and v together (the new tokens)", "only one of them")
        # Everything the append and the decode read is checked before the cache is written: the
        # tensors here, the decode's shapes by its plan (cached: decode() then finds it).
        _check_append_inputs(q, k_cache, k, v, cache_seqlens, block_table)
        _torch_ops._decode_plan_entry(q, k_cache, block_table, causal, softmax_scale, num_splits, 0, 0, None, None,
                                      None, variants=_torch_ops._variants_key(window_size, softcap, s_aux, None))
        _append_kv(q, k_cache, v_cache, k, v, cache_seqlens, block_table)
        cache_seqlens = cache_seqlens + k.shape[1]
    return _decode(q, k_cache, v_cache, cache_seqlens, block_table, causal=causal, softmax_scale=softmax_scale,
                   num_splits=num_splits, return_lse=return_softmax_lse, window_size=window_size, softcap=softcap,
                   sinks=s_aux)


def _descale_per_head(name, descale, batch, num_kv_heads):
    """FlashAttention 3's k_descale / v_descale [B, Hk] as splitkv's FP8 scale per KV head [Hk]:
    only a tensor that is the same for every sequence by construction (stride 0 along B, as
    vLLM's expand of a layer's scalar) maps without reading device memory."""
    if not isinstance(descale, torch.Tensor):
        raise cm.invalid(name, f"a float32 tensor [{batch}, {num_kv_heads}]", type(descale).__name__)
    if descale.dim() != 2 or descale.shape[1] != num_kv_heads:
        raise cm.invalid(f"{name}.shape", f"[B, {num_kv_heads}]", str(list(descale.shape)))
    if descale.shape[0] > 1 and descale.stride(0) != 0:
        raise _unsupported(name, "a scale per sequence: splitkv's FP8 caches take one scale per KV head; pass the "
                                 "layer's scale expanded over the batch (stride 0 along dim 0)")
    return descale[0].float()


def _paged_lengths(cu_seqlens_k, seqused_k, batch):
    """Keys per sequence of a paged cache: seqused_k (FlashAttention 3, vLLM), else the counts of
    cu_seqlens_k (flash-attn 2's paged varlen), computed on the device (no host read)."""
    if seqused_k is not None:
        return seqused_k
    if cu_seqlens_k is None:
        raise cm.invalid("seqused_k", "the keys per sequence (int32 [B]) with block_table, or cu_seqlens_k", "None")
    if not isinstance(cu_seqlens_k, torch.Tensor) or cu_seqlens_k.dim() != 1 or cu_seqlens_k.shape[0] != batch + 1:
        raise cm.invalid("cu_seqlens_k", f"an int32 tensor [{batch + 1}]", getattr(cu_seqlens_k, "shape", None))
    return (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int32)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None,
                           s_aux=None, seqused_k=None, out=None, return_softmax_lse=False, scheduler_metadata=None,
                           q_descale=None, k_descale=None, v_descale=None, num_splits=0, fa_version=None,
                           cp_world_size=1, cp_rank=0, cp_tot_seqused_k=None):
    """flash_attn.flash_attn_varlen_func on splitkv (see the module docstring for the subset).
    `deterministic` concerns flash-attn's backward; splitkv's forward is always deterministic.

    Positional arguments follow flash-attn 2 (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    max_seqlen_k, ...); FlashAttention 3 / vLLM callers pass the rest by keyword. With block_table,
    k and v are a paged cache [num_blocks, page_block_size, Hk, D] and each sequence's keys are its
    first seqused_k[b] (or cu_seqlens_k[b + 1] - cu_seqlens_k[b]) cache tokens, the new ones
    included: one call serves a serving step's prefill chunks and decode rows (splitkv.prefill over
    the cache). scheduler_metadata and fa_version are accepted and ignored (splitkv plans the call
    itself); q_descale / k_descale / v_descale apply to FP8 inputs only, as in FlashAttention 3."""
    if dropout_p != 0.0:
        raise _unsupported("dropout_p", f"dropout is not supported (inference only), got {dropout_p}")
    if alibi_slopes is not None:
        raise _unsupported("alibi_slopes", "ALiBi is not supported")
    if cp_world_size != 1 or cp_tot_seqused_k is not None:
        raise _unsupported("cp_world_size", "context parallelism through this front is not supported; shard "
                                            "with splitkv.decode_shard and splitkv.combine (docs/CONTEXT_SHARDS.md)")
    if cu_seqlens_q is None:
        raise cm.invalid("cu_seqlens_q", "an int32 tensor [B + 1]", "None")
    _check_no_grad(("q", q), ("k", k), ("v", v))
    lse_wanted = return_attn_probs or return_softmax_lse
    if block_table is None:
        if seqused_k is not None:
            raise _unsupported("seqused_k", "seqused_k without block_table (a prefix of each sequence's packed "
                                            "keys) is not supported; pass the used keys' cu_seqlens_k")
        for name, descale in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
            if descale is not None and k.dtype not in (torch.float16, torch.bfloat16):
                raise _unsupported(name, "FP8 K/V token tensors are not supported (FP8 is a cache format: pass "
                                         "block_table)")
        if cu_seqlens_k is None:
            raise cm.invalid("cu_seqlens_k", "an int32 tensor [B + 1] (or block_table and seqused_k)", "None")
        result = _prefill(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k, causal=causal, softmax_scale=softmax_scale, out=out,
                          return_lse=lse_wanted, window_size=window_size, softcap=softcap, num_splits=num_splits,
                          sinks=s_aux)
    else:
        if not isinstance(block_table, torch.Tensor):
            raise cm.invalid("block_table", "an int32 tensor [B, max_blocks]", type(block_table).__name__)
        batch = cu_seqlens_q.shape[0] - 1
        seq_lens = _paged_lengths(cu_seqlens_k, seqused_k, batch)
        kv_format, k_scales, v_scales = None, None, None
        if k.dtype == torch.float8_e4m3fn or v.dtype == torch.float8_e4m3fn:
            if k.dtype != v.dtype:
                raise cm.invalid("v.dtype", f"{_dtype_name(k)} (the dtype of k)", _dtype_name(v))
            if q.dtype == torch.float8_e4m3fn:
                raise _unsupported("q.dtype", "FP8 queries are not supported; pass q in fp16/bf16")
            kv_format = "fp8"
            ones = None
            if k_descale is None or v_descale is None:
                ones = torch.ones(k.shape[2], dtype=torch.float32, device=k.device)
            k_scales = ones if k_descale is None else _descale_per_head("k_descale", k_descale, batch, k.shape[2])
            v_scales = ones if v_descale is None else _descale_per_head("v_descale", v_descale, batch, k.shape[2])
        # 16-bit caches: the descales are ignored, as FlashAttention 3 does.
        result = _prefill(q, k, v, cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                          causal=causal, softmax_scale=softmax_scale, out=out, return_lse=lse_wanted,
                          window_size=window_size, softcap=softcap, num_splits=num_splits, seq_lens=seq_lens,
                          block_table=block_table, kv_format=kv_format, k_scales=k_scales, v_scales=v_scales,
                          sinks=s_aux)
    if return_attn_probs:
        out, lse = result
        return out, lse, None  # flash-attn's S_dmask exists only with dropout
    return result
