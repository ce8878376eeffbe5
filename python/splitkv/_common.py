"""Shared helpers: dtype codes, tensor descriptors, problems and plans, error messages.

A tensor crosses into the extension as a descriptor ``(data_ptr, dtype_code, shape, strides)``
with strides in elements, or ``None`` for an absent optional tensor.
"""

import math

from . import _splitkv as _C

F16 = _C.DType.fp16.value
BF16 = _C.DType.bf16.value
F32 = _C.DType.fp32.value
I32 = _C.DType.int32.value
I64 = _C.DType.int64.value
I8 = _C.DType.int8.value
I4 = _C.DType.int4.value
FP8 = _C.DType.fp8_e4m3.value
DTYPE_BY_CODE = {d.value: d for d in _C.DType}

# KV cache formats (docs/KV_FORMATS.md), from the C++ formats table (src/common/formats.hpp): by
# name, plus the dtype spellings people use for the 16-bit and FP8 caches; None is native.
_FORMAT_TABLE = _C.kv_format_table()
_KV_FORMATS = {row[1]: row[0] for row in _FORMAT_TABLE}
_KV_FORMATS.update({None: _C.KvFormat.native, "float16": _C.KvFormat.fp16, "bfloat16": _C.KvFormat.bf16,
                    "fp8_e4m3": _C.KvFormat.fp8_e4m3, "float8_e4m3fn": _C.KvFormat.fp8_e4m3})
KV_FORMAT_NAMES = ", ".join(row[1] for row in _FORMAT_TABLE[:-1]) + " or " + _FORMAT_TABLE[-1][1]

# Element types of the K and V codes of each quantized format (None: 16-bit values) and what its
# scale tensors hold: "head" fp32 [Hkv]; "pair" fp16 (scale, min) [blocks, Hkv, slots, 2]; "group"
# (the keys of a *_kc format) fp16 [blocks, Hkv, groups, 2 * D], with a 16-bit tail.
KV_ELEMENTS = {row[0]: (row[2], row[3], "group" if row[6] else row[5]) for row in _FORMAT_TABLE if row[4]}
ELEMENT_NAMES = {FP8: "fp8", I8: "int8", I4: "int4"}
# A *_kc format's key groups (positions per channel (scale, min)) and the rows of its tail ring.
KEY_GROUP = _C.KEY_GROUP
KEY_TAIL_ROWS = _C.KEY_TAIL_ROWS

# What each argument's dtype must be, for messages about dtypes splitkv has no code for.
EXPECTED_DTYPE = {
    "q": "fp16 or bf16",
    "k": "fp16 or bf16",
    "v": "fp16 or bf16",
    "out": "the dtype of q",
    "seq_lens": "int32",
    "block_table": "int32",
    "cu_seqlens_q": "int32",
    "cu_seqlens_k": "int32",
    "lse": "fp32",
    "workspace": "uint8",
    "slots": "int64 or int32",
    "k_cache": "fp16 or bf16 (the dtype of k)",
    "v_cache": "fp16 or bf16 (the dtype of k)",
    "k_scales": "fp32 (fp8) or fp16 (int8, int4)",
    "v_scales": "fp32 (fp8) or fp16 (int8, int4)",
    "keys_after": "int32",
    "partial_o": "fp32",
    "partial_lse": "fp32",
    "sinks": "fp32 (a logit per query head)",
    "k_tail": "the dtype of q",
    "tail_slots": "int32",
}

_DTYPE_NAMES = {
    "fp16": F16,
    "float16": F16,
    "half": F16,
    "bf16": BF16,
    "bfloat16": BF16,
    "fp32": F32,
    "float32": F32,
    "int32": I32,
    "int64": I64,
    "int8": I8,
    "fp8_e4m3": FP8,
    "float8_e4m3fn": FP8,
}

_STRATEGIES = {
    None: _C.Strategy.auto,
    "auto": _C.Strategy.auto,
    "split-q": _C.Strategy.split_q,
    "split_q": _C.Strategy.split_q,
    "split-kv": _C.Strategy.split_kv,
    "split_kv": _C.Strategy.split_kv,
    "split-v": _C.Strategy.split_v,
    "split_v": _C.Strategy.split_v,
    "two-pass": _C.Strategy.two_pass,
    "two_pass": _C.Strategy.two_pass,
}


