"""Host arrays: decode on the CPU backend (the split-KV algorithm in fp32 on host threads), prefill
on the fp64 reference (rounded to the input dtype). Lengths, page ids and offsets are host data
here, so they are checked before anything runs (errors name e.g. 'seq_lens[1]')."""

import numpy as np

from . import _common as cm
from . import _splitkv as _C

# numpy dtype names -> DType codes (bfloat16 is ml_dtypes' type when installed).
_NP_CODES = {
    "float16": cm.F16,
    "bfloat16": cm.BF16,
    "float32": cm.F32,
    "int32": cm.I32,
    "int64": cm.I64,
    "int8": cm.I8,
    "float8_e4m3fn": cm.FP8,
}


def as_array(x, argument):
    if isinstance(x, np.ndarray):
        return x
    raise cm.invalid(argument, "a numpy array (or a torch tensor)", type(x).__name__)


def as_index_array(x, argument):
    """Index tensors (lengths, block tables, cu_seqlens) may be given as lists."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple, range)):
        return np.asarray(x, dtype=np.int32)
    raise cm.invalid(argument, "a numpy int32 array or a list of ints", type(x).__name__)


def code(a, argument):
    c = _NP_CODES.get(a.dtype.name)
    if c is None:
        raise cm.invalid(f"{argument}.dtype", cm.EXPECTED_DTYPE.get(argument, "a splitkv dtype"), a.dtype.name)
    return c


def desc(a, argument):
    """The descriptor of a numpy array (strides converted to elements)."""
    if a is None:
        return None
    itemsize = a.itemsize
    strides = []
    for i, s in enumerate(a.strides):
        if s % itemsize:
            raise cm.invalid(f"{argument}.stride[{i}]", f"a multiple of the element size ({itemsize} bytes)",
                             f"{s} bytes")
        strides.append(s // itemsize)
    return (a.__array_interface__["data"][0], code(a, argument), a.shape, tuple(strides))


_CODE_DTYPES = {
    cm.FP8: ("uint8", "float8_e4m3fn"),
    cm.I8: ("uint8",),
    cm.I4: ("uint8",),
}


def kv_desc(a, argument, element, head_dim):
    """K or V of a decode cache: 16-bit values (element None) or the codes of a quantized format."""
    if element is None:
        return desc(a, argument)
    if a.dtype.name not in _CODE_DTYPES[element]:
        raise cm.invalid(f"{argument}.dtype", cm.CODE_EXPECTED[element], a.dtype.name)
    if element == cm.I4:
        cm.check_int4_width(a.shape, head_dim, argument)
    return cm.code_desc(a.__array_interface__["data"][0], element, a.shape, a.strides)


def scales_desc(a, argument, fmt):
    if a is None:
        return None
    a = as_array(a, argument)
    if a.dtype.name not in ("float32", "float16"):
        raise cm.invalid(f"{argument}.dtype", cm.expected_scales(fmt, argument), a.dtype.name)
    return desc(a, argument)


def _decode_call(q, k_cache, v_cache, seq_lens, block_table, options, kv_format, k_scales, v_scales):
    """The plan and the leading cpu_run_decode arguments (plan, q, k, v, seq_lens, block_table)
    plus the scale descriptors, for decode() and decode_shard(). options: the planner's keywords."""
    q = as_array(q, "q")
    k_cache = as_array(k_cache, "k")
    v_cache = as_array(v_cache, "v")
    seq_lens = as_index_array(seq_lens, "seq_lens")
    if block_table is not None:
        block_table = as_index_array(block_table, "block_table")
    fmt = cm.kv_format(kv_format)
    plan = plan_decode(q, k_cache, seq_lens, block_table, kv_format=fmt, **options)
    elements = cm.kv_elements(fmt)
    k_elem, v_elem = (None, None) if elements is None else elements[:2]
    cm.check_scales_given(fmt, k_scales, v_scales)
    head_dim = q.shape[3]
    kd, vd = kv_desc(k_cache, "k", k_elem, head_dim), kv_desc(v_cache, "v", v_elem, head_dim)
    lead = (plan, desc(q, "q"), kd, vd, desc(seq_lens, "seq_lens"), desc(block_table, "block_table"))
    return q, lead, (scales_desc(k_scales, "k_scales", fmt), scales_desc(v_scales, "v_scales", fmt))


