"""Checks of a fabric as a whole: whether a fabric file may describe it,
whether this host can emulate it, whether its numbers can be meant, and the
names it derives.

Each field of a fabric file may be within its range and the whole still be
absurd: a link that takes seconds to send one frame, queues that would hold
gigabytes, a leaf with a hundred times more capacity towards its servers than
towards the spines. Such a fabric is refused with one sentence; one that is
merely unwise loads, with warnings (`fabric_warnings`, which the Fabric
exposes as ``Fabric.warnings``) that ``--check`` prints. The size of the
fabric is checked from the spec's counts, before anything is derived.

What this host can emulate (topologies/limits.py: endpoints, switches,
links, rates, queue memory) is a check of its own, `check_emulation`, made
only where a network is to be built: the simulator (`--engine sim`) takes
real rates at real scale, up to the model's limits.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from toolkit.errors import FabricError, shown
from topologies.kinds import link_class
from topologies.roles import role
from topologies.limits import (EMULATED_ENDPOINTS, EMULATED_GPUS, EMULATED_LINKS,
                               EMULATED_QUEUE_BYTES, EMULATED_RATE_MBIT, EMULATED_SWITCHES,
                               HOST_ESTIMATE_SLACK, HOST_SWITCH_FRAMES_PER_S, MAX_ENDPOINTS,
                               MAX_LINKS, MAX_RACK_GPUS, MAX_RATE_MBIT, MAX_SWITCHES)
from topologies.schema import IFNAME_MAX, MAX_PER_LEAF, MIN_RATE_MBIT, multi_gpu
from toolkit.yaml_loader import quantity
from policies import policy

ETHERNET_HEADER = 14        # bytes a frame carries beyond the MTU
MAX_FRAME_S = 1.0           # one frame taking longer than this on a link: not a network
WARN_FRAME_S = 0.05         # ... longer than this: TCP and spanning tree stall
WARN_QUEUE_S = 1.0          # one full queue holding longer than this: mostly delay
MAX_OVERSUBSCRIPTION = 64   # a leaf's server links over its uplinks
WARN_OVERSUBSCRIPTION = 8
WARN_LOSS_PERCENT = 10

Finding = Tuple[str, str]          # (key path, sentence)


# --- size, from the spec --------------------------------------------------------------

def check_size(spec: dict, counts: Dict[str, int], source: str, emulate: bool = True) -> None:
    """Refuse, from the counts the spec implies (servers, endpoints, switches,
    links) and before anything is derived or built, a fabric larger than a
    fabric file may describe, and with `emulate` one larger than this host
    can emulate."""
    _size(spec, counts, source, (MAX_ENDPOINTS, MAX_SWITCHES, MAX_LINKS), "")
    if emulate:
        _size(spec, counts, source, (EMULATED_ENDPOINTS, EMULATED_SWITCHES, EMULATED_LINKS),
              " here")


def _size(spec: dict, counts: Dict[str, int], source: str, most: Tuple[int, int, int],
          here: str) -> None:
    """`most`: endpoints, switches, links; `here`: the emulation's (its
    message says what the simulator takes instead), or the model's."""
    endpoints, servers = counts["endpoints"], counts["servers"]
    if here:
        too, can, then = ("too large for this host", "can be emulated here",
                          "; --engine sim takes up to {:,}")
    else:
        too, can, then = "too large", "can be described in a fabric file", ""
    if endpoints > most[0]:
        if multi_gpu(spec):
            what = (f"{endpoints:,} GPUs ({servers:,} servers x {spec['server']['gpus']}); "
                    f"at most {most[0]:,} GPUs")
        else:
            what = f"{servers:,} servers; at most {most[0]:,} servers"
        raise FabricError(source, "fabric", f"{too}: {what} {can}{then.format(MAX_ENDPOINTS)}")
    for thing, n, model in (("switches", most[1], MAX_SWITCHES), ("links", most[2], MAX_LINKS)):
        if counts[thing] > n:
            raise FabricError(source, "fabric", (
                f"{too}: {counts[thing]:,} {thing}; at most {n:,} {thing} {can}"
                f"{then.format(model)}"))


