"""The kept real traces (tests/data/traces/) replayed in the simulator as a
user runs it (`run_topology.py FABRIC --engine sim --trace DIR`): the
iteration given back on a fabric like the trace's own machine, the expected
order on two fabrics, more replicas, the rank placement, what if compared,
and bad traces and placements refused in one sentence."""

import json
from pathlib import Path

import pytest

from harness import REPO
from harness.commands import python, run

DATA = REPO / "tests" / "data" / "traces"
HOST = REPO / "topologies" / "sim" / "gloo-host.yaml"
WITHIN = 0.15                   # the bound on simulated / measured iteration


def replay(fabric, trace, *more, tmp_path):
    out = run(str(fabric), "--engine", "sim", "--json", "--results", str(tmp_path),
              "--trace", str(trace), *more, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def leaf_spine(tmp_path: Path, name: str, uplink_mbit: float, policy: str = "ecmp") -> Path:
    """2 leaves of 2 servers and one spine: every rank's ring neighbour on
    the other leaf crosses it, at `uplink_mbit` a leaf."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nfabric:\n  spines: 1\n  leaves: 2\n  servers_per_leaf: 2\n"
                    f"routing: {{policy: {policy}}}\n"
                    "links:\n  server_leaf: {rate_mbit: 1500, queue_packets: 100, delay_ms: 0.2}"
                    f"\n  leaf_spine: {{rate_mbit: {uplink_mbit}, queue_packets: 100, "
                    "delay_ms: 0.2}\n")
    return path


@pytest.mark.parametrize("n", [4, 8])
def test_a_kept_trace_replays_to_its_measured_iteration_on_its_machine(n, tmp_path):
    """gloo-host.yaml is the recording machine as a fabric (fitted on the
    operations' times, not the iteration's): the simulated iteration is
    within 15% of the trace's, and so is the trace's own reading through
    the program (its operations at their measured times)."""
    doc = replay(HOST, DATA / f"gloo-mlp-{n}", tmp_path=tmp_path)
    step = doc["step"]
    assert step["step"]["mode"] == "trace" and step["step"]["world"] == n
    assert step["step"]["ranks"] == n and step["wrong"] is None
    p = step["predicted"]["trace"]
    measured = p["trace"]["iteration_s"]
    low, high = p["trace"]["iteration_range_s"]
    assert low <= measured <= high
    assert abs(p["step_s"] / measured - 1) < WITHIN, (p["step_s"], measured)
    assert abs(p["trace"]["reproduced_s"] / measured - 1) < WITHIN
    # the DP AllReduce is what a rank waits for most, in the trace as here
    for exposed in (p["exposed_by_kind_s"], p["trace"]["exposed_by_kind_s"]):
        assert max(exposed, key=exposed.get) == "allreduce on default_pg"
    assert p["critical_path_s"]["compute"] > 0
    assert (tmp_path / doc["results"].split("/")[-1] / "step.png").is_file() \
        if "results" in doc else True


def test_an_oversubscribed_fabric_exposes_more_of_the_same_trace(tmp_path):
    """Non-blocking (each leaf's uplink carries both its servers) against
    4:1 (a quarter of that): the same 4-rank job is slower on the second,
    by its DP AllReduce, and compare names what moved."""
    runs = {}
    for name, uplink in (("nonblocking", 3000), ("oversubscribed", 750)):
        folder = tmp_path / name
        runs[name] = replay(leaf_spine(tmp_path, name, uplink), DATA / "gloo-mlp-4",
                            tmp_path=folder)
    fast, slow = (runs[k]["step"]["predicted"]["trace"] for k in ("nonblocking",
                                                                   "oversubscribed"))
    assert slow["step_s"] > fast["step_s"] * 1.1, (fast["step_s"], slow["step_s"])
    label = "allreduce on default_pg"
    assert slow["exposed_by_kind_s"][label] > fast["exposed_by_kind_s"][label]
    assert slow["step_s"] - fast["step_s"] == pytest.approx(
        sum(slow["exposed_by_kind_s"].values()) - sum(fast["exposed_by_kind_s"].values()),
        rel=0.25)
    folders = [next((tmp_path / k).iterdir()) for k in ("nonblocking", "oversubscribed")]
    out = python("-m", "report.compare", *map(str, folders), "--out", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    comp = json.loads(out.stdout)
    assert comp["steps"][1]["ratio"] > 1.1
    assert comp["moved"][0]["collective"] == "allreduce"
    assert comp["moved"][0]["seconds"][1] > comp["moved"][0]["seconds"][0]
    assert comp["differences"]["fabric"]["differ"]
    text = python("-m", "report.compare", *map(str, folders), "--out", str(tmp_path))
    assert "exposed communication by group and kind" in text.stdout
    assert "collectives that moved most" in text.stdout


def test_more_replicas_widen_the_data_parallel_group_and_say_so(tmp_path):
    doc = replay(HOST, DATA / "gloo-mlp-4", tmp_path=tmp_path)
    two = replay(HOST, f"{DATA / 'gloo-mlp-4'},replicas=2", tmp_path=tmp_path)
    assert two["step"]["step"]["replicas"] == 2 and two["step"]["step"]["ranks"] == 8
    one_ar = [c for c in doc["step"]["collectives"] if c["collective"] == "allreduce"]
    two_ar = [c for c in two["step"]["collectives"] if c["collective"] == "allreduce"]
    assert len(two_ar) == len(one_ar)           # one DP group over both replicas
    tp = [c for c in two["step"]["collectives"] if c["collective"] == "reducescatter"]
    assert len(tp) == 2 * len([c for c in doc["step"]["collectives"]
                               if c["collective"] == "reducescatter"])
    out = run(str(HOST), "--engine", "sim", "--results", str(tmp_path), "--trace",
              f"{DATA / 'gloo-mlp-4'},replicas=2")
    assert "# scaled: the recorded job repeated over 2 data-parallel replicas (8 ranks)" \
        in out.stdout


def test_ranks_are_placed_as_the_user_asks(tmp_path):
    fabric = REPO / "topologies" / "multi-gpu.yaml"
    two = replay(fabric, f"{DATA / 'gloo-mlp-4'},ranks_per_server=2", "--json",
                 tmp_path=tmp_path)
    servers = [r.split("g")[0] for r in two["step"]["ranks"]]
    assert len(set(servers)) == 2 and servers[0] == servers[1] != servers[2]
    rank_map = tmp_path / "map.yaml"
    first = json.loads(run(str(fabric), "--engine", "sim", "--json", "--results", str(tmp_path),
                           "--trace", str(DATA / "gloo-mlp-4")).stdout)["step"]["ranks"]
    boxes = sorted({r.split("g")[0] for r in first} | {r.split("g")[0] for r in two["step"]["ranks"]})
    rank_map.write_text("".join(f"{r}: {boxes[-1 - r % 2]}\n" for r in range(4)))
    mapped = replay(fabric, f"{DATA / 'gloo-mlp-4'},rank_map={rank_map}", tmp_path=tmp_path)
    assert [r.split("g")[0] for r in mapped["step"]["ranks"]] == [
        boxes[-1], boxes[-2], boxes[-1], boxes[-2]]


@pytest.mark.parametrize("trace, fabric, sentence", [
    ("gone", "topologies/sim/gloo-host.yaml", "gone"),
    ("hta-nccl-resnet", "topologies/sim/gloo-host.yaml", "rank 1 of 2 is missing"),
    ("gloo-mlp-8", "topologies/default.yaml", "the job's 8 ranks need 8 servers of 1 rank each, and leaf-spine-2x2 has 4"),
    ("gloo-mlp-4,ranks_per_server=4", "topologies/sim/gloo-host.yaml",
     "step.trace.ranks_per_server: 4 ranks a server, and gloo-host's servers have 1 GPUs"),
    ("gloo-mlp-4,replicas=0", "topologies/sim/gloo-host.yaml",
     "replicas: expected a whole number from 1 to 4096, got 0"),
    ("gloo-mlp-4,speed=2", "topologies/sim/gloo-host.yaml", "unknown key 'speed'"),
])
def test_a_trace_that_cannot_be_replayed_is_one_sentence(trace, fabric, sentence, tmp_path):
    path = trace if trace == "gone" else str(DATA / trace)
    out = run(fabric, "--engine", "sim", "--results", str(tmp_path), "--trace", path)
    assert out.returncode == 2, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and sentence in lines[0], out.stderr
    assert "Traceback" not in out.stderr and not list(tmp_path.iterdir())


def test_a_trace_and_a_made_up_layout_are_refused_together(tmp_path):
    out = run("topologies/sim/gloo-host.yaml", "--engine", "sim", "--results", str(tmp_path),
              "--trace", str(DATA / "gloo-mlp-4"), "--parallel", "tp=2,pp=1,dp=2")
    assert out.returncode == 2
    assert out.stderr == ("error: --trace: replays the job as it was recorded, and a hybrid "
                          "layout (step.parallel, --parallel) makes one up: give one of them\n")


def test_check_says_what_the_trace_run_would_take(tmp_path):
    """--check names the recorded job and prices its iterations at the NIC
    rate: the recorded compute and every operation's bus bytes."""
    out = run("--check", "--trace", str(DATA / "gloo-mlp-4"), "-n", "2", "-w", "0")
    assert out.returncode == 0, out.stderr
    assert (f"experiment: a recorded job's iteration, {DATA / 'gloo-mlp-4'}; engine agents, 2 "
            "iterations after 0 warm-up") in out.stdout
    one = json.loads(run("--check", "--json", "--trace", str(DATA / "gloo-mlp-4"), "-n", "1",
                         "-w", "0").stdout)["expected_seconds"]
    two = json.loads(run("--check", "--json", "--trace", str(DATA / "gloo-mlp-4"), "-n", "2",
                         "-w", "0").stdout)["expected_seconds"]
    # one iteration at 20 Mbit/s: 8.9 MB of DP AllReduce at 1.5 bus bytes a byte, about 5.4 s
    assert 5 < two - one < 7


def test_two_different_jobs_compare_without_matching_their_collectives(tmp_path):
    for n in (4, 8):
        replay(HOST, DATA / f"gloo-mlp-{n}", tmp_path=tmp_path / str(n))
    folders = [str(next((tmp_path / str(n)).iterdir())) for n in (4, 8)]
    comp = json.loads(python("-m", "report.compare", *folders, "--out", str(tmp_path),
                             "--json").stdout)
    assert comp["differences"]["workload"]["differ"] and comp["moved"] == []
    assert any(n.startswith("the runs ran different steps") for n in comp["notes"])
