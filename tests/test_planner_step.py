"""The planner's training time with communication (--params): the step's
exposed communication from the simulated AllReduce of each bucket, the
days the run then takes against compute alone, and its flags refused in one
line each."""

import json

import pytest

import planner as P


def planned(capsys, *argv) -> dict:
    assert P.main(["--gpus", "512", "--params", "1e9", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_step_counts_its_exposed_communication(capsys):
    data = planned(capsys, "--layers", "16", "--tokens-per-gpu", "1024", "--bucket", "64M")
    t = data["training_step"]
    assert t["buckets"] == -(-2 * 10 ** 9 // (64 << 20)) and t["gradient_bytes"] == 2 * 10 ** 9
    assert t["compute_s"] == pytest.approx(6 * 1e9 * 1024 / 2e15)
    assert t["days_compute_only"] == pytest.approx(data["training"]["days_all_gpus"])
    sizes = {r["size_bytes"] for r in data["nccl"]["rows"]}
    assert sizes == {r["size_bytes"] for r in data["simulated"]["rows"]}
    assert sizes == {64 << 20, 2 * 10 ** 9 - (t["buckets"] - 1) * (64 << 20)}
    for r in t["rows"]:
        comm = r["comm_s"]
        assert r["step_s"] >= max(t["compute_s"], comm) - 1e-12
        assert r["step_s"] < t["compute_s"] + comm <= r["step_no_overlap_s"] + 1e-12
        assert r["exposed_s"] == pytest.approx(r["step_s"] - t["compute_s"])
        assert r["days"] == pytest.approx(t["steps"] * r["step_s"] / 86400)
        assert r["days"] > t["days_compute_only"]


def test_bigger_buckets_pay_less_latency(capsys):
    small = planned(capsys, "--bucket", "4M")["training_step"]["rows"][0]
    big = planned(capsys, "--bucket", "256M")["training_step"]["rows"][0]
    assert big["comm_s"] < small["comm_s"]


def test_the_report_prints_the_days_with_and_without_communication(capsys):
    assert P.main(["--gpus", "512", "--params", "1e9"]) == 0
    out = capsys.readouterr().out
    assert "Training step with communication: 1,000,000,000 parameters in 80 layers" in out
    assert "days on compute alone" in out and "no overlap" in out


@pytest.mark.parametrize("argv,message", [
    (["--layers", "8"], "--layers goes with --params"),
    (["--params", "1e9", "--sizes", "1M"], "--sizes: with --params the simulated sizes"),
    (["--params", "0"], "--params must be a number from 1 to"),
    (["--params", "10", "--layers", "20"], "--params: 10 parameters cannot fill 20 layers"),
    (["--params", "1e9", "--bucket", "12"], "--bucket must be from 1K to 1G"),
    (["--params", "1e9", "--bucket", "lots"], "--bucket"),
    (["--params", "1e12", "--bucket", "1K"], "--bucket: 1,024 bytes cut"),
])
def test_bad_step_flags_give_one_line_and_2(argv, message, capsys):
    assert P.main(["--gpus", "512", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {message}") and err.count("\n") == 1, err


def test_a_buckets_bandwidth_time_is_twice_its_bytes_per_rail_at_the_nics_rate(capsys):
    """A bucket's AllReduce sends about twice its bytes (2(m-1)/m, the
    ring's, taken at its limit 2): per rail, with 8 GPUs a server, a 64 MiB
    bucket is 8 MiB, so 16,777,216 bytes at 400 Gbit/s (5e10 B/s) take
    335.54432 us. By hand, not from the code."""
    data = planned(capsys, "--layers", "16", "--tokens-per-gpu", "1024", "--bucket", "64M")
    t = data["training_step"]
    assert t["rows"]
    ran = {(r["design"], r["wiring"]): r["ran"] for r in data["nccl"]["rows"]
           if r["size_bytes"] == 64 << 20}
    for r in t["rows"]:
        assert r["algorithm"] == ran[(r["design"], r["wiring"])]     # as NCCL would run it
        assert r["bucket_bandwidth_s"] == pytest.approx(335.54432e-6, rel=1e-12)


def test_the_latency_bound_line_prints_the_bandwidth_time_by_hand(capsys):
    """1 MiB buckets: 131,072 bytes a rail, twice that at 5e10 B/s is
    5.24288 us, printed as 0.00524 ms."""
    assert P.main(["--gpus", "512", "--params", "1e9", "--bucket", "1M"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if "latency-bound" in x]
    assert line and "a bucket's bytes need 0.00524 ms at the NIC's rate" in line[0], line


@pytest.mark.parametrize("part", ["simulated", "nccl"])
def test_simulated_busbw_is_algbw_times_2_n_minus_1_over_n(capsys, part):
    """nccl-tests' AllReduce bus bandwidth: algbw x 2(n-1)/n, n = 512 GPUs."""
    rows = planned(capsys, "--bucket", "64M")[part]["rows"]
    assert rows
    for r in rows:
        algbw = r["size_bytes"] / r["seconds"] / 1e9
        assert r["algbw_gbytes"] == pytest.approx(algbw, rel=1e-12)
        assert r["busbw_gbytes"] == pytest.approx(algbw * 2 * 511 / 512, rel=1e-12)