def check_emulation(fabric) -> None:
    """Refuse, before anything is built, what this host cannot emulate though
    the model takes it (the simulator does): more endpoints, switches or
    links than it can build, a rate beyond HTB's, queues beyond its memory.
    One sentence naming the key, as every refusal."""
    spec, source = fabric.spec, fabric.source
    counts = {"servers": len({h.server for h in fabric.endpoints}),
              "endpoints": len(fabric.endpoints), "switches": len(fabric.switches),
              "links": len(fabric.links)}
    check_size(spec, counts, source)
    if spec["server"]["gpus"] > EMULATED_GPUS:
        raise FabricError(source, "server.gpus", (
            f"expected at most {EMULATED_GPUS} GPUs per server to emulate (an NVSwitch node "
            f"with a port per GPU); --engine sim takes up to {MAX_RACK_GPUS}, got "
            f"{spec['server']['gpus']}"))
    for cls, link in spec["links"].items():
        if link is not None and link["rate_mbit"] > EMULATED_RATE_MBIT:
            raise FabricError(source, f"links.{cls}.rate_mbit", (
                f"expected a number from {MIN_RATE_MBIT:g} to {EMULATED_RATE_MBIT} (Mbit/s) to "
                f"emulate; --engine sim takes up to {MAX_RATE_MBIT:,}, got {link['rate_mbit']:g}"))
    refuse: List[Finding] = []
    classes = {k: v for k, v in spec["links"].items() if v is not None}
    _queue_memory(fabric, classes, spec["fabric"]["mtu"] + ETHERNET_HEADER, refuse)
    if refuse:
        raise FabricError(source, *refuse[0])


# --- the derived fabric -------------------------------------------------------------

def check_policy(fabric) -> None:
    """A routing the network technology runs; and stp turns every bridge
    into a learning switch: the switches inside a multi-GPU server would
    carry other servers' traffic."""
    tech = fabric.network
    if not tech.runs(fabric.policy):
        raise FabricError(fabric.source, "routing.policy", (
            f"{fabric.policy} is not a routing {tech.title} fabrics run: they run "
            f"{', '.join(tech.routings)} (default {tech.routing})"))
    if not policy(fabric.policy).controller and multi_gpu(fabric.spec):
        raise FabricError(fabric.source, "routing.policy", (
            f"{fabric.policy} is not available with servers of several GPUs or NICs: spanning tree would "
            "make their NVSwitch and PCIe switches transit bridges; use ecmp or single-path"))


def check_whole(fabric) -> None:
    """Checks that need the derived fabric: sizes, collisions, name lengths."""
    source = fabric.source
    if len(fabric.endpoints) > MAX_ENDPOINTS or len(fabric.switches) > MAX_SWITCHES:
        raise FabricError(source, "fabric", (
            f"too large: {len(fabric.endpoints):,} endpoints and {len(fabric.switches):,} "
            f"switches; at most {MAX_ENDPOINTS:,} endpoints and {MAX_SWITCHES:,} switches can "
            "be described in a fabric file"))
    per_leaf: Dict[str, int] = {}
    for h in fabric.endpoints:
        per_leaf[h.leaf] = per_leaf.get(h.leaf, 0) + 1
    crowded = [leaf for leaf, n in per_leaf.items() if n > MAX_PER_LEAF]
    if crowded:
        raise FabricError(source, "fabric", (
            f"too many endpoints behind {crowded[0]} ({per_leaf[crowded[0]]}); at most "
            f"{MAX_PER_LEAF} can be addressed behind one leaf"))
    names = [s.name for s in fabric.switches] + [h.name for h in fabric.endpoints]
    if len(set(names)) != len(names):
        seen = set()
        dup = next(n for n in names if n in seen or seen.add(n))
        raise FabricError(source, "names", (
            f"expected prefixes that give every node its own name, but two nodes "
            f"would both be called {shown(dup)}"))
    _check_interface_names(fabric)


def _check_interface_names(fabric) -> None:
    role_of = {s.name: ("server" if role(s.role).in_server else s.role)
               for s in fabric.switches}
    role_of.update((h.name, "server") for h in fabric.endpoints)
    longest = {}
    for link in fabric.links:
        for node, intf in ((link.a, link.a_intf), (link.b, link.b_intf)):
            key = role_of[node]
            if len(intf) >= len(longest.get(key, "")):
                longest[key] = intf
    for key, intf in sorted(longest.items()):
        if len(intf) > IFNAME_MAX:
            raise FabricError(fabric.source, f"names.{key}", (
                f"expected a shorter prefix: it makes interface names like {shown(intf)} "
                f"({len(intf)} characters) and Linux allows {IFNAME_MAX}"))