def decode(q, k_cache, v_cache, seq_lens, block_table, *, causal, softmax_scale, num_splits, max_splits,
           split_tokens, out, return_lse, max_seqlen_k, family=None, kv_format=None, k_scales=None, v_scales=None,
           window_size=cm.NO_WINDOW, softcap=0.0, sinks=None, tree_mask=None, k_tail=None, tail_slots=None):
    options = dict(causal=causal, softmax_scale=softmax_scale, num_splits=num_splits, max_splits=max_splits,
                   split_tokens=split_tokens, max_seqlen_k=max_seqlen_k, family=family,
                   variants=(window_size, softcap, sinks, tree_mask))
    q, lead, scales = _decode_call(q, k_cache, v_cache, seq_lens, block_table, options, kv_format, k_scales, v_scales)
    sinks = None if sinks is None else np.ascontiguousarray(as_array(sinks, "sinks"), dtype=np.float32)
    if tree_mask is not None:
        tree_mask = as_array(tree_mask, "tree_mask")
        if tree_mask.dtype.name != "uint8":
            raise cm.invalid("tree_mask.dtype", "uint8 (numpy.packbits(mask, axis=-1, bitorder='little'))",
                             tree_mask.dtype.name)
    if out is None:
        out = np.empty(q.shape, dtype=q.dtype)
    else:
        out = as_array(out, "out")
    lse = np.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=np.float32) if return_lse else None
    tree_desc = None if tree_mask is None else cm.code_desc(tree_mask.__array_interface__["data"][0], cm.I8,
                                                             tree_mask.shape, tree_mask.strides)
    k_tail = None if k_tail is None else as_array(k_tail, "k_tail")
    tail_slots = None if tail_slots is None else as_index_array(tail_slots, "tail_slots")
    _C.cpu_run_decode(*lead, desc(out, "out"), desc(lse, "lse"), *scales, sinks=desc(sinks, "sinks"),
                      tree_mask=tree_desc, k_tail=desc(k_tail, "k_tail"), tail_slots=desc(tail_slots, "tail_slots"))
    return (out, lse) if return_lse else out


def decode_shard(q, k_cache, v_cache, seq_lens, block_table, keys_after, *, causal, softmax_scale, num_splits,
                 max_splits, split_tokens, max_seqlen_k, family=None, kv_format=None, k_scales=None, v_scales=None):
    options = dict(causal=causal, softmax_scale=softmax_scale, num_splits=num_splits, max_splits=max_splits,
                   split_tokens=split_tokens, max_seqlen_k=max_seqlen_k, family=family, prefill_route=False)
    q, lead, scales = _decode_call(q, k_cache, v_cache, seq_lens, block_table, options, kv_format, k_scales, v_scales)
    if keys_after is not None:
        keys_after = as_index_array(keys_after, "keys_after")
    rows, heads, head_dim, splits = q.shape[0] * q.shape[1], q.shape[2], q.shape[3], lead[0].num_splits
    partial_o = np.empty((splits, rows, heads, head_dim), dtype=np.float32)
    partial_lse = np.empty((splits, rows, heads), dtype=np.float32)
    _C.cpu_run_decode(*lead, None, None, *scales, keys_after=desc(keys_after, "keys_after"),
                      partial_o=desc(partial_o, "partial_o"), partial_lse=desc(partial_lse, "partial_lse"))
    return partial_o, partial_lse


def plan_decode(q, k_cache, seq_lens, block_table, *, causal, softmax_scale, num_splits, max_splits, split_tokens,
                max_seqlen_k, family=None, device="h200", kv_format=None, prefill_route=True, variants=None):
    problem = cm.decode_problem(q.shape, k_cache.shape, None if block_table is None else block_table.shape,
                                code(q, "q"), causal, softmax_scale, max_seqlen_k, cm.kv_format(kv_format))
    if variants is not None:
        cm.set_variants(problem, *variants)
    # prefill_route off for shards: keys_after and partials need the decode kernels.
    options = cm.plan_options(None, num_splits, max_splits, split_tokens, family=family,
                              tuning={"prefill_route": bool(prefill_route)})
    return _C.plan_decode(problem, cm.device_info(device), options)


