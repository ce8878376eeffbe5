"""The public functions: decode, prefill, plan_decode, plan_prefill.

torch tensors go to the torch front (_torch_ops: CUDA kernels, or the CPU backend / reference for
CPU tensors); numpy arrays go to the host front (_numpy).
"""

from . import _common as cm
from . import _numpy
from . import _splitkv as _C

try:
    import torch as _torch
except ImportError:
    _torch = None
    _Tensor = ()
    _torch_ops = None
else:
    from . import _torch_ops

    _Tensor = _torch.Tensor


_NO_WINDOW = cm.NO_WINDOW


def decode(q, k_cache, v_cache, seq_lens, block_table=None, *, causal=False, softmax_scale=None, num_splits=0,
           max_splits=0, split_tokens=0, out=None, return_lse=False, workspace=None, max_seqlen_k=None,
           family=None, kv_format=None, k_scales=None, v_scales=None, window_size=_NO_WINDOW, softcap=0.0,
           sinks=None, tree_mask=None, k_tail=None, tail_slots=None):
    """Attention of 1..16 new queries per sequence against a KV cache.

    q: [B, q_len, Hq, D] (fp16/bf16); k_cache, v_cache: contiguous [B, capacity, Hkv, D] or, with
    block_table (int32 [B, max_pages]), paged [num_pages, page_size, Hkv, D]; seq_lens: int32 [B],
    keys per sequence. causal: among the q_len queries, aligned bottom-right (query i sees keys
    [0, seq_len - q_len + i]). softmax_scale: None = 1/sqrt(D). num_splits (0 = planner),
    max_splits (cap, for CUDA graphs), split_tokens (batch-invariant fixed split size).
    out: optional output [B, q_len, Hq, D]; return_lse: also return LSE fp32 [B, Hq, q_len]
    (natural log). workspace: optional uint8 CUDA tensor of at least plan.workspace_bytes (else
    torch.empty from the caching allocator). max_seqlen_k: optional bound on seq_lens used for
    planning (default: the cache capacity); lengths are never read on the host.

    kv_format: how the cache stores K and V (docs/KV_FORMATS.md): None/'native' (the dtype of q),
    'fp16', 'bf16', or quantized 'fp8', 'int8', 'int4', 'k8v4'. A quantized cache holds codes
    (uint8; fp8 also float8_e4m3fn; int4 packs two codes a byte, so its last dim is D/2) and takes
    k_scales / v_scales: fp8 float32 [Hkv]; int8/int4/k8v4 float16 (scale, min) pairs
    [pages, Hkv, page_size, 2] (contiguous: [B, Hkv, capacity, 2]). splitkv.quantize_kv makes them.
    A format without kernels raises NotImplementedError naming kv_format (the C++ message).

    Attention variants (docs/VARIANTS.md): window_size=(left, right) as FlashAttention's (-1:
    unbounded; causal takes right -1 or 0), softcap (0: off), sinks (float32 [Hq]: a logit per query
    head in every row's denominator; the LSE returned includes it), tree_mask (uint8 [B, q_len,
    ceil(q_len / 8)], numpy.packbits(mask, axis=-1, bitorder='little') of which draft token each
    query sees). The CPU backend (numpy arrays, CPU tensors) implements them all; on the GPU the
    decode kernels serve the window, softcap and sinks, and a tree mask raises NotImplementedError
    naming tree_mask (the C++ message) until they serve it.

    k_tail / tail_slots: the 16-bit tail of a keys-per-channel cache ('int8_kc', 'int4_kc', 'k8v4_kc';
    splitkv.quantize_kv_kc makes one) and each sequence's row of it (None: row b).

    Returns out, or (out, lse).
    """
    if isinstance(q, _Tensor):
        # Positional on purpose: passing these by keyword measured slower per call. No window is
        # None there (decode_out plans without variants when none is set).
        return _torch_ops.decode(q, k_cache, v_cache, seq_lens, block_table, causal, softmax_scale, num_splits,
                                 max_splits, split_tokens, out, return_lse, workspace, max_seqlen_k, family,
                                 kv_format, k_scales, v_scales, None if window_size is _NO_WINDOW else window_size,
                                 softcap, sinks, tree_mask, k_tail, tail_slots)
    return _numpy.decode(q, k_cache, v_cache, seq_lens, block_table, causal=causal, softmax_scale=softmax_scale,
                         num_splits=num_splits, max_splits=max_splits, split_tokens=split_tokens, out=out,
                         return_lse=return_lse, max_seqlen_k=max_seqlen_k, family=family, kv_format=kv_format,
                         k_scales=k_scales, v_scales=v_scales, window_size=window_size, softcap=softcap, sinks=sinks,
                         tree_mask=tree_mask, k_tail=k_tail, tail_slots=tail_slots)


