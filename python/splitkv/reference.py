"""The fp64 reference every kernel is tested against, over host memory (numpy arrays or CPU
tensors). Inputs are upcast exactly; arithmetic is fp64. Results are float64 numpy arrays in the
dense layouts of the outputs. Rows that see no key give out = 0 and lse = -inf.

    out, lse = splitkv.reference.decode(q, k_cache, v_cache, seq_lens, block_table=None, causal=False,
                                        kv_format=None, k_scales=None, v_scales=None)
    out, lse = splitkv.reference.prefill(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, causal=False)
"""

import numpy as np

from . import _common as cm
from . import _numpy

try:
    import torch as _torch
except ImportError:
    _torch = None


def _host(x, argument, index=False):
    """numpy view of a host array or CPU tensor (bf16 tensors are viewed through their bits)."""
    if _torch is not None and isinstance(x, _torch.Tensor):
        if x.device.type != "cpu":
            raise cm.invalid(f"{argument}.device", "host memory (a numpy array or a CPU tensor)", str(x.device))
        return _TorchHost(x)
    if index:
        return _numpy.as_index_array(x, argument)
    return _numpy.as_array(x, argument)


class _TorchHost:
    """A CPU tensor passed as a descriptor (keeps bf16, which numpy lacks)."""

    def __init__(self, t):
        self.t = t
        self.shape = tuple(t.shape)

    def desc(self, argument):
        from ._torch_codes import _CODES

        code = _CODES.get(self.t.dtype)
        if code is None:
            raise cm.invalid(f"{argument}.dtype", cm.EXPECTED_DTYPE.get(argument, "a splitkv dtype"),
                             str(self.t.dtype).replace("torch.", ""))
        return (self.t.data_ptr(), code, self.t.shape, self.t.stride())

    def code(self, argument):
        return self.desc(argument)[1]


def _desc(a, argument):
    if a is None:
        return None
    if isinstance(a, _TorchHost):
        return a.desc(argument)
    return _numpy.desc(a, argument)


def _code(a, argument):
    return a.code(argument) if isinstance(a, _TorchHost) else _numpy.code(a, argument)


def _kv_desc(a, argument, element, head_dim):
    if isinstance(a, _TorchHost):
        if element is None:
            return a.desc(argument)
        from ._torch_codes import code_desc

        return code_desc(a.t, argument, element, head_dim)
    return _numpy.kv_desc(a, argument, element, head_dim)


def _scales_desc(a, argument, fmt):
    if a is None:
        return None
    a = _host(a, argument)
    if isinstance(a, _TorchHost):
        return a.desc(argument)
    return _numpy.scales_desc(a, argument, fmt)


def decode(q, k_cache, v_cache, seq_lens, block_table=None, *, causal=False, softmax_scale=None, max_seqlen_k=None,
           kv_format=None, k_scales=None, v_scales=None):
    """fp64 decode attention: (out [B, q_len, Hq, D], lse [B, Hq, q_len]) as float64 arrays.
    A quantized cache (kv_format, with k_scales / v_scales as in splitkv.decode) is read as the
    values it stands for (docs/KV_FORMATS.md)."""
    from . import _splitkv as _C

    q, k, v = _host(q, "q"), _host(k_cache, "k"), _host(v_cache, "v")
    seq_lens = _host(seq_lens, "seq_lens", index=True)
    block_table = None if block_table is None else _host(block_table, "block_table", index=True)
    fmt = cm.kv_format(kv_format)
    problem = cm.decode_problem(q.shape, k.shape, None if block_table is None else block_table.shape,
                                _code(q, "q"), causal, softmax_scale, max_seqlen_k, fmt)
    elements = cm.kv_elements(fmt)
    k_elem, v_elem = (None, None) if elements is None else elements[:2]
    cm.check_scales_given(fmt, k_scales, v_scales)
    d = problem.head_dim
    out, lse = _C.reference_decode(problem, _desc(q, "q"), _kv_desc(k, "k", k_elem, d), _kv_desc(v, "v", v_elem, d),
                                   _desc(seq_lens, "seq_lens"), _desc(block_table, "block_table"),
                                   _scales_desc(k_scales, "k_scales", fmt), _scales_desc(v_scales, "v_scales", fmt))
    b, lq, hq, d = problem.batch, problem.q_len, problem.num_q_heads, problem.head_dim
    return (np.frombuffer(out, dtype=np.float64).reshape(b, lq, hq, d),
            np.frombuffer(lse, dtype=np.float64).reshape(b, hq, lq))


def prefill(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, causal=False,
            softmax_scale=None):
    """fp64 prefill attention: padded (out [B, Lq, Hq, D], lse [B, Hq, Lq]) or varlen
    (out [total_q, Hq, D], lse [Hq, total_q]) as float64 arrays."""
    from . import _splitkv as _C

    q, k, v = _host(q, "q"), _host(k, "k"), _host(v, "v")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    batch = q.shape[0] if len(q.shape) == 4 else 0
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            missing = "cu_seqlens_q" if cu_seqlens_q is None else "cu_seqlens_k"
            raise cm.invalid(missing, "both cu_seqlens_q and cu_seqlens_k for varlen batches", "None")
        cu_seqlens_q = _host(cu_seqlens_q, "cu_seqlens_q", index=True)
        cu_seqlens_k = _host(cu_seqlens_k, "cu_seqlens_k", index=True)
        cm.check_rank("cu_seqlens_q", cu_seqlens_q.shape, 1)
        batch = cu_seqlens_q.shape[0] - 1
    problem = cm.prefill_problem(q.shape, k.shape, varlen, batch, _code(q, "q"), causal, softmax_scale,
                                 max_seqlen_q, max_seqlen_k)
    out, lse = _C.reference_prefill(problem, _desc(q, "q"), _desc(k, "k"), _desc(v, "v"),
                                    _desc(cu_seqlens_q, "cu_seqlens_q"), _desc(cu_seqlens_k, "cu_seqlens_k"))
    hq, d = problem.num_q_heads, problem.head_dim
    out = np.frombuffer(out, dtype=np.float64)
    lse = np.frombuffer(lse, dtype=np.float64)
    if varlen:
        total_q = q.shape[0]
        return out.reshape(total_q, hq, d), lse.reshape(hq, total_q)
    return out.reshape(batch, problem.max_q_len, hq, d), lse.reshape(batch, hq, problem.max_q_len)
