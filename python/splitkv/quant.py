"""The host quantizer of the quantized KV cache formats (docs/KV_FORMATS.md), bound from
src/quant/kv_quant_host.* -- the definition the GPU append kernel and every test is checked
against, bit for bit.

    k_codes, v_codes, k_scales, v_scales = splitkv.quantize_kv(k_cache, v_cache, "int8")
    out = splitkv.decode(q, k_codes, v_codes, seq_lens, block_table, kv_format="int8",
                         k_scales=k_scales, v_scales=v_scales)
    k, v = splitkv.dequantize_kv(k_codes, v_codes, "int8", k_scales, v_scales)   # fp32 values

Caches are [blocks, slots, Hkv, D] (paged: pages x page_size; contiguous: sequences x capacity)
as numpy arrays or torch tensors (CUDA tensors are copied to the host and back: this is a host
utility, for tests and offline conversion, not for the serving path). Codes are uint8 (torch: fp8
codes as float8_e4m3fn); INT4 packs two codes a byte (element 2i in the low nibble), so its last
dim is D/2. Scales: FP8 float32 [Hkv], one per KV head (given, or max|x| / 448 over the finite
values of that head); INT8/INT4 float16 (scale, min) pairs [blocks, Hkv, slots, 2], one per row.
"""

import numpy as np

from . import _common as cm
from . import _numpy
from . import _splitkv as _C

try:
    import torch as _torch
except ImportError:
    _torch = None

_FP8_MAX = 448.0


def _is_torch(x):
    return _torch is not None and isinstance(x, _torch.Tensor)


def _quantized_format(kv_format):
    fmt = cm.kv_format(kv_format)
    elements = cm.kv_elements(fmt)
    if elements is None:
        raise cm.invalid("kv_format", "a quantized format (fp8, int8, int4 or k8v4)", fmt.name)
    if elements[2] == "group":
        raise cm.unsupported("kv_format", f"{fmt.name}: the Python quantizer does not build channel-quantized keys "
                                          "yet (docs/KV_FORMATS.md)")
    return fmt, elements


def _check_rank(x, argument):
    if len(x.shape) != 4:
        raise cm.invalid(f"{argument}.rank", "4 ([blocks, slots, Hkv, D])", str(len(x.shape)))


def _fp8_scales_np(x, given, argument, hkv):
    if given is None:
        a = np.abs(np.asarray(x, dtype=np.float32))
        a[~np.isfinite(a)] = 0.0
        amax = a.max(axis=(0, 1, 3)) if a.size else np.zeros(hkv, dtype=np.float32)
        return np.where(amax > 0, amax / np.float32(_FP8_MAX), np.float32(1.0)).astype(np.float32)
    s = np.asarray(given.detach().cpu() if _is_torch(given) else given, dtype=np.float32)
    if s.ndim == 0:
        s = np.full(hkv, s, dtype=np.float32)
    if s.shape != (hkv,):
        raise cm.invalid(argument, f"a scalar or {hkv} per-KV-head scales", f"shape {tuple(s.shape)}")
    return np.ascontiguousarray(s)


