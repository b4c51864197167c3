"""The model's limits and the emulation's: a fabric file at real rates and
real scale loads for the simulator, and is refused, with one sentence and
before anything is derived or built, where a network is to be built."""

import pytest

import topologies.fabric as fabric_module
from harness import TOPOLOGIES
from harness.commands import run
from topologies.fabric import FabricError, check_emulation, load_fabric, parse_fabric
from topologies.limits import EMULATED_ENDPOINTS, MAX_ENDPOINTS

NIC_400G = """
fabric: {kind: leaf-spine, spines: 2, leaves: 2, servers_per_leaf: 2, mtu: 9000}
links:
  server_leaf: {rate_mbit: 400000}
  leaf_spine:  {rate_mbit: 800000}
"""
GPUS_1024 = """
fabric: {kind: rail-optimized, units: 4, servers_per_unit: 32, spines: 8, uplinks_per_spine: 4}
server: {gpus: 8, nics: 8}
links:
  intra_node:  {rate_mbit: 7200000}
  server_leaf: {rate_mbit: 400000}
  leaf_spine:  {rate_mbit: 400000}
"""
ONE_LINE = "t.yaml: "


def _one_sentence(error: FabricError, keypath: str, *words: str) -> None:
    message = str(error)
    assert message.startswith(ONE_LINE) and error.keypath == keypath, message
    assert "\n" not in message and message.isprintable(), message
    for word in words:
        assert word in message, message


def test_a_400g_fabric_loads_for_the_simulator_and_is_refused_for_emulation():
    f = parse_fabric(NIC_400G, "t.yaml", emulate=False)
    assert {l.spec.rate_mbit for l in f.links} == {400_000, 800_000}
    with pytest.raises(FabricError) as info:
        parse_fabric(NIC_400G, "t.yaml")
    _one_sentence(info.value, "links.server_leaf.rate_mbit",
                  "expected a number from 0.01 to 100000 (Mbit/s) to emulate; --engine sim "
                  "takes up to 100,000,000, got 400000")
    with pytest.raises(FabricError, match="links.server_leaf.rate_mbit"):
        check_emulation(f)


def test_nvlink_at_900_gbytes_is_a_rate_the_model_takes():
    f = parse_fabric(GPUS_1024, "t.yaml", emulate=False)
    assert max(l.spec.rate_mbit for l in f.links) == 7_200_000
    too_fast = GPUS_1024.replace("7200000", "200000000")
    with pytest.raises(FabricError) as info:
        parse_fabric(too_fast, "t.yaml", emulate=False)
    _one_sentence(info.value, "links.intra_node.rate_mbit", "to 1e+08 (Mbit/s), got 200000000")


def test_over_512_gpus_load_for_the_simulator_and_are_refused_for_emulation(monkeypatch):
    f = parse_fabric(GPUS_1024, "t.yaml", emulate=False)
    assert len(f.endpoints) == 1024 > EMULATED_ENDPOINTS
    with pytest.raises(FabricError) as info:
        check_emulation(f)
    expected = ("too large for this host: 1,024 GPUs (128 servers x 8); at most 512 GPUs can be "
                f"emulated here; --engine sim takes up to {MAX_ENDPOINTS:,}")
    _one_sentence(info.value, "fabric", expected)

    def never(*_args, **_kwargs):
        raise AssertionError("derived a fabric its spec already shows is too large to emulate")
    monkeypatch.setattr(fabric_module, "fabric_from_spec", never)
    with pytest.raises(FabricError) as info:          # refused from the spec's counts
        parse_fabric(GPUS_1024, "t.yaml")
    _one_sentence(info.value, "fabric", expected)


def test_the_model_has_limits_of_its_own(monkeypatch):
    huge = """
fabric: {kind: single-switch, servers: 200001}
links: {server_leaf: {rate_mbit: 400000}}
"""
    with pytest.raises(FabricError) as info:
        parse_fabric(huge, "t.yaml", emulate=False)
    _one_sentence(info.value, "fabric.servers", "expected a whole number from 1 to 200000")


@pytest.mark.parametrize("name", ["superpod-512.yaml", "superpod-1024.yaml", "leaf-spine-16k.yaml"])
def test_the_scale_examples_load_for_the_simulator_only(name):
    path = TOPOLOGIES / "sim" / name
    f = load_fabric(path, emulate=False)
    assert len(f.endpoints) in (512, 1024, 16384)
    with pytest.raises(FabricError, match="--engine sim takes up to"):
        load_fabric(path)


