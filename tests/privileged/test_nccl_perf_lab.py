"""all_reduce_perf (ncclperf/) on a real lab: the default fabric at small
sizes with the rank agents, read with the reader written from nccl-tests'
printf formats (tests/nccl_output.py): every element checked, #wrong 0 in
both column groups, and the lab torn down as run_topology.py tears it down."""

import json

import pytest

from harness.commands import python
from harness.labs import our_state
from tests import nccl_output


def test_all_reduce_perf_on_the_default_fabric(tmp_path, clean_host):
    before = our_state()
    proc = python("-m", "ncclperf.all_reduce_perf", "topologies/default.yaml", "-b", "8K",
                  "-e", "32K", "-f", "4", "-n", "2", "-w", "1", "-c", "1", "-I", "1",
                  "--results", str(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = nccl_output.parse(proc.stdout)
    assert [r["size"] for r in out["rows"]] == [8192, 32768]
    for row in out["rows"]:
        assert (row["type"], row["redop"], row["root"]) == ("float", "sum", -1)
        for place in row["placements"]:               # out-of-place, then in-place
            assert place["wrong"] == 0 and place["time"] > 0 and place["busbw"] >= 0
    assert out["out_of_bounds"] == (0, "OK")
    assert any("in-place columns are the same operation run and measured again" in c
               for c in out["comments"])
    # at lab rates the GB/s columns read 0.00: the link's rate and busbw/link are # lines
    lines = proc.stdout.split("\n")
    assert any(line.startswith("# fabric-lab: NIC links 20 Mbit/s = 0.002500 GB/s")
               for line in lines)
    start = lines.index("# busbw/link: busbw over the NIC link's 20 Mbit/s (0.002500 GB/s)")
    doc = json.loads(next(tmp_path.iterdir()).joinpath("nccl-tests.json").read_text())
    for line, result in zip(lines[start + 2:start + 4], doc["results"]):
        size, oop, ip = line[1:].split()        # a small size may beat its link (a burst)
        assert int(size) == result["size"]
        assert float(oop) == pytest.approx(result["out_of_place"]["bus_bw"] / 0.0025, abs=0.006)
        assert float(ip) == pytest.approx(result["in_place"]["bus_bw"] / 0.0025, abs=0.006)
    # fabric-lab's own lines are comments on stderr too (2>&1 reads as nccl-tests')
    assert all(line.startswith("#") for line in proc.stderr.split("\n") if line), proc.stderr
    assert "# reach    12/12 server pairs reach each other" in proc.stderr
    assert "teardown" in proc.stderr and our_state() == before