def decode_shard(q, k_cache, v_cache, seq_lens, block_table=None, *, keys_after=None, causal=False,
                 softmax_scale=None, num_splits=0, max_splits=0, split_tokens=0, max_seqlen_k=None, family=None,
                 kv_format=None, k_scales=None, v_scales=None):
    """decode() over a shard of a longer context, returning the plan's split partials to merge.

    The cache holds, per sequence, seq_lens[b] keys of its context starting at some key offset;
    keys_after (int32 [B], on the device of q; None = 0) counts the context's keys after this
    shard, so causal masking uses global positions (docs/CONTEXT_SHARDS.md). Other arguments as in
    decode(). Returns (partial_o fp32 [S, B * q_len, Hq, D], partial_lse fp32 [S, B * q_len, Hq]):
    each split's output normalized over its own keys and its natural-log LSE (-inf: no key).
    Concatenate the partials of every shard in key order (axis 0) and merge them with combine().
    """
    if isinstance(q, _Tensor):
        return _torch_ops.decode_shard(q, k_cache, v_cache, seq_lens, block_table, keys_after, causal=causal,
                                       softmax_scale=softmax_scale, num_splits=num_splits, max_splits=max_splits,
                                       split_tokens=split_tokens, max_seqlen_k=max_seqlen_k, family=family,
                                       kv_format=kv_format, k_scales=k_scales, v_scales=v_scales)
    return _numpy.decode_shard(q, k_cache, v_cache, seq_lens, block_table, keys_after, causal=causal,
                               softmax_scale=softmax_scale, num_splits=num_splits, max_splits=max_splits,
                               split_tokens=split_tokens, max_seqlen_k=max_seqlen_k, family=family,
                               kv_format=kv_format, k_scales=k_scales, v_scales=v_scales)