def prefill(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale, out,
            return_lse, num_splits=0, strategy=None, family=None, kv_format=None, window_size=cm.NO_WINDOW,
            softcap=0.0, sinks=None, seq_lens=None, block_table=None, k_scales=None, v_scales=None, k_tail=None,
            tail_slots=None):
    q = as_array(q, "q")
    if seq_lens is not None:
        return _prefill_over_cache(q, k, v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                   max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, causal=causal,
                                   softmax_scale=softmax_scale, out=out, return_lse=return_lse,
                                   num_splits=num_splits, strategy=strategy, family=family, kv_format=kv_format,
                                   window_size=window_size, softcap=softcap, sinks=sinks, seq_lens=seq_lens,
                                   block_table=block_table, k_scales=k_scales, v_scales=v_scales, k_tail=k_tail,
                                   tail_slots=tail_slots)
    for name, t in (("block_table", block_table), ("k_scales", k_scales), ("v_scales", v_scales),
                    ("k_tail", k_tail), ("tail_slots", tail_slots)):
        if t is not None:
            raise cm.invalid(name, "None without seq_lens (only a KV cache has it)", "an array")
    k = as_array(k, "k")
    v = as_array(v, "v")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            missing = "cu_seqlens_q" if cu_seqlens_q is None else "cu_seqlens_k"
            raise cm.invalid(missing, "both cu_seqlens_q and cu_seqlens_k for varlen batches", "None")
        cu_seqlens_q = as_index_array(cu_seqlens_q, "cu_seqlens_q")
        cu_seqlens_k = as_index_array(cu_seqlens_k, "cu_seqlens_k")
        cm.check_rank("cu_seqlens_q", cu_seqlens_q.shape, 1)
        cm.check_rank("cu_seqlens_k", cu_seqlens_k.shape, 1)
        batch = cu_seqlens_q.shape[0] - 1
        # Host offsets: the exact longest sequences make the tightest problem.
        if max_seqlen_q is None and batch > 0:
            max_seqlen_q = max(int(np.diff(cu_seqlens_q.astype(np.int64)).max()), 1)
        if max_seqlen_k is None and batch > 0 and cu_seqlens_k.shape[0] == batch + 1:
            max_seqlen_k = max(int(np.diff(cu_seqlens_k.astype(np.int64)).max()), 0)
    else:
        batch = q.shape[0] if q.ndim == 4 else 0
    problem = cm.prefill_problem(q.shape, k.shape, varlen, batch, code(q, "q"), causal, softmax_scale,
                                 max_seqlen_q, max_seqlen_k, cm.kv_format(kv_format))
    cm.set_variants(problem, window_size, softcap, sinks, None)
    sinks = None if sinks is None else np.ascontiguousarray(as_array(sinks, "sinks"), dtype=np.float32)
    # Planned like the GPU path (same checks and errors), then run on the fp64 reference.
    _C.plan_prefill(problem, cm.device_info("h200"), cm.plan_options(strategy, num_splits, 0, 0, family=family))
    ref_out, ref_lse = reference_prefill(problem, q, k, v, cu_seqlens_q, cu_seqlens_k, sinks)
    return _rounded_out(q, out, ref_out, ref_lse, return_lse)


def _rounded_out(q, out, ref_out, ref_lse, return_lse):
    """The reference's fp64 rows rounded into `out` (checked against q's shape and dtype, or new)."""
    if out is None:
        out = np.empty(q.shape, dtype=q.dtype)
    else:
        out = as_array(out, "out")
        if out.shape != q.shape or out.dtype != q.dtype:
            raise cm.invalid("out", f"an array of shape {tuple(q.shape)} and dtype {q.dtype.name}",
                             f"shape {tuple(out.shape)} and dtype {out.dtype.name}")
    out[...] = ref_out.astype(q.dtype)
    if return_lse:
        return out, ref_lse.astype(np.float32)
    return out


def _prefill_over_cache(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, softmax_scale,
                        out, return_lse, num_splits, strategy, family, kv_format, window_size, softcap, sinks,
                        seq_lens, block_table, k_scales, v_scales, k_tail, tail_slots):
    """prefill() over a decode cache (chunked prefill): the queries padded or varlen by
    cu_seqlens_q, the keys each sequence's first seq_lens[b] cache tokens."""
    if cu_seqlens_k is not None:
        raise cm.invalid("cu_seqlens_k", "None over a KV cache (seq_lens gives the key counts)", "an array")
    seq_lens = as_index_array(seq_lens, "seq_lens")
    cm.check_rank("seq_lens", seq_lens.shape, 1)
    varlen = cu_seqlens_q is not None
    if varlen:
        cu_seqlens_q = as_index_array(cu_seqlens_q, "cu_seqlens_q")
        cm.check_rank("cu_seqlens_q", cu_seqlens_q.shape, 1)
        batch = cu_seqlens_q.shape[0] - 1
        if max_seqlen_q is None and batch > 0:
            max_seqlen_q = max(int(np.diff(cu_seqlens_q.astype(np.int64)).max()), 1)
    else:
        batch = q.shape[0] if q.ndim == 4 else 0
    if block_table is not None:
        block_table = as_index_array(block_table, "block_table")
    fmt = cm.kv_format(kv_format)
    problem = cm.prefill_problem(q.shape, np.shape(k), varlen, batch, code(q, "q"), causal, softmax_scale,
                                 max_seqlen_q, max_seqlen_k, fmt, kv_cache=True,
                                 block_table_shape=None if block_table is None else block_table.shape)
    cm.set_variants(problem, window_size, softcap, sinks, None)
    sinks = None if sinks is None else np.ascontiguousarray(as_array(sinks, "sinks"), dtype=np.float32)
    _C.plan_prefill(problem, cm.device_info("h200"), cm.plan_options(strategy, num_splits, 0, 0, family=family))
    cache = dict(seq_lens=seq_lens, block_table=block_table, k_scales=k_scales, v_scales=v_scales,
                 k_tail=None if k_tail is None else as_array(k_tail, "k_tail"),
                 tail_slots=None if tail_slots is None else as_index_array(tail_slots, "tail_slots"))
    ref_out, ref_lse = reference_prefill(problem, q, as_array(k, "k"), as_array(v, "v"), cu_seqlens_q, None, sinks,
                                         cache)
    return _rounded_out(q, out, ref_out, ref_lse, return_lse)