def invalid(argument, expected, got):
    """The C++ API's wording: "splitkv: invalid argument '<argument>': expected <expected>, got <got>"."""
    error = _C.InvalidArgumentError(f"splitkv: invalid argument '{argument}': expected {expected}, got {got}")
    error.argument = argument
    error.code = "invalid argument"
    return error


def unsupported(argument, what):
    """The C++ API's wording: "splitkv: unsupported '<argument>': <what>"."""
    error = _C.UnsupportedError(f"splitkv: unsupported '{argument}': {what}")
    error.argument = argument
    error.code = "unsupported"
    return error


def dtype_code(dtype, argument="dtype"):
    """A DType code from a DType, a name ('bf16', 'float16', ...), a numpy or a torch dtype."""
    if isinstance(dtype, _C.DType):
        return dtype.value
    if isinstance(dtype, str):
        name = dtype
    elif str(dtype).startswith("torch."):
        name = str(dtype)[len("torch."):]
    else:
        import numpy

        try:
            name = numpy.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    code = _DTYPE_NAMES.get(name)
    if code is None:
        raise invalid(argument, "fp16 or bf16", name)
    return code


def kv_format(name):
    """A KvFormat from a KvFormat, None (native) or a name (KV_FORMAT_NAMES)."""
    if isinstance(name, _C.KvFormat):
        return name
    fmt = _KV_FORMATS.get(name) if isinstance(name, str) or name is None else None
    if fmt is None:
        raise invalid("kv_format", KV_FORMAT_NAMES, repr(name))
    return fmt


def kv_elements(fmt):
    """(k element code, v element code, scale kind) of a quantized format; None for 16-bit caches."""
    return KV_ELEMENTS.get(fmt)


def expected_scales(fmt, argument, hkv=None):
    """What the scale tensor `argument` of a cache in format fmt must be (for messages)."""
    if fmt not in KV_ELEMENTS:
        return "None (a 16-bit cache has no scales)"
    kind = KV_ELEMENTS[fmt][2]
    name = "fp8" if fmt == _C.KvFormat.fp8_e4m3 else fmt.name
    if kind == "head":
        return f"float32 [{'Hkv' if hkv is None else hkv}] per-KV-head scales for an {name} cache"
    if kind == "group" and argument.startswith("k"):
        return f"float16 per-channel key scales [blocks, Hkv, groups, 2 * D] for an {name} cache"
    return f"float16 (scale, min) pairs [blocks, Hkv, slots, 2] for an {name} cache"


def check_scales_given(fmt, k_scales, v_scales):
    """Quantized caches need both scale tensors; 16-bit caches none (the C++ checks say the rest)."""
    if KV_ELEMENTS.get(fmt) is None:
        return
    for name, scales in (("k_scales", k_scales), ("v_scales", v_scales)):
        if scales is None:
            raise invalid(name, expected_scales(fmt, name), "None")


CODE_EXPECTED = {
    FP8: "uint8 (or float8_e4m3fn) fp8 codes",
    I8: "uint8 int8 codes (unsigned, 0..255)",
    I4: "uint8 int4 codes (two per byte, element 2i in the low nibble)",
}


def check_int4_width(shape, head_dim, argument):
    """INT4 codes: the last dim holds head_dim / 2 bytes."""
    if len(shape) == 4 and int(shape[3]) * 2 != head_dim:
        raise invalid(f"{argument}.shape[3]", f"{head_dim // 2} bytes (int4 codes of head_dim {head_dim}, two a byte)",
                      f"{int(shape[3])} bytes")


def code_desc(ptr, element, shape, byte_strides):
    """The descriptor of a code tensor from its byte layout: FP8 and INT8 count bytes, INT4 counts
    nibbles (the last dim holds two codes a byte, so shape[-1] and every stride double)."""
    if element != I4:
        return (ptr, element, tuple(shape), tuple(byte_strides))
    shape = tuple(shape[:-1]) + (2 * int(shape[-1]),)
    last = byte_strides[-1]
    strides = tuple(2 * s for s in byte_strides[:-1]) + (1 if last == 1 else 2 * last,)
    return (ptr, element, shape, strides)


