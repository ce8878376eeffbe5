"""The torch front: raw-pointer descriptors, a plan cache, and the torch.library operators.

    torch.ops.splitkv.decode_out(q, k_cache, v_cache, seq_lens, block_table, out, lse, workspace,
                                 causal, softmax_scale, num_splits, max_splits, split_tokens,
                                 max_seqlen_k, family, k_scales, v_scales, kv_format) -> ()
    torch.ops.splitkv.decode_shard_out(q, k_cache, v_cache, seq_lens, block_table, keys_after,
                                       partial_o, partial_lse, causal, ...) -> ()
    torch.ops.splitkv.prefill_out(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, workspace,
                                  max_seqlen_q, max_seqlen_k, causal, softmax_scale, num_splits,
                                  strategy, family, kv_format, window_size, softcap, seq_lens,
                                  block_table, k_scales, v_scales, k_tail, tail_slots) -> ()

Out-variant operators (they write `out`, `lse` and `workspace`, return nothing), registered with
Library.define/impl for CUDA and CPU plus a fake (meta) kernel, so torch.compile(fullgraph=True)
traces through them and functionalization knows what they mutate.

Eager calls to splitkv.decode/prefill skip the dispatcher and call the same implementation
directly (the dispatcher's cost per call is in docs/PYTHON.md); under torch.compile, a dispatch
mode (e.g. fake tensors) or with tensor subclasses they go through torch.ops.splitkv.*.

The implementation never reads device memory on the host: lengths bound the plan only through
shapes or the caller's max_seqlen_*; the stream is the current torch stream of the tensors'
device (a capture stream during CUDA-graph capture); that device is made current for the launch;
the workspace is the caller's or comes from torch's caching allocator (torch.empty).
"""

import torch

from . import _common as cm
from . import _splitkv as _C

from ._torch_codes import _CODES, code_desc

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _raw_stream is None:  # a torch build without CUDA: never called with a GPU index

    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


_is_compiling = torch.compiler.is_compiling
_dispatch_stack_len = torch._C._len_torch_dispatch_stack
_Tensor = torch.Tensor
_MAX_CACHED_PLANS = 4096
_decode_plans = {}
_prefill_plans = {}


def _eager():
    """True when splitkv may call its implementation directly (no tracing, no dispatch mode)."""
    return not _is_compiling() and not _dispatch_stack_len()


# ---- error paths (only reached when something is wrong) ------------------------------------------


def _device_name(index):
    return "cpu" if index < 0 else f"cuda:{index}"


def _check_devices(dev, named, of="q"):
    for name, t in named:
        if t is not None and t.get_device() != dev:
            raise cm.invalid(f"{name}.device", f"{_device_name(dev)} (the device of {of})",
                             _device_name(t.get_device()))


def _check_dtypes(named):
    for name, t in named:
        if t is not None and t.dtype not in _CODES:
            raise cm.invalid(f"{name}.dtype", cm.EXPECTED_DTYPE[name], str(t.dtype).replace("torch.", ""))
    raise AssertionError("unreachable")


def _workspace(workspace, nbytes, dev):
    """(pointer, bytes) of the caller's workspace, or of a fresh one from the caching allocator."""
    if workspace is None:
        workspace = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    elif workspace.get_device() != dev:
        _check_devices(dev, [("workspace", workspace)])
    return workspace.data_ptr(), workspace.numel() * workspace.element_size()


def _kv_descs(quant, k_cache, v_cache, head_dim):
    k_elem, v_elem = quant[0], quant[1]
    return code_desc(k_cache, "k", k_elem, head_dim), code_desc(v_cache, "v", v_elem, head_dim)


def _scale_descs(fmt, k_scales, v_scales, dev, of="q"):
    """Descriptors of the scale tensors (None when absent); the C++ checks name what is wrong."""
    cm.check_scales_given(fmt, k_scales, v_scales)
    descs = []
    for name, s in (("k_scales", k_scales), ("v_scales", v_scales)):
        if s is None:
            descs.append(None)
            continue
        if not isinstance(s, _Tensor):
            raise cm.invalid(name, cm.expected_scales(fmt, name), type(s).__name__)
        if s.get_device() != dev:
            _check_devices(dev, [(name, s)], of)
        if s.dtype not in (torch.float32, torch.float16):
            raise cm.invalid(f"{name}.dtype", cm.expected_scales(fmt, name), str(s.dtype).replace("torch.", ""))
        descs.append((s.data_ptr(), _CODES[s.dtype], s.shape, s.stride()))
    return descs


def _cache_put(cache, key, entry):
    if len(cache) >= _MAX_CACHED_PLANS:
        cache.clear()
    cache[key] = entry
    return entry


# ---- decode --------------------------------------------------------------------------------------


def _variants_key(window_size, softcap, sinks, tree_mask):
    """What a decode plan takes of the attention variants: None without any (the common case),
    else (window_left, window_right, softcap, has sinks, has a tree mask)."""
    window = cm.NO_WINDOW if window_size is None else cm._window_ints(window_size)
    if window == cm.NO_WINDOW and not softcap and sinks is None and tree_mask is None:
        return None
    if len(window) != 2:
        raise cm.invalid("window_size", cm._WINDOW_EXPECTED, window_size)
    return window[0], window[1], float(softcap), sinks is not None, tree_mask is not None