def _quantize_np(x, element, kind, scale, name, scale_name):
    """One side (K or V) of a numpy cache -> (codes uint8, scales)."""
    x = _numpy.as_array(x, name)
    _check_rank(x, name)
    blocks, slots, hkv, d = (int(n) for n in x.shape)
    if element == cm.I4 and d % 2:
        raise cm.invalid(f"{name}.shape[3]", "an even head dim (INT4 packs two codes a byte)", str(d))
    codes = np.zeros((blocks, slots, hkv, d // 2 if element == cm.I4 else d), dtype=np.uint8)
    if kind == "head":
        scales = _fp8_scales_np(x, scale, scale_name, hkv)
    else:
        scales = np.zeros((blocks, hkv, slots, 2), dtype=np.float16)
    code_desc = cm.code_desc(codes.__array_interface__["data"][0], element, codes.shape, codes.strides)
    _C.quantize_cache(_numpy.desc(x, name), code_desc, _numpy.desc(scales, scale_name), name, name + "_codes",
                      scale_name)
    return codes, scales


def _quantize_torch(x, element, kind, scale, name, scale_name):
    from ._torch_codes import _CODES

    device = x.device
    host = x.detach().cpu()
    _check_rank(host, name)
    if host.dtype not in (_torch.float16, _torch.bfloat16, _torch.float32):
        raise cm.invalid(f"{name}.dtype", "fp16, bf16 or fp32", str(host.dtype).replace("torch.", ""))
    blocks, slots, hkv, d = (int(n) for n in host.shape)
    if element == cm.I4 and d % 2:
        raise cm.invalid(f"{name}.shape[3]", "an even head dim (INT4 packs two codes a byte)", str(d))
    codes = _torch.zeros((blocks, slots, hkv, d // 2 if element == cm.I4 else d), dtype=_torch.uint8)
    if kind == "head":
        scales = _torch.from_numpy(_fp8_scales_np(host.float().numpy(), scale, scale_name, hkv))
    else:
        scales = _torch.zeros((blocks, hkv, slots, 2), dtype=_torch.float16)
    _C.quantize_cache((host.data_ptr(), _CODES[host.dtype], host.shape, host.stride()),
                      cm.code_desc(codes.data_ptr(), element, codes.shape, codes.stride()),
                      (scales.data_ptr(), _CODES[scales.dtype], scales.shape, scales.stride()),
                      name, name + "_codes", scale_name)
    if element == cm.FP8 and hasattr(_torch, "float8_e4m3fn"):
        codes = codes.view(_torch.float8_e4m3fn)
    return codes.to(device), scales.to(device)


def quantize_kv(k, v, kv_format, *, k_scale=None, v_scale=None):
    """Quantizes K and V caches [blocks, slots, Hkv, D] (fp16, bf16 or fp32) into a cache of
    kv_format ('fp8', 'int8', 'int4' or 'k8v4': INT8 keys, INT4 values) with the host quantizer.

    k_scale / v_scale (FP8 only): per-KV-head scales, a scalar or [Hkv]; default max|x| / 448 over
    the finite values of each head (1 for a head of zeros). Non-finite values follow the format's
    rules (FP8: NaN code 0x7f, +-inf saturates to +-448; INT rows holding NaN or inf read back NaN).

    Returns (k_codes, v_codes, k_scales, v_scales), the arguments splitkv.decode takes with
    kv_format; numpy arrays for numpy input, torch tensors on the input's device for torch input.
    """
    fmt, (k_elem, v_elem, kind) = _quantized_format(kv_format)
    if kind != "head" and (k_scale is not None or v_scale is not None):
        name = "k_scale" if k_scale is not None else "v_scale"
        raise cm.invalid(name, f"None for an {fmt.name} cache (its per-row scales are computed)", "a value")
    side = _quantize_torch if _is_torch(k) else _quantize_np
    k_codes, k_scales = side(k, k_elem, kind, k_scale, "k", "k_scale")
    side = _quantize_torch if _is_torch(v) else _quantize_np
    v_codes, v_scales = side(v, v_elem, kind, v_scale, "v", "v_scale")
    return k_codes, v_codes, k_scales, v_scales


def _dequantize_side(codes, scales, element, name, scale_name):
    if scales is None:
        raise cm.invalid(scale_name, "the scales of the codes", "None")
    if _is_torch(codes):
        from ._torch_codes import _CODES, code_desc

        device = codes.device
        host_codes, host_scales = codes.detach().cpu(), scales.detach().cpu()
        _check_rank(host_codes, name)
        d = int(host_codes.shape[3]) * (2 if element == cm.I4 else 1)
        out = _torch.empty(tuple(host_codes.shape[:3]) + (d,), dtype=_torch.float32)
        if host_scales.dtype not in _CODES:
            raise cm.invalid(f"{scale_name}.dtype", "fp32 (fp8) or fp16 (int8 / int4)",
                             str(host_scales.dtype).replace("torch.", ""))
        _C.dequantize_cache(code_desc(host_codes, name, element, d),
                            (host_scales.data_ptr(), _CODES[host_scales.dtype], host_scales.shape,
                             host_scales.stride()),
                            (out.data_ptr(), cm.F32, out.shape, out.stride()), name, scale_name)
        return out.to(device)
    codes = _numpy.as_array(codes, name)
    _check_rank(codes, name)
    d = int(codes.shape[3]) * (2 if element == cm.I4 else 1)
    out = np.empty(tuple(codes.shape[:3]) + (d,), dtype=np.float32)
    scales = _numpy.as_array(scales, scale_name)
    _C.dequantize_cache(_numpy.kv_desc(codes, name, element, d), _numpy.desc(scales, scale_name),
                        _numpy.desc(out, "out"), name, scale_name)
    return out


def dequantize_kv(k_codes, v_codes, kv_format, k_scales, v_scales):
    """The fp32 values a quantized cache stands for (what the fp64 reference and the CPU backend
    read): (k, v) [blocks, slots, Hkv, D] float32, numpy or torch like the codes."""
    fmt, (k_elem, v_elem, _) = _quantized_format(kv_format)
    return (_dequantize_side(k_codes, k_scales, k_elem, "k", "k_scales"),
            _dequantize_side(v_codes, v_scales, v_elem, "v", "v_scales"))


def quantize_kv_kc(k, v, kv_format, *, seq_lens=None, tail_dtype=np.float16):
    """A contiguous cache in a keys-per-channel format (kv_format 'int8_kc', 'int4_kc' or 'k8v4_kc',
    docs/KV_FORMATS.md) from K and V [B, L, Hkv, D] (numpy; fp16, bf16 or fp32) with the host
    definition: each sequence's first seq_lens[b] keys (all L without seq_lens) quantized per channel
    over groups of 64 positions, the newest incomplete group (and the group before it) kept in a
    tail of tail_dtype (the dtype of the queries: fp16, or bf16 through ml_dtypes); values per token.

    Returns (k_codes, v_codes, k_scales, v_scales, k_tail): pass them to splitkv.decode with
    kv_format and k_tail= (numpy arrays, the CPU backend).
    """
    fmt = cm.kv_format(kv_format)
    elements = cm.kv_elements(fmt)
    if elements is None or elements[2] != "group":
        raise cm.invalid("kv_format", "int8_kc, int4_kc or k8v4_kc (keys per channel)", fmt.name)
    if _is_torch(k) or _is_torch(v):
        raise cm.unsupported("k", "quantize_kv_kc takes numpy arrays so far")
    k = _numpy.as_array(k, "k")
    _check_rank(k, "k")
    batch, length, hkv, d = (int(n) for n in k.shape)
    k_elem, v_elem = elements[0], elements[1]
    if d % 2 and cm.I4 in (k_elem, v_elem):
        raise cm.invalid("k.shape[3]", "an even head dim (INT4 packs two codes a byte)", str(d))
    codes = np.zeros((batch, length, hkv, d // 2 if k_elem == cm.I4 else d), dtype=np.uint8)
    groups = (length + cm.KEY_GROUP - 1) // cm.KEY_GROUP
    k_scales = np.full((batch, hkv, groups, 2 * d), np.nan, dtype=np.float16)
    k_tail = np.full((batch, hkv, cm.KEY_TAIL_ROWS, d), np.nan, dtype=tail_dtype)
    lens = None if seq_lens is None else _numpy.as_index_array(seq_lens, "seq_lens")
    _C.quantize_keys_kc(_numpy.desc(k, "k"), _numpy.desc(lens, "seq_lens"),
                        cm.code_desc(codes.__array_interface__["data"][0], k_elem, codes.shape, codes.strides),
                        _numpy.desc(k_scales, "k_scales"), _numpy.desc(k_tail, "k_tail"))
    v_codes, v_scales = _quantize_np(v, v_elem, "pair", None, "v", "v_scale")
    return codes, v_codes, k_scales, v_scales, k_tail