def strategy(name):
    if isinstance(name, _C.Strategy):
        return name
    s = _STRATEGIES.get(name)
    if s is None:
        raise invalid("strategy", "auto, split-q, split-kv, split-v or two-pass", name)
    return s


def scale_value(softmax_scale):
    """None means 1/sqrt(head_dim), which the C++ API spells 0."""
    if softmax_scale is None:
        return 0.0
    scale = float(softmax_scale)
    if scale == 0.0 or not math.isfinite(scale) or scale < 0.0:
        raise invalid("softmax_scale", "a positive finite value (None for 1/sqrt(head_dim))", softmax_scale)
    return scale


def plan_options(strategy_name=None, num_splits=0, max_splits=0, split_tokens=0, merge="auto", family=None,
                 tuning=None):
    """tuning: a dict of PlanTuning switches (their names: tuning_names()) to set."""
    chosen = strategy(strategy_name)
    try:
        options = _C.PlanOptions(strategy=chosen, num_splits=int(num_splits), max_splits=int(max_splits),
                                 split_tokens=int(split_tokens), merge=str(merge))
    except ValueError as e:
        raise invalid("merge", "auto, combine-kernel, cluster, fused or atomic", merge) from e
    for name, value in (tuning or {}).items():
        if name not in tuning_names():
            raise TypeError(f"unknown planner switch {name!r} (PlanTuning has {', '.join(tuning_names())})")
        setattr(options.tuning, name, value)
    if family:
        if not hasattr(options, "family"):
            raise unsupported("family", "this build's API has no kernel families")
        options.family = str(family)
    return options


def check_rank(argument, shape, rank):
    if len(shape) != rank:
        raise invalid(f"{argument}.rank", str(rank), str(len(shape)))


def cache_pages(k_shape, block_table_shape, max_seqlen_k):
    """(page_size, max_kv_len) of a decode cache: paged [pages, page_size, Hkv, D] with a block table
    of block_table_shape, or contiguous [B, capacity, Hkv, D] (page_size 0); max_kv_len is
    max_seqlen_k, else the capacity."""
    check_rank("k", k_shape, 4)
    page_size = 0
    if block_table_shape is not None:
        check_rank("block_table", block_table_shape, 2)
        page_size = int(k_shape[1])
        capacity = int(block_table_shape[1]) * page_size
    else:
        capacity = int(k_shape[1])
    return page_size, capacity if max_seqlen_k is None else int(max_seqlen_k)


def decode_problem(q_shape, k_shape, block_table_shape, dtype, causal, softmax_scale, max_seqlen_k,
                   kv_format=_C.KvFormat.native):
    """The DecodeProblem of tensors with these shapes (max_kv_len: given, else the cache capacity)."""
    check_rank("q", q_shape, 4)
    batch, q_len, num_q_heads, head_dim = (int(x) for x in q_shape)
    page_size, max_kv_len = cache_pages(k_shape, block_table_shape, max_seqlen_k)
    return _C.DecodeProblem(batch=batch, num_q_heads=num_q_heads, num_kv_heads=int(k_shape[2]),
                            head_dim=head_dim, q_len=q_len, max_kv_len=max_kv_len, page_size=page_size,
                            causal=bool(causal), dtype=DTYPE_BY_CODE[dtype], softmax_scale=scale_value(softmax_scale),
                            kv_format=kv_format)