def _new_decode_plan(key, q, k_cache, block_table):
    """prefill_route: PlanTuning.prefill_route; off for a context shard's plan (keys_after and
    caller partials need the decode kernels). variants (the key's last field): _variants_key."""
    (_, _, bt_shape, _, causal, softmax_scale, num_splits, max_splits, split_tokens, max_seqlen_k, dev, family,
     kv_format, prefill_route, variants) = key
    code = _CODES.get(q.dtype)
    if code is None:
        _check_dtypes([("q", q)])
    fmt = cm.kv_format(kv_format)
    problem = cm.decode_problem(q.shape, k_cache.shape, bt_shape, code, causal, softmax_scale, max_seqlen_k, fmt)
    if variants is not None:
        left, right, softcap, has_sinks, has_tree = variants
        cm.set_variants(problem, (left, right), softcap, True if has_sinks else None, True if has_tree else None)
    options = cm.plan_options(None, num_splits, max_splits, split_tokens, family=family,
                              tuning={"prefill_route": bool(prefill_route)})
    plan = _C.plan_decode(problem, cm.device_info(dev if dev >= 0 else "h200"), options)
    elements = cm.kv_elements(fmt)
    quant = None if elements is None else (elements[0], elements[1], fmt)
    return _cache_put(_decode_plans, key, (plan, plan.workspace_bytes, quant))


def _variant_descs(dev, sinks, tree_mask, k_tail, tail_slots):
    """Descriptors of the variants' and the keys-per-channel tail's tensors (None when absent)."""
    named = [("sinks", sinks), ("tree_mask", tree_mask), ("k_tail", k_tail), ("tail_slots", tail_slots)]
    _check_devices(dev, named)
    if tree_mask is not None and tree_mask.dtype != torch.uint8:
        raise cm.invalid("tree_mask.dtype", "uint8 (the mask's bits packed little-endian along the last dim)",
                         str(tree_mask.dtype).replace("torch.", ""))
    try:
        return {"sinks": _desc(sinks),
                "tree_mask": None if tree_mask is None else cm.code_desc(tree_mask.data_ptr(), cm.I8,
                                                                          tree_mask.shape, tree_mask.stride()),
                "k_tail": _desc(k_tail), "tail_slots": _desc(tail_slots)}
    except KeyError:
        _check_dtypes([(n, t) for n, t in named if n != "tree_mask"])


def decode_out(q, k_cache, v_cache, seq_lens, block_table, out, lse, workspace, causal, softmax_scale, num_splits,
               max_splits, split_tokens, max_seqlen_k, family=None, k_scales=None, v_scales=None, kv_format=None,
               window_size=None, softcap=0.0, sinks=None, tree_mask=None, k_tail=None, tail_slots=None):
    """Implementation of splitkv::decode_out (CUDA and CPU)."""
    dev = q.get_device()
    if (k_cache.get_device() != dev or v_cache.get_device() != dev or seq_lens.get_device() != dev
            or out.get_device() != dev or (block_table is not None and block_table.get_device() != dev)
            or (lse is not None and lse.get_device() != dev)):
        _check_devices(dev, [("k", k_cache), ("v", v_cache), ("seq_lens", seq_lens), ("block_table", block_table),
                             ("out", out), ("lse", lse)])
    q_shape, k_shape, q_dtype = q.shape, k_cache.shape, q.dtype
    bt_shape = None if block_table is None else block_table.shape
    variants = (None if window_size is None and not softcap and sinks is None and tree_mask is None
                else _variants_key(window_size, softcap, sinks, tree_mask))
    key = (q_shape, k_shape, bt_shape, q_dtype, causal, softmax_scale, num_splits, max_splits, split_tokens,
           max_seqlen_k, dev, family, kv_format, True, variants)
    entry = _decode_plans.get(key)
    if entry is None:
        entry = _new_decode_plan(key, q, k_cache, block_table)
    plan, ws_bytes, quant = entry
    codes = _CODES
    # Strides None mean contiguous: is_contiguous() costs about half of stride() (measured, this is the
    # per-call hot path of splitkv.decode).
    try:
        qd = (q.data_ptr(), codes[q_dtype], q_shape, None if q.is_contiguous() else q.stride())
        if quant is None:
            kd = (k_cache.data_ptr(), codes[k_cache.dtype], k_shape,
                  None if k_cache.is_contiguous() else k_cache.stride())
            vd = (v_cache.data_ptr(), codes[v_cache.dtype], v_cache.shape,
                  None if v_cache.is_contiguous() else v_cache.stride())
        else:
            kd, vd = _kv_descs(quant, k_cache, v_cache, q_shape[3])
        sd = (seq_lens.data_ptr(), codes[seq_lens.dtype], seq_lens.shape,
              None if seq_lens.is_contiguous() else seq_lens.stride())
        bd = None if block_table is None else (block_table.data_ptr(), codes[block_table.dtype], bt_shape,
                                               None if block_table.is_contiguous() else block_table.stride())
        od = (out.data_ptr(), codes[out.dtype], out.shape, None if out.is_contiguous() else out.stride())
        ld = None if lse is None else (lse.data_ptr(), codes[lse.dtype], lse.shape, lse.stride())
    except KeyError:
        _check_dtypes([("q", q), ("k", k_cache), ("v", v_cache), ("seq_lens", seq_lens), ("block_table", block_table),
                       ("out", out), ("lse", lse)])
    if quant is None and k_scales is None and v_scales is None:
        ksd = vsd = None
    else:
        ksd, vsd = _scale_descs(cm.kv_format(kv_format) if quant is None else quant[2], k_scales, v_scales, dev)
    extra = ({} if sinks is None and tree_mask is None and k_tail is None and tail_slots is None
             else _variant_descs(dev, sinks, tree_mask, k_tail, tail_slots))
    if dev < 0:
        _C.cpu_run_decode(plan, qd, kd, vd, sd, bd, od, ld, ksd, vsd, **extra)
        return
    if ws_bytes:
        ws_ptr, ws_n = _workspace(workspace, ws_bytes, dev)
    else:
        ws_ptr = ws_n = 0
    _C.run_decode(plan, qd, kd, vd, sd, bd, od, ld, ws_ptr, ws_n, _raw_stream(dev), dev, ksd, vsd, **extra)


