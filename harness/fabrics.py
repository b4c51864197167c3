"""Fabrics the tests and benchmarks build: written inline as a user writes
them, or an example's YAML with its rates or placement changed."""

from topologies.fabric import parse_fabric

from harness import TOPOLOGIES

# The fabric and policies benchmarks run their 16 cross-leaf flows on it.
LEAF_SPINE_4X8 = TOPOLOGIES / "leaf-spine-4x8.yaml"

# An experiment section as a user writes it: 4 servers, a small AllGather.
EXPERIMENT_YAML = """
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
links:
  server_leaf: {rate_mbit: 20, queue_packets: 32}
  leaf_spine: {rate_mbit: 20, queue_packets: 32}
experiment: {collective: allgather, minbytes: 16K, maxbytes: 16K, iters: 3, warmup: 0,
             channels: 2, probe: [h2, h3]}
"""


def leaf_spine(spines, leaves, servers, parallel=1, policy="ecmp", rate=50, prefix="",
               switch_latency_us=None, **extra_links):
    """A leaf-spine fabric. `prefix` (a few letters) goes before every node's
    name, so that two labs of a module can exist at once: names are unique
    on a host. `switch_latency_us`: the switches' latency where not the
    network technology's (0 for a closed form of bandwidth alone)."""
    link = {"rate_mbit": rate, **extra_links}
    names = (f"names: {{spine: {prefix}spine, leaf: {prefix}leaf, server: {prefix}h}}\n"
             if prefix else "")
    text = f"""
name: {prefix}t{spines}x{leaves}
fabric: {{spines: {spines}, leaves: {leaves}, servers_per_leaf: {servers}, uplinks_per_spine: {parallel}}}
links:
  server_leaf: {link}
  leaf_spine: {link}
routing: {{policy: {policy}}}
{names}{"" if switch_latency_us is None else f"network: {{switch_latency_us: {switch_latency_us}}}"}
"""
    return parse_fabric(text, f"{prefix}t{spines}x{leaves}.yaml")


def crossing_fabric(spines, rate):
    """2 leaves of 4 servers under `spines` spines, every link at `rate` Mbit/s,
    9000-byte frames: with interleaved() ranks, every ring hop crosses the spines."""
    return parse_fabric(f"""
name: crossing-{spines}
fabric: {{spines: {spines}, leaves: 2, servers_per_leaf: 4, mtu: 9000}}
links:
  server_leaf: {{rate_mbit: {rate}, queue_packets: 32}}
  leaf_spine: {{rate_mbit: {rate}, queue_packets: 32}}
""", f"crossing-{spines}.yaml")


def with_rate(fabric, rate):
    """`fabric` with its server and spine links at `rate` Mbit/s."""
    def edit(spec):
        for kind in ("server_leaf", "leaf_spine"):
            spec["links"][kind]["rate_mbit"] = rate
    return fabric.edited(edit)


def interleaved(fabric):
    """Ranks alternating between leaf 1 and leaf 2: every ring hop crosses the spines."""
    a = [h.name for h in fabric.endpoints if h.leaf == "leaf1"]
    b = [h.name for h in fabric.endpoints if h.leaf == "leaf2"]
    return [x for pair in zip(a, b) for x in pair]


def flow_pairs(fabric):
    """Server k of leaf l (l = 1..4) to server k of leaf l+4: 16 flows."""
    half = len(fabric.leaves) // 2
    by_leaf = {leaf.index: [h.name for h in fabric.endpoints if h.leaf == leaf.name]
               for leaf in fabric.leaves}
    return [(a, b) for l in range(1, half + 1) for a, b in zip(by_leaf[l], by_leaf[l + half])]