def prefill_problem(q_shape, k_shape, varlen, batch, dtype, causal, softmax_scale, max_seqlen_q, max_seqlen_k,
                    kv_format=_C.KvFormat.native, kv_cache=False, block_table_shape=None):
    """The PrefillProblem of tensors with these shapes. Padded: lengths from the shapes. Varlen:
    the given bounds, else the token counts (always valid bounds, never read from device data).
    kv_cache: k is a decode cache (contiguous [B, capacity, Hkv, D], or paged [pages, page_size, Hkv,
    D] with a block table of block_table_shape); max_kv_len is max_seqlen_k, else the capacity."""
    if kv_cache:
        check_rank("q", q_shape, 3 if varlen else 4)
        num_q_heads, head_dim = int(q_shape[-2]), int(q_shape[-1])
        if not varlen:
            batch, max_q = int(q_shape[0]), int(q_shape[1])
        else:
            max_q = int(q_shape[0]) if max_seqlen_q is None else int(max_seqlen_q)
        page_size, max_k = cache_pages(k_shape, block_table_shape, max_seqlen_k)
        return _C.PrefillProblem(batch=int(batch), num_q_heads=num_q_heads, num_kv_heads=int(k_shape[2]),
                                 head_dim=head_dim, max_q_len=max_q, max_kv_len=max_k, varlen=bool(varlen),
                                 causal=bool(causal), dtype=DTYPE_BY_CODE[dtype],
                                 softmax_scale=scale_value(softmax_scale), kv_format=kv_format, kv_cache=True,
                                 page_size=page_size)
    if varlen:
        check_rank("q", q_shape, 3)
        check_rank("k", k_shape, 3)
        num_q_heads, head_dim = int(q_shape[1]), int(q_shape[2])
        num_kv_heads = int(k_shape[1])
        max_q = int(q_shape[0]) if max_seqlen_q is None else int(max_seqlen_q)
        max_k = int(k_shape[0]) if max_seqlen_k is None else int(max_seqlen_k)
    else:
        check_rank("q", q_shape, 4)
        check_rank("k", k_shape, 4)
        batch, max_q, num_q_heads, head_dim = (int(x) for x in q_shape)
        max_k, num_kv_heads = int(k_shape[1]), int(k_shape[2])
    return _C.PrefillProblem(batch=int(batch), num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
                             head_dim=head_dim, max_q_len=max_q, max_kv_len=max_k, varlen=bool(varlen),
                             causal=bool(causal), dtype=DTYPE_BY_CODE[dtype],
                             softmax_scale=scale_value(softmax_scale), kv_format=kv_format)


_device_infos = {}


def device_info(device):
    """DeviceInfo for planning: a DeviceInfo as is; an index (int) or torch.device: that GPU;
    'h200': the H200 description; None: GPU 0 when there is one, else the H200 description."""
    if isinstance(device, _C.DeviceInfo):
        return device
    if isinstance(device, str) and device.lower() == "h200":
        return _C.DeviceInfo.h200()
    if device is None:
        key = None
    elif isinstance(device, int):
        key = device
    elif getattr(device, "type", None) == "cpu":
        return _C.DeviceInfo.h200()
    elif getattr(device, "type", None) == "cuda":
        key = device.index if device.index is not None else 0
    elif isinstance(device, str) and device.startswith("cuda"):
        key = int(device.split(":")[1]) if ":" in device else 0
    else:
        raise invalid("device", "a GPU index, a torch.device, 'h200' or a splitkv.DeviceInfo", repr(device))
    info = _device_infos.get(key)
    if info is None:
        if key is None:
            try:
                info = _C.query_device(0)
            except _C.NoDeviceError:
                info = _C.DeviceInfo.h200()
        else:
            info = _C.query_device(key)
        _device_infos[key] = info
    return info


def tuning_names():
    """The PlanTuning switches (one description in the C++ options table)."""
    return tuple(n for n in dir(_C.PlanTuning) if not n.startswith("_"))


NO_WINDOW = (-1, -1)


_WINDOW_EXPECTED = "a pair (left, right) of ints, -1 for unbounded"


def _window_ints(window_size):
    """window_size as a tuple of ints (named error when it is not a sequence of ints)."""
    try:
        return tuple(int(x) for x in window_size)
    except (TypeError, ValueError) as e:
        raise invalid("window_size", _WINDOW_EXPECTED, window_size) from e


def variants_requested(window_size, softcap, sinks, tree_mask):
    """The first attention variant asked for (docs/VARIANTS.md), or None."""
    if _window_ints(window_size) != NO_WINDOW:
        return "window_size"
    if softcap:
        return "softcap"
    if sinks is not None:
        return "sinks"
    if tree_mask is not None:
        return "tree_mask"
    return None


def set_variants(problem, window_size, softcap, sinks, tree_mask):
    """Writes the variants into a DecodeProblem (tree_mask) or PrefillProblem; the C++ checks name
    a bad value (window_left, window_right, softcap)."""
    window = _window_ints(window_size)
    if len(window) != 2:
        raise invalid("window_size", _WINDOW_EXPECTED, window_size)
    problem.window_left, problem.window_right = window
    problem.softcap = float(softcap)
    problem.sinks = sinks is not None
    if tree_mask is not None:
        problem.tree_mask = True
    return problem