def _lse_buffer(q, varlen):
    """The LSE output for q: varlen [Hq, total_q], padded (and decode) [B, Hq, Lq]."""
    if varlen:
        if q.dim() != 3:
            raise cm.invalid("q.rank", "3", str(q.dim()))
        return torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    if q.dim() != 4:
        raise cm.invalid("q.rank", "4", str(q.dim()))
    return torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)


def _format_arg(kv_format):
    """kv_format as the operators take it: None or a name."""
    if kv_format is None or type(kv_format) is str:  # the common case first: isinstance on the enum is slower
        return kv_format
    if isinstance(kv_format, _C.KvFormat):
        return kv_format.name
    return kv_format


def decode(q, k_cache, v_cache, seq_lens, block_table, causal, softmax_scale, num_splits, max_splits,
           split_tokens, out, return_lse, workspace, max_seqlen_k, family, kv_format=None, k_scales=None,
           v_scales=None, window_size=None, softcap=0.0, sinks=None, tree_mask=None, k_tail=None, tail_slots=None):
    if not isinstance(seq_lens, _Tensor):  # a list would need a host-to-device copy: the caller's call
        raise cm.invalid("seq_lens", "an int32 tensor on the device of q", type(seq_lens).__name__)
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = _lse_buffer(q, varlen=False) if return_lse else None
    kv_format = _format_arg(kv_format)
    if type(q) is _Tensor and _eager():
        decode_out(q, k_cache, v_cache, seq_lens, block_table, out, lse, workspace, causal, softmax_scale, num_splits,
                   max_splits, split_tokens, max_seqlen_k, family, k_scales, v_scales, kv_format, window_size,
                   softcap, sinks, tree_mask, k_tail, tail_slots)
    else:
        window = None if window_size is None else list(cm._window_ints(window_size))
        torch.ops.splitkv.decode_out(q, k_cache, v_cache, seq_lens, block_table, out, lse, workspace, causal,
                                     softmax_scale, num_splits, max_splits, split_tokens, max_seqlen_k, family,
                                     k_scales, v_scales, kv_format, window, float(softcap), sinks, tree_mask,
                                     k_tail, tail_slots)
    return (out, lse) if return_lse else out


def _decode_plan_entry(q, k_cache, block_table, causal, softmax_scale, num_splits, max_splits, split_tokens,
                       max_seqlen_k, family, kv_format, prefill_route=True, variants=None):
    """(plan, workspace bytes, quantized-format info) for these tensors, from the plan cache;
    variants: _variants_key's."""
    bt_shape = None if block_table is None else block_table.shape
    key = (q.shape, k_cache.shape, bt_shape, q.dtype, causal, softmax_scale, num_splits, max_splits, split_tokens,
           max_seqlen_k, q.get_device(), family, _format_arg(kv_format), prefill_route, variants)
    entry = _decode_plans.get(key)
    if entry is None:
        entry = _new_decode_plan(key, q, k_cache, block_table)
    return entry


def plan_decode(q, k_cache, block_table, *, causal, softmax_scale, num_splits, max_splits, split_tokens,
                max_seqlen_k, family, kv_format=None, prefill_route=True):
    """The plan decode() (prefill_route=False: decode_shard()) uses for these tensors (from its cache)."""
    return _decode_plan_entry(q, k_cache, block_table, causal, softmax_scale, num_splits, max_splits, split_tokens,
                              max_seqlen_k, family, kv_format, prefill_route)[0]


def _desc(t):
    return None if t is None else (t.data_ptr(), _CODES[t.dtype], t.shape, t.stride())


def decode_shard_out(q, k_cache, v_cache, seq_lens, block_table, keys_after, partial_o, partial_lse, causal,
                     softmax_scale, num_splits, max_splits, split_tokens, max_seqlen_k, family=None, k_scales=None,
                     v_scales=None, kv_format=None):
    """Implementation of splitkv::decode_shard_out: a shard's split partials (CUDA and CPU)."""
    dev = q.get_device()
    named = [("k", k_cache), ("v", v_cache), ("seq_lens", seq_lens), ("block_table", block_table),
             ("keys_after", keys_after), ("partial_o", partial_o), ("partial_lse", partial_lse)]
    _check_devices(dev, named)
    plan, _, quant = _decode_plan_entry(q, k_cache, block_table, causal, softmax_scale, num_splits, max_splits,
                                        split_tokens, max_seqlen_k, family, kv_format, prefill_route=False)
    try:
        kd, vd = (_desc(k_cache), _desc(v_cache)) if quant is None else _kv_descs(quant, k_cache, v_cache, q.shape[3])
        descs = [_desc(t) for t in (q, seq_lens, block_table, keys_after, partial_o, partial_lse)]
    except KeyError:
        _check_dtypes([("q", q)] + named)
    qd, sd, bd, ad, pod, pld = descs
    fmt = cm.kv_format(kv_format) if quant is None else quant[2]
    ksd, vsd = (None, None) if quant is None and k_scales is None and v_scales is None else _scale_descs(
        fmt, k_scales, v_scales, dev)
    shard = {"keys_after": ad, "partial_o": pod, "partial_lse": pld}
    if dev < 0:
        _C.cpu_run_decode(plan, qd, kd, vd, sd, bd, None, None, ksd, vsd, **shard)
    else:
        _C.run_decode(plan, qd, kd, vd, sd, bd, None, None, 0, 0, _raw_stream(dev), dev, ksd, vsd, **shard)