# --- what the numbers mean ----------------------------------------------------------

def check_physics(fabric) -> None:
    """Refuse the first number that cannot be meant (see `findings`)."""
    refusals, _ = findings(fabric)
    if refusals:
        raise FabricError(fabric.source, *refusals[0])


def fabric_warnings(fabric) -> Tuple[str, ...]:
    """What is merely unwise in the fabric: one 'key.path: sentence' each."""
    return tuple(f"{path}: {sentence}" for path, sentence in findings(fabric)[1])


def host_ceiling(fabric, in_memory: bool = False) -> float:
    """About the highest server-link rate (Mbit/s) this host can emulate the
    fabric at: HOST_SWITCH_FRAMES_PER_S over the frames a second its switches
    forward with every GPU sending at its fastest link's rate (an NVLink
    inside a server is frames too; with `in_memory`, the experiment's
    `scale_up: memory`, it carries nothing and the servers' NICs are
    counted instead), each through `ring_switch_hops` switches, as a share of
    the server links' rate (every class scales with it)."""
    frame = fabric.mtu + ETHERNET_HEADER
    if in_memory:
        sending = sum(l.spec.rate_mbit for l in fabric.links
                      if link_class(l.kind) == "server_leaf")
    else:
        fastest: Dict[str, float] = {}
        for end, link in ((end, l) for l in fabric.links for end in (l.a, l.b)):
            fastest[end] = max(fastest.get(end, 0.0), link.spec.rate_mbit)
        sending = sum(fastest.get(h.name, 0.0) for h in fabric.endpoints)
    frames = sending * 1e6 / (8 * frame) * ring_switch_hops(fabric)
    rate = fabric.nic_rate_mbit
    return rate * HOST_SWITCH_FRAMES_PER_S / frames if frames else rate


def ring_switch_hops(fabric) -> float:
    """The switches a frame crosses on average from each endpoint to the next
    in the fabric's order (a ring AllReduce's, and `--calibrate`'s), the
    fewest each; 0 for a single endpoint."""
    order = [h.name for h in fabric.endpoints]
    if len(order) < 2:
        return 0.0
    switches = {s.name for s in fabric.switches}
    near: Dict[str, List[str]] = {}
    for link in fabric.links:
        near.setdefault(link.a, []).append(link.b)
        near.setdefault(link.b, []).append(link.a)
    crossed = 0
    for src, dst in zip(order, order[1:] + order[:1]):
        seen, level, hops = {src}, [src], 0
        while level and dst not in seen:
            hops += 1
            nxt = []
            for node in level:
                for peer in near.get(node, ()):
                    if peer not in seen:
                        seen.add(peer)
                        if peer in switches:
                            nxt.append(peer)
            level = nxt
        crossed += hops - 1 if dst in seen else 0
    return crossed / len(order)


def emulation_warning(fabric, calibrated: Optional[float] = None,
                      in_memory: bool = False) -> Optional[str]:
    """'links.server_leaf.rate_mbit: sentence' when the server links' rate
    is past what this host can emulate for this fabric: the ceiling
    `--calibrate` found for it (`calibrated`), else past twice
    `host_ceiling`'s estimate (HOST_ESTIMATE_SLACK); None within it."""
    rate = fabric.nic_rate_mbit
    if calibrated:
        if rate <= calibrated:
            return None
        why = f"the {calibrated:g} Mbit/s `--calibrate` found this host keeps up with"
    else:
        ceiling = host_ceiling(fabric, in_memory)
        if rate <= HOST_ESTIMATE_SLACK * ceiling:
            return None
        why = (f"about {float(f'{ceiling:.2g}'):g} Mbit/s, what this host can emulate for this "
               f"fabric (about {HOST_SWITCH_FRAMES_PER_S:,} frames a second through its switches, "
               f"an estimate warned of past {HOST_ESTIMATE_SLACK}x; `--calibrate` measures it)")
    return (f"links.server_leaf.rate_mbit: {rate:g} Mbit/s is past {why}: a run may be "
            "HOST-BOUND or UNTRUSTWORTHY; lower the rates (every class in proportion)")


