"""The plan's Clos designs simulated (``python -m planner --simulate``): ring
and hierarchical AllReduce at the plan's GPU count on the very switches the
plan counts, with the flow-level simulator's step shortcut
(sim/simulator.py: sim/phases.py on sim/clos.py), as nccl-tests prints them.

What it sees that the alpha-beta model cannot: flows that ECMP hashes onto the
same uplink (a step waits for its slowest transfer), leaves with fewer
uplinks than servers (oversubscription), and where the wiring sends the
inter-server step (server per leaf: through the spines; rail-optimized: GPU k
of a unit's servers on one leaf). Each row also gives the time on an ideal
fabric, the same NICs, NVLink and hops with unlimited switch-to-switch
capacity: `fabric x` is what the fabric itself costs.

Left out, as in the simulator: TCP or RoCE dynamics, queues beyond fair
sharing, the hosts' own time; headers (times are for payload at line rate).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from collectives.registry import FLAT_RING, SERVER_RINGS
from planner.designs import FORMS, clos_design, leaf_split
from planner.report import count_text, number_text, ratio_text
from networks import DEFAULT, Technology, network
from policies import policy
from sim.clos import ClosShape, clos_routing
from sim.phases import allreduce_phases
from sim.simulator import Simulator
from topologies.kinds import clos_wirings

IDEAL_BPS = 1e30                 # switch-to-switch capacity of the ideal fabric
# the Clos wirings, as the kinds of fabric wired so name them
WIRING_NAMES = {wiring: kind.clos_wiring_name for wiring, kind in clos_wirings().items()}


def clos_designs(result: dict) -> list:
    """(design name, radix, note) of the Clos designs to simulate: those that
    hold the plan's endpoints at its radix, else the 3-tier Clos at the
    smallest radix that holds them."""
    radix = result["inputs"]["radix"]
    designs = {d.name if hasattr(d, "name") else d["name"]: d for d in result["designs"]}
    clos = [name for name, form in FORMS.items() if form.tiers]
    fitting = [(name, radix, "") for name in clos if _field(designs[name], "fits")]
    if fitting:
        return fitting
    tallest = max(clos, key=lambda name: FORMS[name].tiers)
    needed = _field(designs[tallest], "needed_radix")
    return [(tallest, needed, f"radix {radix} holds neither Clos; simulated at radix "
                              f"{needed:,}, the smallest that holds a "
                              f"{FORMS[tallest].tiers}-tier one")]


def _field(design, key):
    return getattr(design, key) if hasattr(design, key) else design[key]


def shape_of(result: dict, design: str, radix: int, wiring: str, intra_gbps: float,
             tech: Technology = None) -> ClosShape:
    """The plan's Clos of this design and wiring, routed and timed as the
    network technology `tech` (default: networks.DEFAULT) does."""
    inp = result["inputs"]
    tech = tech or network(DEFAULT)
    down, up = leaf_split(radix, inp["oversubscription"])
    bps = inp["link_gbps"] * 1e9
    return ClosShape(servers=result["servers"], gpus=inp["gpus_per_server"],
                     nics=inp["nics_per_server"], down=down, up=up,
                     tiers=FORMS[design].tiers, radix=radix, wiring=wiring,
                     nic_bps=bps, fabric_bps=bps, intra_bps=intra_gbps * 1e9,
                     routing=clos_routing(policy(tech.routing)),
                     switch_s=tech.switch_latency_us * 1e-6, message_s=tech.message_us * 1e-6)


def simulate_plan(result: dict, sizes, hop_latency_s: float, intra_gbps: float,
                  seeds: int = 1, tech: Technology = None) -> dict:
    """Rows of predicted AllReduce times, per Clos design, wiring, algorithm
    and size; the median over `seeds` ECMP draws, with their range. Each
    hop pays the switch it enters and, out of a server, the transport's
    cost (`tech`), and `hop_latency_s` more."""
    tech = tech or network(DEFAULT)
    inp = result["inputs"]
    g = inp["gpus_per_server"]
    wirings = simulate_wirings(inp)
    algorithms = [FLAT_RING] + ([SERVER_RINGS] if g > 1 else [])
    rows, notes = [], []
    for design, radix, note in clos_designs(result):
        if note:
            notes.append(note)
        for wiring in wirings:
            shape = shape_of(result, design, radix, wiring, intra_gbps, tech)
            for algorithm in algorithms:
                for size in sizes:
                    rows.append(_row(shape, design, algorithm, size, hop_latency_s, seeds))
    n = result["servers"] * g
    if n != inp["gpus"]:
        notes.append(f"simulated as {n:,} GPUs: {result['servers']:,} whole servers of {g}")
    return {"gpus": n, "hop_latency_s": hop_latency_s, "intra_gbps": intra_gbps,
            "seeds": seeds, "rows": rows, "notes": notes, "network": tech.name,
            "network_title": tech.title, "switch_latency_us": tech.switch_latency_us,
            "message_us": tech.message_us, "routing": tech.routing}


def simulate_wirings(inp: dict) -> list:
    """The Clos wirings the plan's servers can have (rail wiring needs
    several NICs a server)."""
    return [wiring for wiring, kind in clos_wirings().items()
            if inp["nics_per_server"] > 1 or not kind.clos_several_nics]


def _row(shape, design, algorithm, size, hop_latency_s, seeds) -> dict:
    n = shape.n
    count = max(1, size // 4)
    phases = allreduce_phases(algorithm, n, count, shape.gpus)
    times = [Simulator.on_clos(shape, seed, hop_latency_s).phase_seconds(phases)
             for seed in range(seeds)]
    ideal = Simulator.on_clos(replace(shape, fabric_bps=IDEAL_BPS),
                              hop_latency_s=hop_latency_s).phase_seconds(phases)
    t = statistics.median(times)
    algbw = size / t / 1e9
    # rail wiring fills whole units: its leaves are the shape's, the tiers above to match
    endpoints = shape.leaves * shape.down if shape.wiring == "rail" else shape.servers * shape.nics
    switches = clos_design(design, endpoints, shape.radix, shape.nic_bps / 1e9,
                     shape.down / shape.up).switches_by_tier
    return {"design": design, "radix": shape.radix, "wiring": shape.wiring,
            "switches": switches, "algorithm": algorithm, "size_bytes": size,
            "seconds": t, "seconds_min": min(times), "seconds_max": max(times),
            "algbw_gbytes": algbw, "busbw_gbytes": algbw * 2 * (n - 1) / n,
            "ideal_seconds": ideal, "fabric_factor": t / ideal if ideal > 0 else math.nan}


def format_simulation(sim: dict, inp: dict) -> str:
    """The rows as nccl-tests prints a sweep, one block per design and wiring."""
    lines = [f"Simulated AllReduce on {count_text(sim['gpus'])} GPUs "
             f"({inp['gpus_per_server']} per server, {inp['nics_per_server']} NIC(s) of "
             f"{number_text(inp['link_gbps'])} Gbit/s, in-server {number_text(sim['intra_gbps'] / 8)} GB/s; "
             f"{sim['network_title']}: {number_text(sim['switch_latency_us'])} us a switch, "
             f"{number_text(sim['message_us'])} us a message, {number_text(sim['hop_latency_s'] * 1e6)} us "
             f"more per hop, routing {sim['routing']}; "
             f"oversubscription {ratio_text(inp['oversubscription'])})",
             "# flow-level: max-min fair sharing, "
             + {"hash": "ECMP hashed per switch and flow", "dmodk": "D-mod-K destination routing",
                "split": "every flow split evenly over all paths",
                "single": "a single path per destination leaf"}[clos_routing(policy(sim["routing"]))]
             + (f", median of {sim['seeds']} draws" if sim["seeds"] > 1 else ", seed 0")
             + "; payload at line rate, no headers"]
    lines += [f"# note: {note}" for note in sim["notes"]]
    block = None
    for r in sim["rows"]:
        if (r["design"], r["wiring"]) != block:
            block = (r["design"], r["wiring"])
            tiers = " + ".join(f"{count_text(v)} {k}" for k, v in r["switches"].items())
            lines += ["", f"# {r['design']}, {WIRING_NAMES[r['wiring']]} wiring, radix "
                          f"{r['radix']} ({tiers})",
                      f"#  {'algorithm':<13} {'size':>14} {'time(us)':>14} {'algbw(GB/s)':>12} "
                      f"{'busbw(GB/s)':>12} {'ideal(us)':>14} {'fabric x':>9}"
                      + (f"  {'ECMP draws (us)':>21}" if sim["seeds"] > 1 else "")]
        line = (f"   {r['algorithm']:<13} {r['size_bytes']:>14} {r['seconds'] * 1e6:14.1f} "
                f"{r['algbw_gbytes']:12.2f} {r['busbw_gbytes']:12.2f} "
                f"{r['ideal_seconds'] * 1e6:14.1f} {r['fabric_factor']:9.2f}")
        if sim["seeds"] > 1:
            line += f"  {r['seconds_min'] * 1e6:10.1f}-{r['seconds_max'] * 1e6:<10.1f}"
        lines.append(line)
    return "\n".join(lines)
