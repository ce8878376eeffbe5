"""Every Status category as a Python exception, with the C++ message that names the argument:
invalid argument -> ValueError, unsupported -> NotImplementedError, workspace too small ->
ValueError, CUDA error / no device -> RuntimeError (all splitkv.Error)."""

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase, gpu_present
from splitkv import _splitkv as C


def raises(exc_type, argument, message=None):
    """pytest.raises that also checks the .argument attribute (and optionally the message)."""

    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc_type)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.ctx.__exit__(*exc)
            e = self.info.value
            assert isinstance(e, splitkv.Error)
            assert e.argument == argument, f"argument {e.argument!r}, message: {e}"
            if argument:
                assert f"'{argument}'" in str(e)
            assert str(e).startswith("splitkv: ")
            if message is not None:
                assert str(e) == message, str(e)
            return suppressed

    return _Check()


def test_readme_message_for_a_bad_page_id():
    c = DecodeCase(batch=2, q_len=1, hq=4, hkv=1, d=64, lens=(16, 64), page_size=16, extra_pages=512 - 8)
    assert c.k.shape[0] == 512
    c.block_table[1][3] = 9000
    with raises(ValueError, "block_table[1][3]",
                "splitkv: invalid argument 'block_table[1][3]': expected a page id in [0, 512), got 9000"):
        splitkv.decode(*c.args())


def test_invalid_arguments():
    c = DecodeCase(batch=2, q_len=2, hq=8, hkv=2, d=64, lens=(30, 12))
    q, k, v, lens, _ = c.args()
    with raises(ValueError, "seq_lens[1]",
                "splitkv: invalid argument 'seq_lens[1]': expected a length in [0, max_kv_len=33], got 34"):
        splitkv.decode(q, k, v, np.array([30, 34], dtype=np.int32))
    with raises(ValueError, "seq_lens.dtype", "splitkv: invalid argument 'seq_lens.dtype': expected int32, got int64"):
        splitkv.decode(q, k, v, lens.astype(np.int64))
    k128 = np.zeros(k.shape[:3] + (128,), dtype=np.float16)
    with raises(ValueError, "k.shape[3]", "splitkv: invalid argument 'k.shape[3]': expected 64, got 128"):
        splitkv.decode(q, k128, k128, lens)
    with raises(ValueError, "num_q_heads"):
        splitkv.decode(q[:, :, :7], k, v, lens)
    with raises(ValueError, "q_len", "splitkv: invalid argument 'q_len': expected 1..16, got 17"):
        splitkv.decode(np.zeros((2, 17, 8, 64), dtype=np.float16), k, v, lens)
    with raises(ValueError, "softmax_scale"):
        splitkv.decode(q, k, v, lens, softmax_scale=-1.0)
    with raises(ValueError, "q.rank"):
        splitkv.decode(q[0], k, v, lens)
    with raises(ValueError, "out.dtype"):
        splitkv.decode(q, k, v, lens, out=np.empty(q.shape, dtype=np.float32))


def test_layout_errors():
    c = DecodeCase(batch=1, q_len=1, hq=4, hkv=4, d=64, lens=(20,))
    q, k, v, lens, _ = c.args()
    q_wide = np.zeros(q.shape[:3] + (128,), dtype=np.float16)
    with raises(ValueError, "q.stride[3]"):  # the head dim must be contiguous
        splitkv.decode(q_wide[..., ::2], k, v, lens)
    k_odd = np.zeros(k.shape[:3] + (65,), dtype=np.float16)[..., :64]
    with raises(ValueError, "k.stride[0]"):  # rows must be 16-byte aligned (the first stride checked)
        splitkv.decode(q, k_odd, k_odd, lens)


def test_prefill_errors():
    q = np.zeros((7, 4, 64), dtype=np.float16)
    k = np.zeros((9, 4, 64), dtype=np.float16)
    with raises(ValueError, "cu_seqlens_q[2]"):
        splitkv.prefill(q, k, k, cu_seqlens_q=[0, 5, 3, 7], cu_seqlens_k=[0, 3, 6, 9])
    with raises(ValueError, "cu_seqlens_k"):
        splitkv.prefill(q, k, k, cu_seqlens_q=[0, 7])
    with raises(NotImplementedError, "head_dim"):
        q96 = np.zeros((1, 4, 2, 96), dtype=np.float16)
        splitkv.prefill(q96, q96, q96)
    with raises(ValueError, "strategy"):
        splitkv.plan_prefill(batch=1, num_q_heads=4, num_kv_heads=4, head_dim=64, max_q_len=8, max_kv_len=8,
                             strategy="fastest")