def findings(fabric) -> Tuple[List[Finding], List[Finding]]:
    """(refusals, warnings): each a key path and a sentence."""
    refuse: List[Finding] = []
    warn: List[Finding] = []
    classes = {k: v for k, v in fabric.spec["links"].items() if v is not None}
    frame = fabric.mtu + ETHERNET_HEADER
    for cls, link in classes.items():
        _frame_time(cls, link, frame, fabric.mtu, refuse, warn)
        _queue_time(cls, link, frame, warn)
        if link["loss_percent"] > WARN_LOSS_PERCENT:
            warn.append((f"links.{cls}.loss_percent", (
                f"{link['loss_percent']:g}% loss; above {WARN_LOSS_PERCENT}% TCP spends most "
                "of its time retransmitting")))
    _oversubscription(fabric, refuse, warn)
    intra, nic = classes.get("intra_node"), classes["server_leaf"]
    if intra and intra["rate_mbit"] < nic["rate_mbit"]:
        warn.append(("links.intra_node.rate_mbit", (
            f"NVLink-class links at {intra['rate_mbit']:g} Mbit/s are slower than the NICs "
            f"({nic['rate_mbit']:g} Mbit/s); real NVLink is many times faster")))
    return refuse, warn


def _frame_time(cls: str, link: dict, frame: int, mtu: int, refuse, warn) -> None:
    rate = link["rate_mbit"]
    seconds = frame * 8 / (rate * 1e6)
    if seconds > MAX_FRAME_S:
        least = frame * 8 / (MAX_FRAME_S * 1e6)
        refuse.append((f"links.{cls}.rate_mbit", (
            f"{rate:g} Mbit/s takes {seconds:.2g} s to send one {frame}-byte frame (MTU "
            f"{mtu} + {ETHERNET_HEADER}); expected at most {MAX_FRAME_S:g} s: a rate of at "
            f"least {least:.2g} Mbit/s or a smaller fabric.mtu")))
    elif seconds > WARN_FRAME_S:
        warn.append((f"links.{cls}.rate_mbit", (
            f"one {frame}-byte frame takes {seconds * 1e3:.0f} ms at {rate:g} Mbit/s; above "
            f"{WARN_FRAME_S * 1e3:.0f} ms a frame every hop adds that delay and TCP may "
            "time out (raise the rate or lower fabric.mtu)")))


def _queue_time(cls: str, link: dict, frame: int, warn) -> None:
    seconds = link["queue_packets"] * frame * 8 / (link["rate_mbit"] * 1e6)
    if seconds > WARN_QUEUE_S:
        warn.append((f"links.{cls}.queue_packets", (
            f"a full queue of {link['queue_packets']} frames takes {seconds:.3g} s to drain "
            f"at {link['rate_mbit']:g} Mbit/s; above {WARN_QUEUE_S:g} s it is mostly delay")))


def _queue_memory(fabric, classes: dict, frame: int, refuse) -> None:
    """Every interface's queue full of full frames, both ends of every link
    (the kernel's memory when emulated; the simulator keeps no queues)."""
    per_class: Dict[str, int] = {}
    for link in fabric.links:
        cls = link_class(link.kind)
        cls = cls if cls in classes else "leaf_spine"          # spine_core defaults to it
        per_class[cls] = per_class.get(cls, 0) + 1
    held = {cls: n * 2 * classes[cls]["queue_packets"] * frame for cls, n in per_class.items()}
    total = sum(held.values())
    if total > EMULATED_QUEUE_BYTES:
        worst = max(held, key=held.get)
        refuse.append((f"links.{worst}.queue_packets", (
            f"queues would hold up to {quantity(total)} ({per_class[worst]:,} {worst} links x 2 "
            f"x {classes[worst]['queue_packets']:,} frames of {frame} B"
            f"{' and more' if len(held) > 1 else ''}); expected at most "
            f"{EMULATED_QUEUE_BYTES >> 30} GiB in all")))


def _oversubscription(fabric, refuse, warn) -> None:
    ratio = fabric.oversubscription()
    shown_ratio = f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.3g}"
    what = f"oversubscription {shown_ratio}:1 (a leaf's server links over its uplinks)"
    if ratio > MAX_OVERSUBSCRIPTION:
        refuse.append(("fabric", f"{what}; expected at most {MAX_OVERSUBSCRIPTION}:1: more "
                                 "spines or faster leaf_spine links"))
    elif ratio > WARN_OVERSUBSCRIPTION:
        warn.append(("fabric", f"{what}; above {WARN_OVERSUBSCRIPTION}:1 the uplinks bound "
                               "every collective"))