def test_run_topology_refuses_to_emulate_before_building_and_simulates(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(GPUS_1024)
    refused = run("--check", str(path))
    assert refused.returncode == 2 and refused.stderr == (
        f"error: {path}: fabric: too large for this host: 1,024 GPUs (128 servers x 8); at most "
        "512 GPUs can be emulated here; --engine sim takes up to 200,000\n")
    # as a user would run it, not root: the refusal comes before the root check too
    assert run(str(path)).stderr == refused.stderr
    fast = tmp_path / "fast.yaml"
    fast.write_text(NIC_400G)
    assert "links.server_leaf.rate_mbit: expected a number from 0.01 to 100000 (Mbit/s) to " \
           "emulate" in run(str(fast), "--engine", "agents").stderr
    ok = run("--check", str(path), "--engine", "sim")
    assert ok.returncode == 0 and "= 1024 GPUs" in ok.stdout, ok.stderr


def test_links_past_what_this_host_forwards_are_warned_of_by_the_ceiling_or_the_estimate():
    """By hand: 4 servers' links of 9014-byte frames, each through 2 switches
    on average, put 18,000 frames a second through the switches at
    18,000 x 9014 x 8 / (4 x 2) = 162 Mbit/s each (the default fabric's
    --calibrate ceiling was 160)."""
    from topologies.fabric import emulation_warning
    from topologies.sanity import host_ceiling
    default = load_fabric(TOPOLOGIES / "default.yaml")
    assert host_ceiling(default) == pytest.approx(18000 * 9014 * 8 / (4 * 2) / 1e6)
    assert emulation_warning(default) is None                       # 20 Mbit/s
    fast = parse_fabric(NIC_400G.replace("400000", "1000").replace("800000", "1000"), "t.yaml")
    said = emulation_warning(fast)
    assert said.startswith("links.server_leaf.rate_mbit: 1000 Mbit/s is past about 160 Mbit/s")
    assert "about 80 Mbit/s" not in said
    assert emulation_warning(fast, calibrated=80).startswith(
        "links.server_leaf.rate_mbit: 1000 Mbit/s is past the 80 Mbit/s `--calibrate` found")
    assert emulation_warning(default, calibrated=10) is not None     # the record rules
    # what --check prints, and not for the simulator
    out = run("--check", str(TOPOLOGIES / "default.yaml"), "--results", "/nonexistent")
    assert "is past" not in out.stdout


def test_check_warns_of_links_past_the_host_and_the_simulator_is_not_warned(tmp_path):
    """What `scripts/lab check` (run_topology.py --check) prints for the
    default fabric at 1 Gbit/s: the warning; with --engine sim nothing is
    emulated, so no warning; a calibration record of this fabric rules."""
    fast = tmp_path / "fast.yaml"
    fast.write_text((TOPOLOGIES / "default.yaml").read_text().replace("rate_mbit: 20 ",
                                                                       "rate_mbit: 1000 "))
    empty = tmp_path / "results"
    out = run("--check", str(fast), "--results", str(empty))
    assert out.returncode == 0 and (
        "  warning: links.server_leaf.rate_mbit: 1000 Mbit/s is past about 160 Mbit/s"
        in out.stdout), out.stdout
    assert "is past" not in run("--check", str(fast), "--engine", "sim", "--results",
                                str(empty)).stdout
    calibrated = empty / "20261203-100000-leaf-spine-2x2-calibration"
    calibrated.mkdir(parents=True)
    (calibrated / "calibration.json").write_text('[{"rate_mbit": 80, "kept_up": true}]')
    out = run("--check", str(fast), "--results", str(empty))
    assert "1000 Mbit/s is past the 80 Mbit/s `--calibrate` found" in out.stdout, out.stdout


# Measured on this 2-core host, one AllReduce sweep at the fabric's own rate
# (`run_topology.py FABRIC -b 1M -e 4M`, 2026-12-05; docs/limits.md): the rate run,
# whether it kept up, and what the estimate is (Mbit/s). It warns past twice itself.
MEASURED = [
    # fabric          rate  kept up  estimate  what the run said
    ("leaf-spine-4x4",  25, True,    13.6),    # trustworthy
    ("leaf-spine-4x8",  10, False,   4.54),    # 1.44x behind the simulator, ovs-vswitchd 86%
    ("single-switch",   10, True,    27.3),    # trustworthy, busbw/link 0.92, meas/sim 1.04
    ("rail-optimized",   4, True,    2.70),    # links kept their rates, meas/sim 1.03 (sizes
                                               # below the shaper's resolution at 4 Mbit/s)
    ("multi-gpu",       10, False,   4.64),    # UNTRUSTWORTHY: a link at 89% of what was owed,
                                               # CPU 99%; NVLink at 100 Mbit/s is most frames
]
# Not judged right: fat-tree-k4 (estimate 5.45) was HOST-BOUND at its 5 (1.35x the
# simulator, CPU 98%, ovs-vswitchd 59%) and trustworthy at 2.5 (1.13x): a shortfall
# that frames through the switches do not explain, and the estimate is silent there.


@pytest.mark.parametrize("name, rate, kept_up, estimate", MEASURED)
def test_the_estimate_judges_the_measured_fabrics_warning_only_past_twice_itself(
        name, rate, kept_up, estimate):
    from topologies.fabric import emulation_warning
    from topologies.limits import HOST_ESTIMATE_SLACK
    from topologies.sanity import host_ceiling
    fabric = load_fabric(TOPOLOGIES / f"{name}.yaml")
    assert fabric.spec["links"]["server_leaf"]["rate_mbit"] == rate
    assert host_ceiling(fabric) == pytest.approx(estimate, rel=0.01)
    said = emulation_warning(fabric)
    if kept_up:
        assert rate <= HOST_ESTIMATE_SLACK * estimate and said is None
    else:
        assert said.startswith(f"links.server_leaf.rate_mbit: {rate:g} Mbit/s is past about "
                               f"{float(f'{estimate:.2g}'):g} Mbit/s"), said


def test_nvlink_in_memory_is_not_counted_and_the_hops_are_the_rings():
    """multi-gpu's GPUs send at their 100 Mbit/s NVLink; with scale_up: memory
    only its 4 NICs at 10 put frames through switches. A ring on one switch
    crosses 1; the default fabric's, leaf then leaf-spine-leaf, 2 on average."""
    from topologies.sanity import host_ceiling, ring_switch_hops
    multi = load_fabric(TOPOLOGIES / "multi-gpu.yaml")
    assert host_ceiling(multi, in_memory=True) > 10 * host_ceiling(multi)
    assert ring_switch_hops(load_fabric(TOPOLOGIES / "single-switch.yaml")) == 1
    assert ring_switch_hops(load_fabric(TOPOLOGIES / "default.yaml")) == 2