def decode_shard(q, k_cache, v_cache, seq_lens, block_table, keys_after, *, causal, softmax_scale, num_splits,
                 max_splits, split_tokens, max_seqlen_k, family, kv_format, k_scales, v_scales):
    plan = plan_decode(q, k_cache, block_table, causal=causal, softmax_scale=softmax_scale, num_splits=num_splits,
                       max_splits=max_splits, split_tokens=split_tokens, max_seqlen_k=max_seqlen_k, family=family,
                       kv_format=kv_format, prefill_route=False)
    rows, heads, d = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
    partial_o = torch.empty((plan.num_splits, rows, heads, d), dtype=torch.float32, device=q.device)
    partial_lse = torch.empty((plan.num_splits, rows, heads), dtype=torch.float32, device=q.device)
    args = (q, k_cache, v_cache, seq_lens, block_table, keys_after, partial_o, partial_lse, causal, softmax_scale,
            num_splits, max_splits, split_tokens, max_seqlen_k, family, k_scales, v_scales, _format_arg(kv_format))
    if type(q) is _Tensor and _eager():
        decode_shard_out(*args)
    else:
        torch.ops.splitkv.decode_shard_out(*args)
    return partial_o, partial_lse


# ---- prefill -------------------------------------------------------------------------------------


def _new_prefill_plan(key, q, k, cu_seqlens_q, seq_lens=None):
    (_, _, varlen, _, _, max_seqlen_q, max_seqlen_k, causal, softmax_scale, num_splits, strategy, dev, family,
     kv_format, variants, cache) = key
    code = _CODES.get(q.dtype)
    if code is None:
        _check_dtypes([("q", q)])
    batch = 0
    if varlen:
        cm.check_rank("cu_seqlens_q", cu_seqlens_q.shape, 1)
        batch = cu_seqlens_q.shape[0] - 1
    fmt = cm.kv_format(kv_format)
    if cache is None:
        problem = cm.prefill_problem(q.shape, k.shape, varlen, batch, code, causal, softmax_scale, max_seqlen_q,
                                     max_seqlen_k, fmt)
    else:
        cm.check_rank("seq_lens", seq_lens.shape, 1)
        problem = cm.prefill_problem(q.shape, k.shape, varlen, batch, code, causal, softmax_scale, max_seqlen_q,
                                     max_seqlen_k, fmt, kv_cache=True, block_table_shape=cache[0])
    if variants is not None:
        cm.set_variants(problem, variants[:2], variants[2], True if variants[3] else None, None)
    options = cm.plan_options(strategy, num_splits, 0, 0, family=family)
    plan = _C.plan_prefill(problem, cm.device_info(dev if dev >= 0 else "h200"), options)
    elements = cm.kv_elements(fmt) if cache is not None else None
    quant = None if elements is None else (elements[0], elements[1], fmt)
    return _cache_put(_prefill_plans, key, (plan, plan.workspace_bytes, quant))


def _prefill_key(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale, num_splits,
                 strategy, dev, family, kv_format=None, window_size=None, softcap=0.0, seq_lens=None,
                 block_table=None, sinks=None):
    """The plan cache's key. Over a KV cache (seq_lens given) the queries alone may be varlen
    (cu_seqlens_q) and the key ends with (the block table's shape,); else it ends with None."""
    if seq_lens is not None:
        if cu_seqlens_k is not None:
            raise cm.invalid("cu_seqlens_k", "None over a KV cache (seq_lens gives the key counts)", "a tensor")
        varlen = cu_seqlens_q is not None
        cache = (None if block_table is None else tuple(block_table.shape),)
    else:
        if block_table is not None:
            raise cm.invalid("block_table", "None without seq_lens (a paged cache needs its lengths)", "a tensor")
        varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
        if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
            missing = "cu_seqlens_q" if cu_seqlens_q is None else "cu_seqlens_k"
            raise cm.invalid(missing, "both cu_seqlens_q and cu_seqlens_k for varlen batches", "None")
        cache = None
    cu_shape = cu_seqlens_q.shape if varlen else None
    variants = None
    if window_size is not None or softcap or sinks is not None:
        key = _variants_key(window_size, softcap, sinks, None)
        variants = None if key is None else key[:4]
    return (q.shape, k.shape, varlen, cu_shape, q.dtype, max_seqlen_q, max_seqlen_k, causal, softmax_scale,
            num_splits, strategy, dev, family, _format_arg(kv_format), variants, cache)


