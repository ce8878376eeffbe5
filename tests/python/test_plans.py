"""Plans from Python: fields, printing (the CLI's `splitkv plan` text), and the plan decode() uses."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import splitkv
from conftest import DecodeCase


def test_plan_prints_like_describe():
    plan = splitkv.plan_decode(batch=8, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=131072,
                               device="h200")
    text = str(plan)
    assert text == splitkv.describe(plan) == plan.describe()
    lines = text.splitlines()
    assert lines[0].startswith("decode: batch=8 Hq=32 Hkv=8 D=128 q_len=1 max_kv_len=131072 page_size=0 causal=0 "
                               "dtype=bf16")
    assert lines[1].startswith("device: 132 SMs")
    assert any(line.startswith("splits: ") for line in lines)
    assert lines[-1] == f"workspace: {plan.workspace_bytes} bytes"
    assert plan.kind == "decode" and plan.num_splits >= 1 and len(plan.grid) == 3
    assert repr(plan).startswith("<splitkv.Plan decode")


def test_plan_options_reach_the_plan():
    common = dict(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=8192, device="h200")
    assert splitkv.plan_decode(**common, num_splits=4).num_splits == 4
    assert splitkv.plan_decode(**common, max_splits=3).num_splits <= 3
    fixed = splitkv.plan_decode(**common, split_tokens=512)
    assert fixed.split_tokens == 512 and "batch-invariant" in str(fixed)
    assert splitkv.plan_decode(**common, num_splits=1).workspace_bytes == 0
    assert splitkv.plan_decode(**common, num_splits=4).workspace_bytes > 0


def test_short_rows_merge_in_a_cluster_unless_told_not_to():
    short = dict(batch=1, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=1024, device="h200")
    merged = splitkv.plan_decode(**short)
    assert merged.cluster_combine and merged.num_splits == 8 and merged.workspace_bytes == 0
    kept = splitkv.plan_decode(**short, merge="combine-kernel")
    assert not kept.cluster_combine and kept.workspace_bytes > 0
    assert splitkv.plan_decode(**dict(short, max_kv_len=4096)).cluster_combine
    assert not splitkv.plan_decode(**dict(short, max_kv_len=8192)).cluster_combine


def test_prefill_plan():
    plan = splitkv.plan_prefill(batch=2, num_q_heads=16, num_kv_heads=4, head_dim=128, max_q_len=4096,
                                max_kv_len=4096, causal=True, device="h200")
    assert plan.kind == "prefill"
    assert str(plan).startswith("prefill: batch=2 Hq=16 Hkv=4 D=128 max_q_len=4096 max_kv_len=4096 varlen=0 causal=1")
    two_pass = splitkv.plan_prefill(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=64, max_q_len=512,
                                    max_kv_len=512, strategy="two-pass", device="h200")
    assert "two-pass" in str(two_pass) and two_pass.workspace_bytes > 0


def test_plan_from_arrays_is_the_one_decode_uses():
    c = DecodeCase(batch=2, q_len=3, hq=8, hkv=2, d=64, lens=(300, 20), page_size=16)
    plan = splitkv.plan_decode(*c.args(), causal=True, num_splits=3)
    d = plan.decode
    assert (d.batch, d.q_len, d.num_q_heads, d.num_kv_heads, d.head_dim) == (2, 3, 8, 2, 64)
    assert d.page_size == 16 and d.causal and plan.num_splits == 3
    assert d.max_kv_len == c.block_table.shape[1] * 16  # the capacity: lengths are not read for planning
    assert d.dtype == splitkv.DType.fp16


def test_plan_for_a_device_description():
    dev = splitkv.DeviceInfo.h200()
    dev.sm_count = 16
    small = splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=65536, device=dev)
    assert "device: 16 SMs" in str(small)


def test_even_placement_reaches_the_plan():
    from splitkv import _splitkv as C
    problem = C.DecodeProblem(batch=8, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=32768,
                              kv_format=C.KvFormat.int4)
    options = C.PlanOptions()
    assert options.tuning.even_placement and options.merge == "auto"
    padded = C.plan_decode(problem, C.DeviceInfo.h200(), options)  # 256 blocks, 3 fit per SM: hold 2
    assert padded.launch_smem_bytes > padded.smem_bytes and "even placement" in str(padded)
    options.tuning.even_placement = False
    assert C.plan_decode(problem, C.DeviceInfo.h200(), options).launch_smem_bytes == 0


def test_the_variants_twins_reach_the_plan():
    # gpt-oss decode with speculative rows (the 32-row tile at D=64): blocks of a 128-key window take
    # the variants instance's two-warp twin (five blocks per SM; six for B=256's one-split grid);
    # blocks of a 4096-key window at
    # B=16 take its register-bound twin (three: one round of 384 blocks, not two).
    from splitkv import _splitkv as C

    def plan(batch, window):
        problem = C.DecodeProblem(batch=batch, num_q_heads=64, num_kv_heads=8, head_dim=64, max_kv_len=8192, q_len=4,
                                  causal=True)
        problem.window_left, problem.sinks = window, window == 128
        return C.plan_decode(problem, C.DeviceInfo.h200(), C.PlanOptions())
    short = plan(128, 128)
    assert short.short_twin_warps == 2 and short.warps == 2 and short.blocks_per_sm == 5
    assert short.register_bound_blocks == 0 and "short-block twin" in str(short)
    # B=256: its version without the cluster inbox, register-bound for six (three rounds, not four).
    bound = plan(256, 128)
    assert bound.short_twin_warps == 2 and bound.blocks_per_sm == 6 and bound.register_bound_blocks == 6
    long = plan(16, 4096)
    assert long.short_twin_warps == 0 and long.register_bound_blocks == 3 and long.blocks_per_sm == 3
    assert "register-bound for 3" in str(long)


def _cli():
    explicit = os.environ.get("SPLITKV_CLI")
    if explicit:
        return pathlib.Path(explicit)
    # A CMake build: <build>/python/splitkv/_splitkv*.so next to <build>/splitkv.
    module = pathlib.Path(splitkv._splitkv.__file__).resolve()
    return module.parents[2] / "splitkv"


@pytest.mark.parametrize("args,kwargs", [
    (["-b", "4", "--hq", "32", "--hkv", "8", "-d", "128", "--lk", "16384"],
     dict(batch=4, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=16384)),
    (["-b", "1", "--hq", "8", "--hkv", "1", "-d", "64", "--lq", "4", "--lk", "4097", "--page-size", "16", "--causal"],
     dict(batch=1, num_q_heads=8, num_kv_heads=1, head_dim=64, q_len=4, max_kv_len=4097, page_size=16, causal=True)),
])
def test_plan_text_matches_the_cli(args, kwargs):
    cli = _cli()
    if not cli.is_file():
        pytest.skip(f"no splitkv CLI at {cli} (set SPLITKV_CLI)")
    run = subprocess.run([str(cli), "plan", *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    cli_lines = run.stdout.splitlines()
    assert cli_lines[0].startswith("(")  # "(device 0)" or "(no GPU: planning for an H200)"
    plan = splitkv.plan_decode(**kwargs)  # device=None: GPU 0 when there is one, else the H200
    assert str(plan).splitlines() == cli_lines[1:]


def test_compiled_head_dims():
    dims = splitkv.compiled_head_dims()
    assert dims and set(dims) <= {64, 128, 256}
    assert isinstance(np.int32(dims[0]).item(), int)


def test_kernel_families_and_family_option():
    families = splitkv.kernel_families()
    names = {f.name: f for f in families}
    decode_family = next(f for f in families if f.kind == "decode")
    assert decode_family.compiled, "the build compiled no decode instance"
    # 16 packed rows per KV head fill the first decode family's (decode_mma's) tile; at most 8 take
    # the keys-as-rows tile.
    assert splitkv.plan_decode(batch=1, num_q_heads=16, num_kv_heads=1, head_dim=128, max_kv_len=1024,
                               device="h200").family == decode_family.name
    assert splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=1024,
                               device="h200").family == "decode_mma_n8"
    prefill_names = [n for n, f in names.items() if f.kind == "prefill" and 128 in f.head_dims]
    for name in prefill_names:
        plan = splitkv.plan_prefill(batch=1, num_q_heads=4, num_kv_heads=4, head_dim=128, max_q_len=256,
                                    max_kv_len=256, family=name, strategy=names[name].strategies[0], device="h200")
        assert plan.family == name and f"family: {name}" in str(plan)
    with pytest.raises(ValueError, match="'options.family'"):
        splitkv.plan_decode(batch=1, num_q_heads=8, num_kv_heads=8, head_dim=128, max_kv_len=1024, family="nope")


def test_merge_names_and_tuning_switches_come_from_the_options_table():
    from splitkv import _splitkv as C
    for name in ("auto", "combine-kernel", "cluster", "fused", "atomic"):
        assert C.PlanOptions(merge=name).merge == name
    with pytest.raises(ValueError, match="combine-kernel"):
        C.PlanOptions(merge="both")
    names = {n for n in dir(C.PlanTuning) if not n.startswith("_")}
    assert {"prefill_route", "persistent_prefill", "stream_k_prefill", "l2_prefetch", "l2_prefetch_keys",
            "even_placement"} <= names
    shape = dict(batch=1, num_q_heads=32, num_kv_heads=8, head_dim=128, max_kv_len=65536)
    atomic = splitkv.plan_decode(**shape, merge="atomic", atomic_reference_lse=3.0)
    assert atomic.atomic_combine and not atomic.cluster_combine
    assert not splitkv.plan_decode(**shape, l2_prefetch=False).l2_prefetch
    with pytest.raises(TypeError, match="unexpected"):
        splitkv.plan_decode(**shape, no_such_switch=True)


def test_the_python_format_names_come_from_the_cpp_table():
    from splitkv import _common as cm
    from splitkv import _splitkv as C
    for fmt, name, *_ in C.kv_format_table():
        assert cm.kv_format(name) == fmt
    assert "int4_kc" in cm.KV_FORMAT_NAMES and cm.kv_elements(C.KvFormat.int4_kc)[2] == "group"
    with pytest.raises(NotImplementedError):
        splitkv.quantize_kv(np.zeros((1, 64, 1, 64), np.float32), np.zeros((1, 64, 1, 64), np.float32), "int4_kc")
