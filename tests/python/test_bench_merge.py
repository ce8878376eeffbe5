"""bench/merge_results.py's peer rule (no GPU needed): on causal rows with Lq < Lk, cuDNN's dense
time replaces its explicit-mask time when faster, and the row says so."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import merge_results  # noqa: E402


def _case(lq, lk, causal):
    return {"B": 8, "Hq": 32, "Hkv": 8, "Lq": lq, "Lk": lk, "D": 128, "dtype": "bf16", "causal": causal}


def test_cudnn_takes_the_faster_of_its_masked_and_dense_times():
    peers = {"rows": [
        {"case": _case(4, 8192, True), "cudnn": {"us": 328.0, "mask": "explicit_additive", "dense_us": 75.0},
         "flash": {"us": 405.0, "mask": "causal_lower_right"}},
        {"case": _case(2, 8192, True), "cudnn": {"us": 60.0, "mask": "explicit_additive", "dense_us": 75.0},
         "flash": {"us": 90.0, "mask": "causal_lower_right"}}]}
    ours = {"ceiling_read_gbps": 4400.0, "rows": [
        {"case": dict(_case(4, 8192, True), page_size=0, splits=4), "us": 69.1, "gbps": 3891.0, "tflops": 62.0},
        {"case": dict(_case(2, 8192, True), page_size=0, splits=4), "us": 66.0, "gbps": 3900.0, "tflops": 60.0}]}
    rows, _, lines, note = merge_results.merge_decode(ours, peers)
    assert rows[0]["peers"]["cudnn_us"] == 75.0 and rows[0]["peers"]["cudnn_masked_us"] == 328.0
    assert "dense time" in lines[0]
    assert rows[1]["peers"]["cudnn_us"] == 60.0 and "cudnn_masked_us" not in rows[1]["peers"]
    assert "dense time" not in lines[1]
    assert "bottom-right mask" in note


def test_variants_rows_meet_their_baselines_and_flex():
    from variants_table import merge_variants

    def case(lk, window=-1, cap=0.0, sinks=False, **kw):
        c = dict(_case(1, lk, False), page_size=0, splits=1, kv_format="bf16")
        c.update(kw)
        if window >= 0 or cap or sinks:
            c.update(window_left=window, window_right=-1, softcap=cap, sinks=sinks)
        return c

    ours = {"ceiling_read_gbps": 4400.0, "rows": [
        {"case": case(4096), "us": 10.0, "gbps": 4000.0},
        {"case": case(131072, window=4096), "us": 10.4, "gbps": 3900.0},   # 1.04x: met
        {"case": case(32768), "us": 100.0, "gbps": 4000.0},
        {"case": case(32768, cap=50.0), "us": 103.0, "gbps": 3900.0},       # 1.03x: missed
        {"case": case(128), "us": 4.6, "gbps": 50.0},
        {"case": case(131072, window=128), "us": 5.3, "gbps": 45.0}]}       # ratio shown, no target
    peers = {"rows": [{"case": case(131072, window=4096), "flex": {"us": 20.8}},
                      {"case": case(32768, cap=50.0), "flex": {"us": None, "error": "no triton"}},
                      {"case": case(32768), "flex": {"us": 110.0}}]}
    rows, _, lines, note = merge_variants(ours, peers, prefill=False)
    assert rows[1]["baseline_us"] == 10.0 and "1.05x own W-key decode: met" in rows[1]["targets"]
    assert ">= 1.3x FlexAttention: met" in rows[1]["targets"]
    assert "without the cap: MISSED" in rows[3]["targets"] and rows[3]["flex_us"] is None
    assert "no triton" in note and len(lines) == 6
    # A plain row has no Flex target; a missed one whose bytes at the ceiling take longer than
    # Flex's time / 1.3 says what the ceiling allows (row 3: 103 us at 3900 of 4400 GB/s).
    rows, _, _, _ = merge_variants(ours, {"rows": peers["rows"][:1] + [
        {"case": case(32768, cap=50.0), "flex": {"us": 110.0}}]}, prefill=False)
    assert "FlexAttention (the read ceiling allows 1.20x): MISSED" in rows[3]["targets"]
    assert "ceiling allows" not in rows[1]["targets"]
    # A 128-key window is measured against a 128-key decode (launch-bound): the ratio, no verdict.
    assert rows[5]["baseline_us"] == 4.6 and "W-key" not in rows[5]["targets"]


def test_mixed_step_against_its_separate_calls():
    def row(variant, us, family="-", **rate):
        return dict({"case": {"mix": "a: step", "kv_format": "bf16", "variant": variant, "family": family},
                     "us": us}, **rate)

    # The call without the route only: its gain, no target (the target is the default call's).
    ours = {"rows": [row("mixed", 400.0, "prefill_sm90_gqa"), row("separate", 500.0),
                     row("part: decode rows", 150.0, "decode_mma", gbps=3500.0),
                     row("part: chunks", 345.0, "prefill_sm90", tflops=550.0)]}
    rows, header, lines, note = merge_results.merge_mixed(ours)
    assert rows[0]["x_separate"] == 1.25 and "targets" not in rows[0]
    assert len(lines) == 1 and "| 400.0 (prefill_sm90_gqa) | 1.25 |" in lines[0]
    assert "decode rows 150.0 µs (decode_mma, 3500 GB/s)" in lines[0]
    assert "chunks 345.0 µs (prefill_sm90, 550 TFLOP/s)" in lines[0]
    # The mixed route (the default call): its time and gain against the same separate calls, judged.
    ours["rows"].append(row("mixed route", 400.0, "prefill_sm90_gqa"))
    rows, header, lines, _ = merge_results.merge_mixed(ours)
    assert rows[-1]["x_separate"] == 1.25 and rows[-1]["targets"] == ">=1.15x met"
    assert "| 400.0 | 500.0 | 1.25 | >=1.15x met |" in lines[0] and "mixed route µs (default)" in header
    ours["rows"][-1]["us"] = 480.0
    rows, _, lines, _ = merge_results.merge_mixed(ours)
    assert rows[-1]["targets"] == ">=1.15x MISSED" and rows[-1]["cudnn_parts_us"] is None
    # cuDNN's parts: summed, each the faster of its masked and dense times, against the default call.
    peers = {"rows": [{"case": {"mix": "a: step", "part": "decode rows"}, "cudnn": {"us": 200.0}},
                      {"case": {"mix": "a: step", "part": "chunks"},
                       "cudnn": {"us": 900.0, "mask": "explicit_additive", "dense_us": 400.0}}]}
    rows, _, lines, _ = merge_results.merge_mixed(ours, peers)
    assert rows[-1]["cudnn_parts_us"] == 600.0 and "| 600.0 | 1.25 |" in lines[0]
    # The serial route: its time and gain beside the route's (no target of its own).
    assert "| n/a | n/a |" in lines[0] and "serial route µs" in header
    ours["rows"].append(row("mixed route, serial", 625.0, "prefill_sm90_gqa"))
    rows, header, lines, _ = merge_results.merge_mixed(ours)
    assert rows[-1]["x_separate"] == 0.8 and "targets" not in rows[-1]
    assert "| 625.0 | 0.80 |" in lines[0]
    assert lines[0].count("|") == header.splitlines()[0].count("|")