def reference_decode(problem, q, k, v, seq_lens, block_table, k_scales=None, v_scales=None):
    elements = cm.kv_elements(problem.kv_format)
    k_elem, v_elem = (None, None) if elements is None else elements[:2]
    out, lse = _C.reference_decode(problem, desc(q, "q"), kv_desc(k, "k", k_elem, problem.head_dim),
                                   kv_desc(v, "v", v_elem, problem.head_dim), desc(seq_lens, "seq_lens"),
                                   desc(block_table, "block_table"),
                                   scales_desc(k_scales, "k_scales", problem.kv_format),
                                   scales_desc(v_scales, "v_scales", problem.kv_format))
    b, lq, hq, d = problem.batch, problem.q_len, problem.num_q_heads, problem.head_dim
    return (np.frombuffer(out, dtype=np.float64).reshape(b, lq, hq, d),
            np.frombuffer(lse, dtype=np.float64).reshape(b, hq, lq))


def reference_prefill(problem, q, k, v, cu_seqlens_q, cu_seqlens_k, sinks=None, cache=None):
    """cache (problem.kv_cache): the decode cache's seq_lens, block_table, k_scales, v_scales, k_tail
    and tail_slots; k and v are then its codes (a quantized format) or values."""
    if cache is None:
        kd, vd, extra = desc(k, "k"), desc(v, "v"), {}
    else:
        elements = cm.kv_elements(problem.kv_format)
        k_elem, v_elem = (None, None) if elements is None else elements[:2]
        kd = kv_desc(k, "k", k_elem, problem.head_dim)
        vd = kv_desc(v, "v", v_elem, problem.head_dim)
        extra = {name: (scales_desc(t, name, problem.kv_format) if name.endswith("_scales") else desc(t, name))
                 for name, t in cache.items()}
    out, lse = _C.reference_prefill(problem, desc(q, "q"), kd, vd, desc(cu_seqlens_q, "cu_seqlens_q"),
                                    desc(cu_seqlens_k, "cu_seqlens_k"), sinks=desc(sinks, "sinks"), **extra)
    hq, d = problem.num_q_heads, problem.head_dim
    out = np.frombuffer(out, dtype=np.float64)
    lse = np.frombuffer(lse, dtype=np.float64)
    if problem.varlen:
        total_q = q.shape[0]
        return out.reshape(total_q, hq, d), lse.reshape(hq, total_q)
    b, lq = problem.batch, problem.max_q_len
    return out.reshape(b, lq, hq, d), lse.reshape(b, hq, lq)


def combine(partial_o, partial_lse, *, out, seq_len, dtype, return_lse, sinks=None):
    """Host merge of split partials (fp64 arithmetic, the combine rule of the kernels); sinks
    [heads] fold once into every merged row."""
    partial_o = as_array(partial_o, "partial_o")
    partial_lse = as_array(partial_lse, "partial_lse")
    o, lse = combine_math(partial_o.astype(np.float64), partial_lse.astype(np.float64))
    num_splits, rows, heads, d = partial_o.shape
    if sinks is not None:
        sinks = as_array(sinks, "sinks").astype(np.float64)
        if sinks.shape != (heads,):
            raise cm.invalid("sinks", f"float32 [{heads}] (one logit per head)", str(list(sinks.shape)))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            total = np.logaddexp(lse, sinks[None, :])
            weight = np.where(np.isneginf(lse), 0.0, np.exp(lse - total))
        o = o * weight[..., None]
        lse = total
    if out is None:
        batch = rows // seq_len
        out = np.empty((batch, seq_len, heads, d), dtype=np.float16 if dtype is None else dtype)
    out[...] = o.reshape(out.shape).astype(out.dtype)
    if return_lse:
        batch, seq_len = out.shape[0], out.shape[1]
        return out, lse.reshape(batch, seq_len, heads).transpose(0, 2, 1).astype(np.float32)
    return out


def combine_math(partial_o, partial_lse):
    """LSE = log sum_i exp(LSE_i); O = sum_i exp(LSE_i - LSE) O_i; all-empty rows: 0 and -inf."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        lse = np.logaddexp.reduce(partial_lse, axis=0)
        weights = np.where(np.isneginf(lse), 0.0, np.exp(partial_lse - lse))
        w = weights[..., None]
        o = np.where(w == 0, 0.0, w * partial_o).sum(axis=0)  # an empty partial adds nothing
    return o, lse
