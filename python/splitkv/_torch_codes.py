"""The element codes of torch dtypes (the C++ API's DType) and the torch dtypes a quantized cache's
codes may have, and the descriptor of such codes: shared by the torch ops and the quantizer, which
import it and not each other."""
import torch

from . import _common as cm

_CODES = {
    torch.float16: cm.F16,
    torch.bfloat16: cm.BF16,
    torch.float32: cm.F32,
    torch.int32: cm.I32,
    torch.int64: cm.I64,
    torch.int8: cm.I8,
}
if hasattr(torch, "float8_e4m3fn"):
    _CODES[torch.float8_e4m3fn] = cm.FP8

# The torch dtypes the codes of a quantized cache may have (the format says which codes they are).
_CODE_DTYPES = {cm.FP8: (torch.uint8,), cm.I8: (torch.uint8,), cm.I4: (torch.uint8,)}
if hasattr(torch, "float8_e4m3fn"):
    _CODE_DTYPES[cm.FP8] = (torch.uint8, torch.float8_e4m3fn)


def code_desc(t, argument, element, head_dim):
    """The descriptor of the codes of a quantized K or V cache (INT4: two codes a byte, in nibbles)."""
    if t.dtype not in _CODE_DTYPES[element]:
        raise cm.invalid(f"{argument}.dtype", cm.CODE_EXPECTED[element], str(t.dtype).replace("torch.", ""))
    if element == cm.I4:
        cm.check_int4_width(t.shape, head_dim, argument)
    return cm.code_desc(t.data_ptr(), element, t.shape, t.stride())