def prefill_out(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, workspace, max_seqlen_q, max_seqlen_k, causal,
                softmax_scale, num_splits, strategy=None, family=None, kv_format=None, window_size=None, softcap=0.0,
                seq_lens=None, block_table=None, k_scales=None, v_scales=None, k_tail=None, tail_slots=None,
                sinks=None):
    """Implementation of splitkv::prefill_out (CUDA: the kernels; CPU: the fp64 reference). With
    seq_lens, k and v are a decode cache (chunked prefill; the queries varlen by cu_seqlens_q)."""
    dev = q.get_device()
    if (k.get_device() != dev or v.get_device() != dev or out.get_device() != dev
            or (cu_seqlens_q is not None and cu_seqlens_q.get_device() != dev)
            or (cu_seqlens_k is not None and cu_seqlens_k.get_device() != dev)
            or (lse is not None and lse.get_device() != dev)):
        _check_devices(dev, [("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                             ("out", out), ("lse", lse)])
    if seq_lens is not None:
        if not isinstance(seq_lens, _Tensor):
            raise cm.invalid("seq_lens", "an int32 tensor on the device of q", type(seq_lens).__name__)
        _check_devices(dev, [("seq_lens", seq_lens), ("block_table", block_table)])
    key = _prefill_key(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale,
                       num_splits, strategy, dev, family, kv_format, window_size, softcap, seq_lens, block_table,
                       sinks)
    entry = _prefill_plans.get(key)
    if entry is None:
        entry = _new_prefill_plan(key, q, k, cu_seqlens_q, seq_lens)
    plan, ws_bytes, quant = entry
    codes = _CODES
    try:
        qd = (q.data_ptr(), codes[q.dtype], q.shape, q.stride())
        if quant is None:
            kd = (k.data_ptr(), codes[k.dtype], k.shape, k.stride())
            vd = (v.data_ptr(), codes[v.dtype], v.shape, v.stride())
        else:
            kd, vd = _kv_descs(quant, k, v, q.shape[-1])
        cqd = None if cu_seqlens_q is None else (cu_seqlens_q.data_ptr(), codes[cu_seqlens_q.dtype],
                                                 cu_seqlens_q.shape, cu_seqlens_q.stride())
        ckd = None if cu_seqlens_k is None else (cu_seqlens_k.data_ptr(), codes[cu_seqlens_k.dtype],
                                                 cu_seqlens_k.shape, cu_seqlens_k.stride())
        od = (out.data_ptr(), codes[out.dtype], out.shape, out.stride())
        ld = None if lse is None else (lse.data_ptr(), codes[lse.dtype], lse.shape, lse.stride())
        cache = {}
        if seq_lens is not None:
            cache = {"seq_lens": _desc(seq_lens), "block_table": _desc(block_table)}
    except KeyError:
        _check_dtypes([("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                       ("out", out), ("lse", lse), ("seq_lens", seq_lens), ("block_table", block_table)])
    if quant is not None or k_scales is not None or v_scales is not None:
        fmt = cm.kv_format(kv_format) if quant is None else quant[2]
        cache["k_scales"], cache["v_scales"] = _scale_descs(fmt, k_scales, v_scales, dev)
    if k_tail is not None or tail_slots is not None or sinks is not None:
        extra = _variant_descs(dev, sinks, None, k_tail, tail_slots)
        cache["k_tail"], cache["tail_slots"], cache["sinks"] = extra["k_tail"], extra["tail_slots"], extra["sinks"]
    if dev < 0:
        _cpu_prefill(plan, qd, kd, vd, cqd, ckd, od, out, lse, cache)
        return
    if ws_bytes:
        ws_ptr, ws_n = _workspace(workspace, ws_bytes, dev)
    else:
        ws_ptr = ws_n = 0
    _C.run_prefill(plan, qd, kd, vd, cqd, ckd, od, ld, ws_ptr, ws_n, _raw_stream(dev), dev, **cache)


def _cpu_prefill(plan, qd, kd, vd, cqd, ckd, od, out, lse, cache):
    """CPU tensors: the fp64 reference, rounded into out (and lse)."""
    problem = plan.prefill
    # The reference does not take `out`; check it exactly as run_prefill would.
    if tuple(od[2]) != tuple(qd[2]) or od[1] != qd[1]:
        raise cm.invalid("out", f"a tensor of q's shape {tuple(qd[2])} and dtype", f"shape {tuple(od[2])}")
    ref_out, ref_lse = _C.reference_prefill(problem, qd, kd, vd, cqd, ckd, **cache)
    out.copy_(torch.frombuffer(bytearray(ref_out), dtype=torch.float64).view(out.shape))
    if lse is not None:
        lse.copy_(torch.frombuffer(bytearray(ref_lse), dtype=torch.float64).view(lse.shape))


def prefill(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale, num_splits,
            strategy, out, return_lse, workspace, family, kv_format=None, window_size=None, softcap=0.0,
            seq_lens=None, block_table=None, k_scales=None, v_scales=None, k_tail=None, tail_slots=None, sinks=None):
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = _lse_buffer(q, varlen=cu_seqlens_q is not None) if return_lse else None
    kv_format = _format_arg(kv_format)
    if type(q) is _Tensor and _eager():
        prefill_out(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, workspace, max_seqlen_q, max_seqlen_k, causal,
                    softmax_scale, num_splits, strategy, family, kv_format, window_size, softcap, seq_lens,
                    block_table, k_scales, v_scales, k_tail, tail_slots, sinks)
    else:
        window = None if window_size is None else list(cm._window_ints(window_size))
        torch.ops.splitkv.prefill_out(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, workspace, max_seqlen_q,
                                      max_seqlen_k, causal, softmax_scale, num_splits, strategy, family, kv_format,
                                      window, float(softcap), seq_lens, block_table, k_scales, v_scales, k_tail,
                                      tail_slots, sinks)
    return (out, lse) if return_lse else out


def plan_prefill(q, k, cu_seqlens_q, cu_seqlens_k, *, max_seqlen_q, max_seqlen_k, causal, softmax_scale, num_splits,
                 strategy, family, kv_format=None, seq_lens=None, block_table=None):
    key = _prefill_key(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale,
                       num_splits, strategy, q.get_device(), family, kv_format, seq_lens=seq_lens,
                       block_table=block_table)
    entry = _prefill_plans.get(key)
    if entry is None:
        entry = _new_prefill_plan(key, q, k, cu_seqlens_q, seq_lens)
    return entry[0]


# ---- combine -------------------------------------------------------------------------------------

_combine_problems = {}


def combine_out(partial_o, partial_lse, out, lse, sinks=None):
    """Implementation of splitkv::combine_out (CUDA: the combine kernel; CPU: an fp64 merge)."""
    dev = partial_o.get_device()
    if (partial_lse.get_device() != dev or out.get_device() != dev
            or (lse is not None and lse.get_device() != dev) or (sinks is not None and sinks.get_device() != dev)):
        _check_devices(dev, [("partial_lse", partial_lse), ("out", out), ("lse", lse), ("sinks", sinks)])
    po_shape, out_shape, out_dtype = partial_o.shape, out.shape, out.dtype
    key = (po_shape, out_shape, out_dtype, sinks is not None)
    problem = _combine_problems.get(key)
    if problem is None:
        cm.check_rank("partial_o", po_shape, 4)
        cm.check_rank("out", out_shape, 4)
        code = _CODES.get(out_dtype)
        if code is None:
            _check_dtypes([("out", out)])
        problem = _cache_put(_combine_problems, key, _C.CombineProblem(
            num_splits=int(po_shape[0]), batch=int(out_shape[0]), seq_len=int(out_shape[1]),
            num_heads=int(out_shape[2]), head_dim=int(out_shape[3]), dtype=cm.DTYPE_BY_CODE[code]))
        problem.sinks = sinks is not None
    if dev < 0:
        _cpu_combine(partial_o, partial_lse, out, lse, sinks)
        return
    codes = _CODES
    try:
        pod = (partial_o.data_ptr(), codes[partial_o.dtype], po_shape, partial_o.stride())
        pld = (partial_lse.data_ptr(), codes[partial_lse.dtype], partial_lse.shape, partial_lse.stride())
        od = (out.data_ptr(), codes[out_dtype], out_shape, out.stride())
        ld = None if lse is None else (lse.data_ptr(), codes[lse.dtype], lse.shape, lse.stride())
        sd = _desc(sinks)
    except KeyError:
        _check_dtypes([("partial_o", partial_o), ("partial_lse", partial_lse), ("out", out), ("lse", lse),
                       ("sinks", sinks)])
    _C.run_combine(problem, pod, pld, od, ld, _raw_stream(dev), dev, sd)


def _cpu_combine(partial_o, partial_lse, out, lse, sinks=None):
    if partial_o.dtype != torch.float32 or partial_lse.dtype != torch.float32:
        name = "partial_o" if partial_o.dtype != torch.float32 else "partial_lse"
        raise cm.invalid(f"{name}.dtype", "fp32", str(getattr(partial_o if name == "partial_o" else partial_lse,
                                                              "dtype")).replace("torch.", ""))
    batch, seq_len, heads, d = out.shape
    if tuple(partial_o.shape[1:]) != (batch * seq_len, heads, d) or tuple(partial_lse.shape) != tuple(
            partial_o.shape[:3]):
        raise cm.invalid("partial_o.shape", f"[num_splits, {batch * seq_len}, {heads}, {d}] with partial_lse "
                         f"[num_splits, {batch * seq_len}, {heads}]",
                         f"{list(partial_o.shape)} and {list(partial_lse.shape)}")
    part_lse = partial_lse.double()
    total = torch.logsumexp(part_lse, 0)  # [rows, H]; all -inf -> -inf
    weights = torch.where(torch.isneginf(total), 0.0, torch.exp(part_lse - total)).unsqueeze(-1)
    merged = torch.where(weights == 0, 0.0, weights * partial_o.double()).sum(0)
    if sinks is not None:  # the sink joins the denominator once (the combine kernel's rule)
        if sinks.dtype != torch.float32 or tuple(sinks.shape) != (heads,):
            raise cm.invalid("sinks", f"float32 [{heads}] (one logit per head)",
                             f"{str(sinks.dtype).replace('torch.', '')} {list(sinks.shape)}")
        with_sink = torch.logaddexp(total, sinks.double().unsqueeze(0))
        keep = torch.where(torch.isneginf(total), 0.0, torch.exp(total - with_sink))
        merged = merged * keep.unsqueeze(-1)
        total = with_sink
    out.copy_(merged.view(batch, seq_len, heads, d))
    if lse is not None:
        lse.copy_(total.view(batch, seq_len, heads).permute(0, 2, 1))


def combine(partial_o, partial_lse, *, out, seq_len, dtype, return_lse, sinks=None):
    if out is None:
        if partial_o.dim() != 4:
            raise cm.invalid("partial_o.rank", "4", str(partial_o.dim()))
        rows, heads, d = partial_o.shape[1], partial_o.shape[2], partial_o.shape[3]
        out = torch.empty((rows // seq_len, seq_len, heads, d), dtype=torch.bfloat16 if dtype is None else dtype,
                          device=partial_o.device)
    lse = None
    if return_lse:
        lse = torch.empty((out.shape[0], out.shape[2], out.shape[1]), dtype=torch.float32, device=out.device)
    if type(partial_o) is _Tensor and _eager():
        combine_out(partial_o, partial_lse, out, lse, sinks)
    else:
        torch.ops.splitkv.combine_out(partial_o, partial_lse, out, lse, sinks)
    return (out, lse) if return_lse else out


# ---- append_kv -----------------------------------------------------------------------------------

_append_problems = {}


def _append_problem(k, fmt):
    key = (k.shape, k.dtype, fmt)
    problem = _append_problems.get(key)
    if problem is None:
        if k.dim() != 3:
            raise cm.invalid("k.rank", "3 ([tokens, Hkv, D])", str(k.dim()))
        code = _CODES.get(k.dtype)
        if code is None:
            _check_dtypes([("k", k)])
        problem = _cache_put(_append_problems, key, _C.AppendKvProblem(
            num_tokens=int(k.shape[0]), num_kv_heads=int(k.shape[1]), head_dim=int(k.shape[2]),
            dtype=cm.DTYPE_BY_CODE[code], kv_format=fmt, page_size=0))
    return problem


def append_kv_out(k, v, k_cache, v_cache, slots, k_scales=None, v_scales=None, kv_format=None, positions=None,
                  tail_slots=None, k_tail=None):
    """Implementation of splitkv::append_kv (CUDA: run_append_kv; CPU: the host quantizer)."""
    dev = k_cache.get_device()
    named = [("k", k), ("v", v), ("v_cache", v_cache), ("slots", slots), ("k_scales", k_scales),
             ("v_scales", v_scales), ("positions", positions), ("tail_slots", tail_slots), ("k_tail", k_tail)]
    if any(t is not None and t.get_device() != dev for _, t in named):
        _check_devices(dev, named, "k_cache")
    fmt = cm.kv_format(kv_format)
    elements = cm.kv_elements(fmt)
    channel_keys = elements is not None and elements[2] == "group"
    if channel_keys and dev < 0:
        raise cm.unsupported("kv_format", f"{fmt.name}: appending to channel-quantized keys on CPU tensors is not "
                                          "implemented (CUDA tensors append; splitkv.quantize_kv_kc builds a cache "
                                          "on the host)")
    if not channel_keys and (positions is not None or tail_slots is not None or k_tail is not None):
        name = "positions" if positions is not None else ("tail_slots" if tail_slots is not None else "k_tail")
        raise cm.invalid(name, f"None for kv_format {fmt.name} (keys per channel only)", "a tensor")
    if dev < 0:
        _append_cpu(k, v, k_cache, v_cache, slots, k_scales, v_scales, fmt)
        return
    problem = _append_problem(k, fmt)
    elements = cm.kv_elements(fmt)
    head_dim = int(k.shape[2])
    codes = _CODES
    try:
        kd = (k.data_ptr(), codes[k.dtype], k.shape, k.stride())
        vd = (v.data_ptr(), codes[v.dtype], v.shape, v.stride())
        sd = (slots.data_ptr(), codes[slots.dtype], slots.shape, slots.stride())
        if elements is None:
            kcd = (k_cache.data_ptr(), codes[k_cache.dtype], k_cache.shape, k_cache.stride())
            vcd = (v_cache.data_ptr(), codes[v_cache.dtype], v_cache.shape, v_cache.stride())
        else:
            kcd = code_desc(k_cache, "k_cache", elements[0], head_dim)
            vcd = code_desc(v_cache, "v_cache", elements[1], head_dim)
    except KeyError:
        _check_dtypes([("k", k), ("v", v), ("slots", slots), ("k_cache", k_cache), ("v_cache", v_cache)])
    if elements is None and k_scales is None and v_scales is None:
        ksd = vsd = None
    else:
        ksd, vsd = _scale_descs(fmt, k_scales, v_scales, dev, "k_cache")
    kc = []  # a *_kc cache's positions, tail slots and tail ring
    if channel_keys:
        try:
            kc = [_desc(t) for t in (positions, tail_slots, k_tail)]
        except KeyError:
            _check_dtypes([("positions", positions), ("tail_slots", tail_slots), ("k_tail", k_tail)])
    _C.run_append_kv(problem, kd, vd, sd, kcd, vcd, ksd, vsd, _raw_stream(dev), dev, *kc)


def _append_cpu(k, v, k_cache, v_cache, slots, k_scales, v_scales, fmt):
    """CPU tensors: the same writes with the host quantizer (tests, CPU-only pipelines)."""
    from .quant import _quantize_torch as quantize_rows

    for name, t, rank in (("k", k, 3), ("v", v, 3), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4),
                          ("slots", slots, 1)):
        cm.check_rank(name, t.shape, rank)
    if tuple(v.shape) != tuple(k.shape):
        raise cm.invalid("v.shape", f"{list(k.shape)} (the shape of k)", str(list(v.shape)))
    if slots.dtype not in (torch.int64, torch.int32) or slots.shape[0] != k.shape[0]:
        raise cm.invalid("slots", f"int64 or int32 [{k.shape[0]}]",
                         f"{str(slots.dtype).replace('torch.', '')} {list(slots.shape)}")
    if k.dtype not in (torch.float16, torch.bfloat16):
        raise cm.invalid("k.dtype", "fp16 or bf16", str(k.dtype).replace("torch.", ""))
    elements = cm.kv_elements(fmt)
    hkv, d = int(k.shape[1]), int(k.shape[2])
    sides = (("k", k, k_cache, k_scales), ("v", v, v_cache, v_scales))
    for side, (name, _, cache, _) in enumerate(sides):
        width = d // 2 if elements is not None and elements[side] == cm.I4 else d
        if int(cache.shape[2]) != hkv or int(cache.shape[3]) != width:
            raise cm.invalid(f"{name}_cache.shape", f"[blocks, slots, {hkv}, {width}]", str(list(cache.shape)))
        if elements is None and cache.dtype != k.dtype:
            raise cm.invalid(f"{name}_cache.dtype", str(k.dtype).replace("torch.", ""),
                             str(cache.dtype).replace("torch.", ""))
        if elements is not None:
            code_desc(cache, f"{name}_cache", elements[side], d)
    cm.check_scales_given(fmt, k_scales, v_scales)
    if elements is None and (k_scales is not None or v_scales is not None):
        raise cm.invalid("k_scales" if k_scales is not None else "v_scales",
                         "None for a 16-bit cache (kv_format holds no scales)", "a tensor")
    per_block = int(k_cache.shape[1])
    s = slots.long()
    idx = ((s >= 0) & (s < int(k_cache.shape[0]) * per_block)).nonzero().flatten()
    if idx.numel() == 0:
        return
    block, pos = s[idx] // per_block, s[idx] % per_block
    for side, (name, x, cache, scales) in enumerate(sides):
        if elements is None:
            cache[block, pos] = x[idx]
            continue
        kind = elements[2]
        if kind == "pair" and (scales.dtype != torch.float16 or tuple(scales.shape) !=
                               (int(cache.shape[0]), hkv, per_block, 2)):
            raise cm.invalid(f"{name}_scales", f"float16 [{int(cache.shape[0])}, {hkv}, {per_block}, 2]",
                             f"{str(scales.dtype).replace('torch.', '')} {list(scales.shape)}")
        given = None
        if kind == "head":  # as on the GPU: a head whose scale is not positive and finite gets NaN codes
            bad = ~(torch.isfinite(scales) & (scales > 0)).cpu()
            given = torch.where(bad, 1.0, scales.float().cpu())
        codes, pairs = quantize_rows(x[idx].unsqueeze(0), elements[side], kind, given, name, f"{name}_scales")
        codes = codes[0].view(torch.uint8)
        if kind == "head":
            codes[:, bad] = 0x7F
        cache.view(torch.uint8)[block, pos] = codes
        if kind == "pair":
            scales[block, :, pos] = pairs[0].permute(1, 0, 2)


def append_kv(k, v, k_cache, v_cache, slots, *, k_scales=None, v_scales=None, kv_format=None, positions=None,
              tail_slots=None, k_tail=None):
    kv_format = _format_arg(kv_format)
    if type(k) is _Tensor and _eager():
        append_kv_out(k, v, k_cache, v_cache, slots, k_scales, v_scales, kv_format, positions, tail_slots, k_tail)
    else:
        torch.ops.splitkv.append_kv(k, v, k_cache, v_cache, slots, k_scales, v_scales, kv_format, positions,
                                    tail_slots, k_tail)


# ---- operator registration -----------------------------------------------------------------------

DECODE_SCHEMA = (
    "decode_out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor seq_lens, Tensor? block_table, "
    "Tensor(a!) out, Tensor(b!)? lse, Tensor(c!)? workspace, bool causal, float? softmax_scale, "
    "int num_splits, int max_splits, int split_tokens, int? max_seqlen_k, str? family=None, "
    "Tensor? k_scales=None, Tensor? v_scales=None, str? kv_format=None, int[]? window_size=None, "
    "float softcap=0.0, Tensor? sinks=None, Tensor? tree_mask=None, Tensor? k_tail=None, "
    "Tensor? tail_slots=None) -> ()")
PREFILL_SCHEMA = (
    "prefill_out(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
    "Tensor(a!) out, Tensor(b!)? lse, Tensor(c!)? workspace, int? max_seqlen_q, int? max_seqlen_k, "
    "bool causal, float? softmax_scale, int num_splits, str? strategy=None, str? family=None, "
    "str? kv_format=None, int[]? window_size=None, float softcap=0.0, Tensor? seq_lens=None, "
    "Tensor? block_table=None, Tensor? k_scales=None, Tensor? v_scales=None, Tensor? k_tail=None, "
    "Tensor? tail_slots=None, Tensor? sinks=None) -> ()")

DECODE_SHARD_SCHEMA = (
    "decode_shard_out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor seq_lens, Tensor? block_table, "
    "Tensor? keys_after, Tensor(a!) partial_o, Tensor(b!) partial_lse, bool causal, float? softmax_scale, "
    "int num_splits, int max_splits, int split_tokens, int? max_seqlen_k, str? family=None, "
    "Tensor? k_scales=None, Tensor? v_scales=None, str? kv_format=None) -> ()")
COMBINE_SCHEMA = ("combine_out(Tensor partial_o, Tensor partial_lse, Tensor(a!) out, Tensor(b!)? lse, "
                  "Tensor? sinks=None) -> ()")
# The caches are written; so are the (scale, min) pairs of INT formats (FP8 scales are only read,
# declared mutable all the same: the schema cannot depend on kv_format).
APPEND_KV_SCHEMA = (
    "append_kv(Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor slots, "
    "Tensor(c!)? k_scales=None, Tensor(d!)? v_scales=None, str? kv_format=None, Tensor? positions=None, "
    "Tensor? tail_slots=None, Tensor(e!)? k_tail=None) -> ()")

_lib = torch.library.Library("splitkv", "DEF")
_lib.define(DECODE_SCHEMA)
_lib.define(DECODE_SHARD_SCHEMA)
_lib.define(PREFILL_SCHEMA)
_lib.define(COMBINE_SCHEMA)
_lib.define(APPEND_KV_SCHEMA)
for _key in ("CUDA", "CPU"):
    _lib.impl("decode_out", decode_out, _key)
    _lib.impl("decode_shard_out", decode_shard_out, _key)
    _lib.impl("prefill_out", prefill_out, _key)
    _lib.impl("combine_out", combine_out, _key)
    _lib.impl("append_kv", append_kv_out, _key)


def _decode_out_fake(q, k_cache, v_cache, seq_lens, block_table, out, lse, workspace, causal, softmax_scale,
                     num_splits, max_splits, split_tokens, max_seqlen_k, family=None, k_scales=None, v_scales=None,
                     kv_format=None, window_size=None, softcap=0.0, sinks=None, tree_mask=None, k_tail=None,
                     tail_slots=None):
    return None


def _decode_shard_out_fake(q, k_cache, v_cache, seq_lens, block_table, keys_after, partial_o, partial_lse, causal,
                           softmax_scale, num_splits, max_splits, split_tokens, max_seqlen_k, family=None,
                           k_scales=None, v_scales=None, kv_format=None):
    return None


def _prefill_out_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, workspace, max_seqlen_q, max_seqlen_k, causal,
                      softmax_scale, num_splits, strategy=None, family=None, kv_format=None, window_size=None,
                      softcap=0.0, seq_lens=None, block_table=None, k_scales=None, v_scales=None, k_tail=None,
                      tail_slots=None, sinks=None):
    return None


def _combine_out_fake(partial_o, partial_lse, out, lse, sinks=None):
    return None


def _append_kv_fake(k, v, k_cache, v_cache, slots, k_scales=None, v_scales=None, kv_format=None, positions=None,
                    tail_slots=None, k_tail=None):
    return None


torch.library.register_fake("splitkv::decode_out", _decode_out_fake, lib=_lib)
torch.library.register_fake("splitkv::decode_shard_out", _decode_shard_out_fake, lib=_lib)


torch.library.register_fake("splitkv::prefill_out", _prefill_out_fake, lib=_lib)
torch.library.register_fake("splitkv::combine_out", _combine_out_fake, lib=_lib)
torch.library.register_fake("splitkv::append_kv", _append_kv_fake, lib=_lib)
