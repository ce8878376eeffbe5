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