def prefill(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, causal=False,
            softmax_scale=None, num_splits=0, strategy=None, out=None, return_lse=False, workspace=None, family=None,
            kv_format=None, window_size=_NO_WINDOW, softcap=0.0, sinks=None, seq_lens=None, block_table=None,
            k_scales=None, v_scales=None, k_tail=None, tail_slots=None):
    """Attention of many queries per sequence (prompt processing, chunked prefill).

    Padded: q [B, Lq, Hq, D], k, v [B, Lk, Hkv, D]. Varlen (cu_seqlens_q/k int32 [B + 1] given):
    q [total_q, Hq, D], k, v [total_k, Hkv, D], sequence b spanning [cu[b], cu[b+1]); max_seqlen_q/k
    bound the lengths (default: the token counts; on the GPU nothing reads cu_seqlens on the host,
    so pass the real bounds for a tight grid). causal: aligned bottom-right. strategy: None/'auto',
    'split-q', 'split-kv', 'split-v', 'two-pass'. LSE: padded [B, Hq, Lq], varlen [Hq, total_q].

    kv_format: the problem's KV format ('native', 'fp16', 'bf16'; the quantized formats only over a
    KV cache, below).

    Over a KV cache (chunked prefill, one varlen call for a serving step's chunks and rows; seq_lens
    given): k and v are a decode cache as decode() takes it (contiguous [B, capacity, Hkv, D], or
    paged [pages, page_size, Hkv, D] with block_table int32 [B, max_pages]; any kv_format, with its
    k_scales / v_scales and the *_kc k_tail / tail_slots), seq_lens int32 [B] counts each sequence's
    keys there, the new chunk's included (append it first: append_kv), and the queries are padded
    [B, Lq, Hq, D] or varlen [total_q, Hq, D] by cu_seqlens_q (cu_seqlens_k stays None): the last
    queries of their sequence, causal bottom-right. max_seqlen_k bounds seq_lens (default: the
    cache's capacity).

    window_size, softcap, sinks: as in decode() (docs/VARIANTS.md); on the GPU the one-pass kernels'
    variants instances serve them (strategy 'two-pass' / 'split-v' refuse them by name).

    Returns out, or (out, lse). numpy arrays (and CPU tensors) run on the fp64 reference.
    """
    if isinstance(q, _Tensor):
        variant = window_size is not _NO_WINDOW or softcap
        return _torch_ops.prefill(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                  max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, causal=causal,
                                  softmax_scale=softmax_scale, num_splits=num_splits, strategy=strategy, out=out,
                                  return_lse=return_lse, workspace=workspace, family=family, kv_format=kv_format,
                                  window_size=window_size if variant else None, softcap=softcap, seq_lens=seq_lens,
                                  block_table=block_table, k_scales=k_scales, v_scales=v_scales, k_tail=k_tail,
                                  tail_slots=tail_slots, sinks=sinks)
    return _numpy.prefill(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k, causal=causal, softmax_scale=softmax_scale, out=out,
                          return_lse=return_lse, num_splits=num_splits, strategy=strategy, family=family,
                          kv_format=kv_format, window_size=window_size, softcap=softcap, sinks=sinks,
                          seq_lens=seq_lens, block_table=block_table, k_scales=k_scales, v_scales=v_scales,
                          k_tail=k_tail, tail_slots=tail_slots)


def combine(partial_o, partial_lse, *, out=None, seq_len=1, dtype=None, return_lse=False, sinks=None):
    """Merges split partials computed by the caller (e.g. shards of a KV cache attended separately).

    partial_o: fp32 [num_splits, batch * seq_len, H, D], each normalized over its own keys;
    partial_lse: fp32 [num_splits, batch * seq_len, H] (natural log). Row b * seq_len + i holds
    query i of sequence b. out: [batch, seq_len, H, D] (default: allocated in `dtype`, bf16 for
    torch, fp16 for numpy). LSE (return_lse): fp32 [batch, H, seq_len]. Splits are folded in
    order (deterministic); empty partials (LSE = -inf) weigh 0; rows with no keys give 0, -inf.
    CUDA tensors run the combine kernel; host arrays and CPU tensors an fp64 host merge.
    sinks: float32 [H], a sink logit per head folded once into every merged row (docs/VARIANTS.md):
    how shards computed without sinks get them (a tensor on the device of partial_o for tensors).
    """
    if isinstance(partial_o, _Tensor):
        return _torch_ops.combine(partial_o, partial_lse, out=out, seq_len=seq_len, dtype=dtype,
                                  return_lse=return_lse, sinks=sinks)
    return _numpy.combine(partial_o, partial_lse, out=out, seq_len=seq_len, dtype=dtype, return_lse=return_lse,
                          sinks=sinks)


