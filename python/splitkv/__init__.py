"""splitkv: split-KV attention for decode and prefill on NVIDIA GPUs.

    import splitkv
    out = splitkv.decode(q, k_cache, v_cache, seq_lens, block_table)   # torch CUDA tensors
    print(splitkv.plan_decode(q, k_cache, v_cache, seq_lens, block_table))

Torch tensors run on the GPU kernels (CUDA tensors) or on the CPU backend / fp64 reference (CPU
tensors); numpy arrays run on the CPU backend (decode) and the fp64 reference (prefill). The
torch operators ``torch.ops.splitkv.decode_out`` / ``prefill_out`` are registered on import when
torch is installed. See docs/PYTHON.md.
"""

from pkgutil import extend_path

# A CMake build puts the extension module in <build>/python/splitkv/; with both that directory and
# python/ on sys.path the package is made of the two (the installed wheel has a single directory).
__path__ = extend_path(__path__, __name__)

from . import _splitkv  # noqa: E402
from ._splitkv import (  # noqa: E402,F401
    CudaError,
    DecodeProblem,
    DeviceInfo,
    DType,
    Error,
    InvalidArgumentError,
    KvFormat,
    NoDeviceError,
    Plan,
    PlanOptions,
    PlanTuning,
    PrefillProblem,
    Strategy,
    UnsupportedError,
    WorkspaceTooSmallError,
    compiled_head_dims,
    describe,
    query_device,
)
from .api import (  # noqa: E402,F401
    append_kv,
    combine,
    decode,
    decode_shard,
    kernel_families,
    plan_decode,
    plan_prefill,
    prefill,
)
from . import reference  # noqa: E402,F401
from .quant import dequantize_kv, quantize_kv, quantize_kv_kc  # noqa: E402,F401

__version__ = "0.1.0"

try:  # the torch operators, when torch is there (nothing else needs torch)
    import torch as _torch  # noqa: F401
except ImportError:  # numpy-only installation
    _torch = None
if _torch is not None:
    from . import _torch_ops  # noqa: E402,F401

__all__ = [
    "decode",
    "decode_shard",
    "prefill",
    "combine",
    "append_kv",
    "kernel_families",
    "plan_decode",
    "plan_prefill",
    "describe",
    "query_device",
    "compiled_head_dims",
    "reference",
    "quantize_kv",
    "quantize_kv_kc",
    "dequantize_kv",
    "Plan",
    "PlanOptions",
    "PlanTuning",
    "DecodeProblem",
    "PrefillProblem",
    "DeviceInfo",
    "DType",
    "KvFormat",
    "Strategy",
    "Error",
    "InvalidArgumentError",
    "UnsupportedError",
    "WorkspaceTooSmallError",
    "CudaError",
    "NoDeviceError",
]