def test_unsupported():
    with raises(NotImplementedError, "head_dim") as info:
        splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=96, max_kv_len=128)
    assert "96" in str(info.value)
    # Quantized caches: decode reads them (family decode_quant_n8 for <= 8 packed rows), prefill does not.
    problem = C.PrefillProblem(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_q_len=64, max_kv_len=128,
                               kv_format=C.KvFormat.fp8_e4m3)
    with raises(NotImplementedError, "kv_format"):
        C.plan_prefill(problem, C.DeviceInfo.h200(), C.PlanOptions())
    decode = C.DecodeProblem(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=128,
                             kv_format=C.KvFormat.fp8_e4m3)
    assert C.plan_decode(decode, C.DeviceInfo.h200(), C.PlanOptions()).family == "decode_quant_n8"
    c = DecodeCase(batch=1, q_len=1, hq=4, hkv=4, d=64, lens=(20,))
    q8 = np.zeros(c.q.shape, dtype=np.int8)
    with raises(ValueError, "dtype"):  # Q/O are fp16 or bf16; quantized caches are a kv_format
        splitkv.decode(q8, c.k, c.v, c.lens)


# ---- the GPU entry points' argument checks come before any device work, so fake (aligned)
# addresses exercise them on any machine.

def _descs(d=128, dtype=C.DType.bf16.value):
    q = (0x10000, dtype, (1, 1, 8, d), (8 * d, 8 * d, d, 1))
    k = (0x100000, dtype, (1, 1024, 8, d), (1024 * 8 * d, 8 * d, d, 1))
    lens = (0x200000, C.DType.int32.value, (1,), (1,))
    return q, k, lens


def test_workspace_errors():
    plan = splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=1024, num_splits=4,
                               device="h200")
    q, k, lens = _descs()
    with raises(splitkv.WorkspaceTooSmallError, "workspace_bytes"):
        C.run_decode(plan, q, k, k, lens, None, q, None, 0x400000, plan.workspace_bytes - 1, 0)
    with raises(ValueError, "workspace"):
        C.run_decode(plan, q, k, k, lens, None, q, None, 0, 0, 0)
    with raises(ValueError, "workspace"):
        C.run_decode(plan, q, k, k, lens, None, q, None, 0x400008, plan.workspace_bytes, 0)  # misaligned
    assert issubclass(splitkv.WorkspaceTooSmallError, ValueError)


def test_uncompiled_head_dim_is_unsupported_at_run_time():
    missing = [d for d in (64, 128, 256) if d not in splitkv.compiled_head_dims()]
    if not missing:
        pytest.skip("this build compiled every head dim")
    d = missing[0]
    plan = splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=d, max_kv_len=1024, num_splits=1,
                               device="h200")
    q, k, lens = _descs(d)
    with raises(NotImplementedError, "plan.family") as info:
        C.run_decode(plan, q, k, k, lens, None, q, None, 0, 0, 0)
    assert "not compiled into this build" in str(info.value)


def test_descriptor_rank_mismatch():
    plan = splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=1024, num_splits=1,
                               device="h200")
    q, k, lens = _descs()
    bad_q = (q[0], q[1], q[2], q[3][:3])  # strides of another rank
    with raises(ValueError, "q.rank"):
        C.run_decode(plan, bad_q, k, k, lens, None, q, None, 0, 0, 0)


def test_plan_kind_mismatch():
    plan = splitkv.plan_prefill(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_q_len=1, max_kv_len=1024,
                                device="h200")
    q, k, lens = _descs()
    with raises(ValueError, "plan", "splitkv: invalid argument 'plan': expected a decode plan, got a prefill plan"):
        C.run_decode(plan, q, k, k, lens, None, q, None, 0, 0, 0)


@pytest.mark.skipif(gpu_present(), reason="needs a machine without a GPU")
def test_no_device_and_cuda_errors_without_gpu():
    with raises(splitkv.NoDeviceError, "", "splitkv: no device: no CUDA device is available") as info:
        splitkv.query_device(0)
    assert isinstance(info.value, RuntimeError)
    plan = splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=1024, num_splits=1,
                               device="h200")
    if 128 not in splitkv.compiled_head_dims() or not C.dtype_compiled(C.DType.bf16):
        pytest.skip("bf16 D=128 kernels not compiled")
    q, k, lens = _descs()
    # Valid arguments, no GPU: the launch itself fails and says so.
    with pytest.raises(splitkv.CudaError, match=r"^splitkv: CUDA error: decode kernel launch: ") as e:
        C.run_decode(plan, q, k, k, lens, None, q, None, 0, 0, 0)
    assert isinstance(e.value, RuntimeError)
    with raises(splitkv.NoDeviceError, ""):  # making a device current needs one
        C.run_decode(plan, q, k, k, lens, None, q, None, 0, 0, 0, 0)


@pytest.mark.skipif(not gpu_present(), reason="needs a GPU")
def test_bad_device_index_with_gpu():
    with raises(ValueError, "device"):
        splitkv.query_device(10000)