def append_kv(k, v, k_cache, v_cache, slots, *, k_scales=None, v_scales=None, kv_format=None, positions=None,
              tail_slots=None, k_tail=None):
    """Writes new tokens' keys and values into a KV cache, in place (torch tensors).

    k, v: [tokens, Hkv, D] fp16/bf16 (last dim contiguous; e.g. slices of a fused QKV tensor).
    slots: int64 or int32 [tokens], the cache row of each token: block * k_cache.shape[1] +
    position, i.e. page * page_size + offset for a paged cache, b * capacity + position for a
    contiguous one; -1 (or any row outside the cache) skips the token. k_cache, v_cache (and k_scales, v_scales) are
    the cache exactly as decode() reads it in kv_format: 16-bit rows are copied, quantized formats
    are quantized on the GPU to the bytes of the host quantizer (splitkv.quantize_kv), INT formats
    writing each row's (scale, min) pair into k_scales / v_scales, FP8 reading its per-head scales.
    Never reads device memory on the host and never allocates: capturable in a CUDA graph. CPU
    tensors are written by the host quantizer. Returns None.

    Keys per channel ('int8_kc', 'int4_kc', 'k8v4_kc'; CUDA tensors): each token also gives its
    position in its sequence (positions, int64 or int32 [tokens]) and its sequence's row of the
    16-bit tail ring (tail_slots, int32 [tokens]; k_tail [rows, Hkv, 128, D] in k's dtype, written):
    a group of 64 positions is quantized per channel when its last token arrives (docs/KV_FORMATS.md).
    A sequence's tokens must be contiguous in the call and in position order.
    """
    if not isinstance(k_cache, _Tensor):
        raise cm.invalid("k_cache", "a torch tensor (append_kv writes a torch KV cache)", type(k_cache).__name__)
    _torch_ops.append_kv(k, v, k_cache, v_cache, slots, k_scales=k_scales, v_scales=v_scales, kv_format=kv_format,
                         positions=positions, tail_slots=tail_slots, k_tail=k_tail)


def kernel_families():
    """The registered kernel families (name, kind, arch, strategies, head dims, dtypes, priority)
    and the instances this build compiled (`.compiled`)."""
    return _C.kernel_families()


