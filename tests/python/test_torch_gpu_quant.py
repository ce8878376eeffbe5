"""Quantized KV caches on CUDA tensors: decode over FP8 / INT8 / INT4 / K8V4 caches written by the
host quantizer (splitkv.quantize_kv) against fp32 SDPA over the values the cache stands for
(splitkv.dequantize_kv), bit for bit against itself across runs, with splits and LSE, strided
views, CUDA-graph replay with new lengths and new FP8 scales, torch.compile, and the errors for
bad scales; splitkv.append_kv (run_append_kv) writing the host quantizer's bytes, so that decode
after appending equals decode over the host-quantized cache bit for bit, also inside a CUDA graph.
Skips without CUDA, and per format when splitkv.plan_decode(..., kv_format=...) raises
NotImplementedError or the build lacks the format's kernels."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

import splitkv  # noqa: E402
from conftest import family_compiled  # noqa: E402
from test_torch_cpu import append_scenario, written_rows_equal  # noqa: E402
from test_torch_gpu import DEV, DTYPE, D, bits, check_decode, decode_inputs  # noqa: E402

FORMATS = ["fp8", "int8", "int4", "k8v4"]


def require(fmt, **shape):
    """Skips unless this API plans fmt and this build compiled the family the plan names."""
    problem = dict(batch=3, num_q_heads=16, num_kv_heads=4, head_dim=D, max_kv_len=2048, page_size=16,
                   dtype="bf16" if DTYPE == torch.bfloat16 else "fp16")
    problem.update(shape)
    try:
        plan = splitkv.plan_decode(kv_format=fmt, device=DEV.index, **problem)
    except NotImplementedError as e:
        pytest.skip(f"kv_format={fmt} is not supported: {e}")
    if not family_compiled(plan.family, fmt, D):
        pytest.skip(f"kernel family {plan.family} for kv_format={fmt}, D={D} is not compiled into this build")
    return plan


def quantized_inputs(fmt, **kwargs):
    q, k, v, lens, bt = decode_inputs(**kwargs)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, fmt)
    kd, vd = splitkv.dequantize_kv(kc, vc, fmt, ks, vs)  # fp32 values on the device
    return q, (kc, vc, ks, vs), (kd, vd), lens, bt


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("page_size", [0, 16, 64])
@pytest.mark.parametrize("q_len", [1, 4])
def test_quantized_decode_matches_sdpa_over_the_dequantized_cache(fmt, page_size, q_len):
    require(fmt, q_len=q_len, page_size=page_size)
    q, (kc, vc, ks, vs), (kd, vd), lens, bt = quantized_inputs(fmt, q_len=q_len, page_size=page_size,
                                                                 seed=q_len + page_size)
    assert kc.device == DEV and ks.device == DEV
    causal = q_len > 1
    out, lse = splitkv.decode(q, kc, vc, lens, bt, causal=causal, return_lse=True, kv_format=fmt, k_scales=ks,
                              v_scales=vs)
    assert out.shape == q.shape and out.dtype == DTYPE and lse.shape == (3, 16, q_len)
    check_decode(q, kd, vd, lens, bt, causal, out, lse)
    plan = splitkv.plan_decode(q, kc, vc, lens, bt, causal=causal, kv_format=fmt)
    assert plan.decode.kv_format == splitkv._common.kv_format(fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("options", [dict(num_splits=1), dict(num_splits=7), dict(split_tokens=256)])
def test_quantized_decode_options_and_determinism(fmt, options):
    require(fmt)
    q, (kc, vc, ks, vs), (kd, vd), lens, bt = quantized_inputs(fmt, q_len=2, page_size=16, seed=3)
    kw = dict(causal=True, return_lse=True, kv_format=fmt, k_scales=ks, v_scales=vs, **options)
    out, lse = splitkv.decode(q, kc, vc, lens, bt, **kw)
    check_decode(q, kd, vd, lens, bt, True, out, lse)
    again, again_lse = splitkv.decode(q, kc, vc, lens, bt, **kw)
    assert torch.equal(bits(out), bits(again)) and torch.equal(lse, again_lse)


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantized_decode_matches_the_cpu_backend(fmt):
    require(fmt)
    q, (kc, vc, ks, vs), _, lens, bt = quantized_inputs(fmt, q_len=3, page_size=16, seed=11)
    out, lse = splitkv.decode(q, kc, vc, lens, bt, causal=True, return_lse=True, kv_format=fmt, k_scales=ks,
                              v_scales=vs)
    cpu = [t.cpu() for t in (q, kc, vc, lens, bt, ks, vs)]
    cpu_out, cpu_lse = splitkv.decode(*cpu[:5], causal=True, return_lse=True, kv_format=fmt, k_scales=cpu[5],
                                      v_scales=cpu[6])
    torch.testing.assert_close(out.float().cpu(), cpu_out.float(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(lse.cpu(), cpu_lse, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("fmt", ["int4", "k8v4"])
def test_strided_code_views(fmt):
    require(fmt, num_kv_heads=2, num_q_heads=8)
    q, k, v, lens, bt = decode_inputs(hq=16, hkv=4, page_size=16, seed=4)
    kc, vc, ks, vs = splitkv.quantize_kv(k, v, fmt)
    q = q[:, :, ::2]  # 8 query heads on KV heads 0 and 2
    views = (kc[:, :, ::2], vc[:, :, ::2], ks[:, ::2], vs[:, ::2])
    dense = [t.contiguous() for t in views]
    a = splitkv.decode(q, views[0], views[1], lens, bt, kv_format=fmt, k_scales=views[2], v_scales=views[3])
    b = splitkv.decode(q, dense[0], dense[1], lens, bt, kv_format=fmt, k_scales=dense[2], v_scales=dense[3])
    assert torch.equal(bits(a), bits(b))


@pytest.mark.parametrize("fmt", ["fp8", "int8"])
def test_graph_replays_new_lengths_and_scales(fmt):
    require(fmt)
    q, (kc, vc, ks, vs), _, lens, bt = quantized_inputs(fmt, q_len=2, page_size=16, lens=(1500, 700, 64), seed=6)
    static_lens = lens.clone()
    kw = dict(causal=True, return_lse=True, kv_format=fmt, k_scales=ks, v_scales=vs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        splitkv.decode(q, kc, vc, static_lens, bt, **kw)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_lse = splitkv.decode(q, kc, vc, static_lens, bt, **kw)
    for step, new in enumerate(([1500, 700, 64], [3, 1501, 900])):
        static_lens.copy_(torch.tensor(new, dtype=torch.int32))
        if fmt == "fp8" and step:  # per-head scales live in device memory: a replay reads new ones
            ks.mul_(1.5)
            vs.mul_(0.5)
        graph.replay()
        e_out, e_lse = splitkv.decode(q, kc, vc, static_lens, bt, **kw)
        torch.cuda.synchronize()
        assert torch.equal(bits(g_out), bits(e_out)) and torch.equal(g_lse, e_lse)
        kd, vd = splitkv.dequantize_kv(kc, vc, fmt, ks, vs)
        check_decode(q, kd, vd, static_lens, bt, True, g_out, g_lse)


def test_compile_fullgraph_quantized():
    require("int8")
    q, (kc, vc, ks, vs), _, lens, bt = quantized_inputs("int8", q_len=2, page_size=16)

    def step(q, kc, vc, lens, bt, ks, vs):
        return splitkv.decode(q, kc, vc, lens, bt, causal=True, kv_format="int8", k_scales=ks, v_scales=vs)

    out = torch.compile(step, fullgraph=True)(q, kc, vc, lens, bt, ks, vs)
    assert torch.equal(bits(out), bits(step(q, kc, vc, lens, bt, ks, vs)))


def test_opcheck_quantized_cuda():
    require("k8v4")
    q, (kc, vc, ks, vs), _, lens, bt = quantized_inputs("k8v4", q_len=2, page_size=16)
    torch.library.opcheck(torch.ops.splitkv.decode_out.default,
                          (q, kc, vc, lens, bt, torch.empty_like(q), torch.empty(3, 16, 2, device=DEV), None, True,
                           None, 3, 0, 0, None, None, ks, vs, "k8v4"))


def test_quantized_errors_on_cuda():
    require("int8")
    q, (kc, vc, ks, vs), _, lens, bt = quantized_inputs("int8", page_size=16)
    with pytest.raises(ValueError, match=r"^splitkv: invalid argument 'k_scales': expected float16 \(scale, min\) "
                                         r"pairs \[blocks, Hkv, slots, 2\] for an int8 cache, got None$"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int8", v_scales=vs)
    with pytest.raises(ValueError, match=r"'v_scales.device': expected cuda:\d \(the device of q\), got cpu"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int8", k_scales=ks, v_scales=vs.cpu())
    with pytest.raises(ValueError, match=r"'k_scales.dtype': expected fp16, got fp32"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int8", k_scales=ks.float(), v_scales=vs)
    with pytest.raises(ValueError, match=r"'v_scales.shape\[2\]'"):
        splitkv.decode(q, kc, vc, lens, bt, kv_format="int8", k_scales=ks, v_scales=vs[:, :, :8])
    with pytest.raises(ValueError, match=r"'k.dtype': expected uint8 int8 codes"):
        splitkv.decode(q, kc.to(DTYPE), vc, lens, bt, kv_format="int8", k_scales=ks, v_scales=vs)


# ---- append_kv ----------------------------------------------------------------------------------

def _decode_both(q, lens, bt, appended, reference, fmt):
    kw = dict(causal=True, return_lse=True, kv_format=fmt)
    out = splitkv.decode(q, appended[0], appended[1], lens, bt, k_scales=appended[2], v_scales=appended[3], **kw)
    ref = splitkv.decode(q, reference[0], reference[1], lens, bt, k_scales=reference[2], v_scales=reference[3], **kw)
    return out, ref


@pytest.mark.parametrize("fmt", [None] + FORMATS)
@pytest.mark.parametrize("page_size", [0, 16, 64])
def test_append_kv_writes_the_host_quantizer_bytes(fmt, page_size):
    if fmt is not None:
        require(fmt, num_q_heads=8, num_kv_heads=2, q_len=2, page_size=page_size)
    q, lens, bt, appended, reference, k_new, v_new, slots = append_scenario(
        fmt, page_size, device=DEV, dtype=DTYPE, d=D, lens=(300, 77, 1), seed=page_size)
    slots = slots.long() if page_size == 16 else slots  # int64 (vLLM's slot mapping) or int32
    splitkv.append_kv(k_new, v_new, appended[0], appended[1], slots, k_scales=appended[2], v_scales=appended[3],
                      kv_format=fmt)
    torch.cuda.synchronize()
    assert written_rows_equal(appended, reference, slots, appended[0].shape[1])
    (out, lse), (ref, ref_lse) = _decode_both(q, lens, bt, appended, reference, fmt)
    assert torch.equal(bits(out), bits(ref)) and torch.equal(lse, ref_lse)


def test_append_kv_skips_invalid_slots():
    require("k8v4", num_q_heads=8, num_kv_heads=2)
    _, _, _, appended, _, k_new, v_new, slots = append_scenario("k8v4", 16, device=DEV, dtype=DTYPE, d=D)
    before = [t.clone() for t in appended]
    skip = torch.full_like(slots, -1)
    skip[0] = appended[0].shape[0] * appended[0].shape[1]  # one row past the cache
    splitkv.append_kv(k_new, v_new, appended[0], appended[1], skip, k_scales=appended[2], v_scales=appended[3],
                      kv_format="k8v4")
    torch.cuda.synchronize()
    assert all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(appended, before))


@pytest.mark.parametrize("fmt", ["fp8", "int4"])
def test_append_kv_and_decode_in_a_cuda_graph(fmt):
    require(fmt, num_q_heads=8, num_kv_heads=2, q_len=2)
    q, lens, bt, appended, reference, k_new, v_new, slots = append_scenario(fmt, 16, device=DEV, dtype=DTYPE, d=D,
                                                                             seed=7)
    static_k, static_v = torch.zeros_like(k_new), torch.zeros_like(v_new)
    static_slots = torch.full_like(slots, -1)
    kc, vc, ks, vs = appended

    def step():
        splitkv.append_kv(static_k, static_v, kc, vc, static_slots, k_scales=ks, v_scales=vs, kv_format=fmt)
        return splitkv.decode(q, kc, vc, lens, bt, causal=True, return_lse=True, kv_format=fmt, k_scales=ks,
                              v_scales=vs)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up (plan caches) with every slot skipped
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_lse = step()
    static_k.copy_(k_new)
    static_v.copy_(v_new)
    static_slots.copy_(slots)
    graph.replay()
    torch.cuda.synchronize()
    assert written_rows_equal(appended, reference, slots, kc.shape[1])
    _, (ref, ref_lse) = _decode_both(q, lens, bt, appended, reference, fmt)
    assert torch.equal(bits(g_out), bits(ref)) and torch.equal(g_lse, ref_lse)


def test_append_kv_opcheck_and_errors_on_cuda():
    require("int8", num_q_heads=8, num_kv_heads=2)
    _, _, _, (kc, vc, ks, vs), _, k_new, v_new, slots = append_scenario("int8", 16, device=DEV, dtype=DTYPE, d=D)
    torch.library.opcheck(torch.ops.splitkv.append_kv.default, (k_new, v_new, kc, vc, slots, ks, vs, "int8"))
    with pytest.raises(ValueError, match=r"'k_scales'"):
        splitkv.append_kv(k_new, v_new, kc, vc, slots, v_scales=vs, kv_format="int8")
    with pytest.raises(ValueError, match=r"'slots.device': expected cuda:\d \(the device of k_cache\), got cpu"):
        splitkv.append_kv(k_new, v_new, kc, vc, slots.cpu(), k_scales=ks, v_scales=vs, kv_format="int8")
    with pytest.raises(ValueError, match=r"'v_cache.dtype'"):
        splitkv.append_kv(k_new, v_new, kc, vc.view(torch.int8), slots, k_scales=ks, v_scales=vs, kv_format="int8")


def test_append_kv_fp8_bad_scale_matches_the_cpu_path():
    require("fp8", num_q_heads=8, num_kv_heads=2)
    _, _, _, appended, _, k_new, v_new, slots = append_scenario("fp8", 16, device=DEV, dtype=DTYPE, d=D)
    appended[2][1] = 0.0
    appended[3][0] = float("nan")
    host = [t.cpu() for t in appended]
    splitkv.append_kv(k_new, v_new, appended[0], appended[1], slots, k_scales=appended[2], v_scales=appended[3],
                      kv_format="fp8")
    splitkv.append_kv(k_new.cpu(), v_new.cpu(), host[0], host[1], slots.cpu(), k_scales=host[2], v_scales=host[3],
                      kv_format="fp8")
    for gpu, cpu in zip(appended[:2], host[:2]):
        assert torch.equal(gpu.cpu().view(torch.uint8), cpu.view(torch.uint8))