def _is_array(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


def plan_decode(*args, causal=False, softmax_scale=None, num_splits=0, max_splits=0, split_tokens=0,
                merge="auto", prefill_route=True, family=None, device=None, kv_format=None, **shape):
    """A decode plan; print it for the CLI's `splitkv plan` description.

    Either from tensors, giving the plan decode() would use for them:
        plan_decode(q, k_cache, v_cache, seq_lens, block_table=None, causal=..., num_splits=...)
    or from shapes:
        plan_decode(batch=8, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=32768,
                    q_len=1, page_size=0, dtype='bf16', device=None)
    device: None = GPU 0 if there is one, else the H200 description; an index; 'h200'; a
    splitkv.DeviceInfo. kv_format: as in decode() (a format no kernel of this planner reads raises
    NotImplementedError naming kv_format). merge: how the splits merge, "auto" (the planner: the
    combine kernel, or on sm_90 a thread-block cluster where that measured faster), "combine-kernel",
    "cluster", "fused" or "atomic" (splitkv.PlanOptions; shape form only, like atomic_reference_lse).
    prefill_route=False keeps the decode kernels where the planner would serve causal rows of 25-128
    packed queries per KV head by chunked prefill (the plan's decode_via_prefill says which). The
    shape form also takes every other PlanTuning switch by name (splitkv.PlanTuning).
    """
    if args and _is_array(args[0]):
        if merge != "auto":
            raise TypeError("plan_decode(tensors): merge is taken by the shape form only")
        q, k_cache = args[0], args[1]
        block_table = args[4] if len(args) > 4 else shape.pop("block_table", None)
        max_seqlen_k = shape.pop("max_seqlen_k", None)
        if isinstance(q, _Tensor):
            return _torch_ops.plan_decode(q, k_cache, block_table, causal=causal, softmax_scale=softmax_scale,
                                          num_splits=num_splits, max_splits=max_splits, split_tokens=split_tokens,
                                          max_seqlen_k=max_seqlen_k, family=family, kv_format=kv_format,
                                          prefill_route=bool(prefill_route))
        return _numpy.plan_decode(q, k_cache, None, block_table, causal=causal, softmax_scale=softmax_scale,
                                  num_splits=num_splits, max_splits=max_splits, split_tokens=split_tokens,
                                  max_seqlen_k=max_seqlen_k, family=family,
                                  device="h200" if device is None else device, kv_format=kv_format,
                                  prefill_route=bool(prefill_route))
    names = ("batch", "num_q_heads", "num_kv_heads", "head_dim")
    for name, value in zip(names, args):
        shape[name] = value
    problem = _C.DecodeProblem(
        batch=int(shape.pop("batch", 0)), num_q_heads=int(shape.pop("num_q_heads", 0)),
        num_kv_heads=int(shape.pop("num_kv_heads", 0)), head_dim=int(shape.pop("head_dim", 0)),
        q_len=int(shape.pop("q_len", 1)), max_kv_len=int(shape.pop("max_kv_len", 0)),
        page_size=int(shape.pop("page_size", 0)), causal=bool(causal),
        dtype=cm.DTYPE_BY_CODE[cm.dtype_code(shape.pop("dtype", "bf16"))], softmax_scale=cm.scale_value(softmax_scale),
        kv_format=cm.kv_format(kv_format))
    tuning = {name: shape.pop(name) for name in cm.tuning_names() if name in shape}
    tuning["prefill_route"] = bool(prefill_route)
    reference_lse = shape.pop("atomic_reference_lse", None)
    if shape:
        raise TypeError(f"plan_decode() got unexpected keyword arguments {sorted(shape)}")
    options = cm.plan_options(None, num_splits, max_splits, split_tokens, merge, family, tuning)
    if reference_lse is not None:
        options.atomic_reference_lse = float(reference_lse)
    return _C.plan_decode(problem, cm.device_info(device), options)


def plan_prefill(*args, causal=False, softmax_scale=None, num_splits=0, strategy=None, family=None, device=None,
                 kv_format=None, **shape):
    """A prefill plan; print it for the CLI's `splitkv plan --mode prefill` description.

    From tensors: plan_prefill(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
    max_seqlen_k=None, ...); or from shapes: plan_prefill(batch=..., num_q_heads=...,
    num_kv_heads=..., head_dim=..., max_q_len=..., max_kv_len=..., varlen=False, dtype='bf16').
    """
    if args and _is_array(args[0]):
        q, k = args[0], args[1]
        cu_q = shape.pop("cu_seqlens_q", None)
        cu_k = shape.pop("cu_seqlens_k", None)
        max_q = shape.pop("max_seqlen_q", None)
        max_k = shape.pop("max_seqlen_k", None)
        if isinstance(q, _Tensor):
            return _torch_ops.plan_prefill(q, k, cu_q, cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k, causal=causal,
                                           softmax_scale=softmax_scale, num_splits=num_splits, strategy=strategy,
                                           family=family, kv_format=kv_format)
        varlen = cu_q is not None
        batch = len(cu_q) - 1 if varlen else 0
        problem = cm.prefill_problem(q.shape, k.shape, varlen, batch, _numpy.code(q, "q"), causal, softmax_scale,
                                     max_q, max_k, cm.kv_format(kv_format))
    else:
        names = ("batch", "num_q_heads", "num_kv_heads", "head_dim")
        for name, value in zip(names, args):
            shape[name] = value
        problem = _C.PrefillProblem(
            batch=int(shape.pop("batch", 0)), num_q_heads=int(shape.pop("num_q_heads", 0)),
            num_kv_heads=int(shape.pop("num_kv_heads", 0)), head_dim=int(shape.pop("head_dim", 0)),
            max_q_len=int(shape.pop("max_q_len", 0)), max_kv_len=int(shape.pop("max_kv_len", 0)),
            varlen=bool(shape.pop("varlen", False)), causal=bool(causal),
            dtype=cm.DTYPE_BY_CODE[cm.dtype_code(shape.pop("dtype", "bf16"))],
            softmax_scale=cm.scale_value(softmax_scale), kv_format=cm.kv_format(kv_format))
    if shape:
        raise TypeError(f"plan_prefill() got unexpected keyword arguments {sorted(shape)}")
    options = cm.plan_options(strategy, num_splits, 0, 0, "auto", family)
    return _C.plan_prefill(problem, cm.device_info(device), options)
