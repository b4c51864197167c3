"""What NCCL would run on the plan's Clos designs (``python -m planner
--simulate``): per design, wiring and size, the algorithm and protocol its
tuner picks, on how many channels, and the time, from the NCCL model
(sim/nccl/) on the plan's servers (`--server`, with the plan's GPUs, NICs
and link rate), each NIC's rate as the fabric delivers it to NCCL's rail
rings once ECMP has hashed them (sim/nccl/rails.py, the flow-level
simulator on the very switches the plan counts).

`fabric x` is the time against the same cluster on a fabric where nothing
collides: what the fabric itself costs NCCL.
"""

from __future__ import annotations

from dataclasses import replace

from planner.report import count_text, number_text, ratio_text
from networks import DEFAULT, REFERENCE, Technology, network
from networks.technology import REFERENCE_SWITCH_US, REFERENCE_SWITCHES
from planner.simulate import WIRING_NAMES, clos_designs, shape_of, simulate_wirings
from sim import nccl
from sim.simulator import Simulator
from topologies.hardware import SERVERS, Server
from sim.nccl import rails
from sim.nccl.minimum import nic_minimum_s
from sim.nccl.rails import connections_per_nic

DEFAULT_SERVER = "hgx-h100"


def server_of(inp: dict, name: str = DEFAULT_SERVER) -> Server:
    """The server sold as `name`, with the plan's GPUs, NICs and link rate."""
    sold = SERVERS[name]
    return replace(sold, gpus=inp["gpus_per_server"], nics=inp["nics_per_server"],
                   nic_gbps=inp["link_gbps"])


def nccl_plan(result: dict, sizes, seeds: int = 1, server: str = DEFAULT_SERVER,
              progress=None, tech: Technology = None, shares: dict = None) -> dict:
    """Rows of what NCCL runs, per Clos design, wiring and size, on the
    network technology `tech` (default networks.DEFAULT): its routing gives
    the NICs' share, its switches and transport each step's latency.
    `shares`: the shares worked out before, by (shape's routing and counts,
    connections), kept for the next technology of the same routing."""
    shares = {} if shares is None else shares
    tech = tech or network(DEFAULT)
    inp = result["inputs"]
    hw = server_of(inp, server)
    servers = result["servers"]
    conns = connections_per_nic(hw, servers) * tech.qps_per_connection
    rows, notes = [], []
    designs, wirings = list(clos_designs(result)), simulate_wirings(inp)
    for k, (design, radix, note) in enumerate(designs):
        if note:
            notes.append(note)
        for j, wiring in enumerate(wirings):
            if progress:
                progress(f"NCCL's rail rings on {design}, {WIRING_NAMES[wiring]} wiring")
            shape = shape_of(result, design, radix, wiring, inp.get("intra_gbps", 3600.0), tech)
            key = (replace(shape, switch_s=0.0, message_s=0.0), conns)
            if key not in shares:
                shares[key] = rails.share(shape, conns, seeds)
            share = shares[key]
            extra = Simulator.on_clos(shape).ring_path_us(shape.gpus) - \
                REFERENCE_SWITCHES * REFERENCE_SWITCH_US
            for size in sizes:
                rows.append(_row(hw, servers, (design, radix, wiring), size, share, tech, extra,
                                 result.get("in_server_gbps")))
            done = getattr(progress, "done", None)     # how far, for the time left
            if done:
                done((k * len(wirings) + j + 1) / (len(designs) * len(wirings)))
    return {"server": server, "gpus": servers * hw.gpus, "connections_per_nic": conns,
            "seeds": seeds, "rows": rows, "notes": notes, "network": tech.name,
            "network_title": tech.describe(), "routing": tech.routing}


def floor_s(where, size: float, in_server_gbps=None):
    """The least an AllReduce of `size` takes on `where`, and what bounds
    it: the bytes between servers at the NICs' rate (sim/nccl/minimum.py),
    or, where the plan has its fabric's own in-server rate (`in_server_gbps`,
    which NCCL's model, pricing the server as sold, does not see), each
    GPU's buffer sent at least once through its in-server link."""
    nic = nic_minimum_s(where, "allreduce", size)
    inside = (size * 8 / (in_server_gbps * 1e9)
              if in_server_gbps and where.topo.ppn > 1 else 0.0)
    return (inside, "in-server") if inside > nic else (nic, "nic")


def _row(hw, servers, where_in_plan, size, share, tech, extra,
         in_server_gbps=None) -> dict:
    """One size on one design and wiring; `fabric x` against the same
    cluster and technology where nothing collides; what each effect costs
    (`effects`). Never faster than the bytes can move (floor_s)."""
    design, radix, wiring = where_in_plan
    where = nccl.cluster(hw, servers, fabric_share=share, network=tech, net_extra_us=extra,
                         collnet=tech.sharp)
    choice = nccl.predict(where, "allreduce", size)
    e, n = choice.chosen, where.topo.ranks
    floor = floor_s(where, size, in_server_gbps)[0]
    seconds = max(e.time_us * 1e-6, floor)
    effects = effects_s(hw, servers, size, (tech, extra, share), in_server_gbps)
    ideal = seconds - effects["collisions_s"]
    algbw = size / seconds / 1e9 if seconds > 0 else 0.0
    return {"design": design, "radix": radix, "wiring": wiring, "size_bytes": size,
            "algorithm": "nccl", "ran": e.name, "channels": e.channels,
            "seconds": seconds, "latency_s": e.latency_us * 1e-6,
            "minimum_s": floor, "at_minimum": floor > e.time_us * 1e-6,
            "algbw_gbytes": algbw, "busbw_gbytes": algbw * 2 * (n - 1) / n,
            "fabric_share": share, "network_us": extra, "ideal_seconds": ideal,
            "fabric_factor": seconds / ideal if ideal > 0 else 1.0, "effects": effects}


def effects_s(hw, servers, size, on, in_server_gbps=None) -> dict:
    """What each effect costs an AllReduce of `size` on the network `on`
    (technology, what a step between servers adds, the NICs' share), added
    one at a time to NCCL's own figure on the reference technology's path
    (networks.REFERENCE, nothing colliding): its transport's bandwidth
    (efficiency, a CPU's ceiling), its latency (switches, links, message
    cost), its routing's collisions. Seconds, each at NCCL's choice then."""
    tech, extra, share = on

    def seconds(technology, extra_us, fabric_share):
        where = nccl.cluster(hw, servers, fabric_share=fabric_share, network=technology,
                             net_extra_us=extra_us, collnet=tech.sharp)
        return max(nccl.predict(where, "allreduce", size).chosen.time_us * 1e-6,
                   floor_s(where, size, in_server_gbps)[0])

    steps = [seconds(network(REFERENCE), 0.0, 1.0), seconds(tech, 0.0, 1.0),
             seconds(tech, extra, 1.0), seconds(tech, extra, share)]
    return {"nccl_s": steps[0], "transport_s": steps[1] - steps[0],
            "latency_s": steps[2] - steps[1], "collisions_s": steps[3] - steps[2]}


def unhindered(result: dict, size: int, server: str = DEFAULT_SERVER,
               tech: Technology = None) -> dict:
    """What NCCL would run for an AllReduce of `size` on the plan's servers
    where nothing collides: the plan's own line (--simulate adds the fabric),
    never faster than its bytes can move (floor_s)."""
    inp = result["inputs"]
    hw = server_of(inp, server)
    ppn = min(hw.gpus, inp["gpus"])
    tech = tech or network(DEFAULT)
    where = nccl.cluster(hw, result["servers"], ppn, network=tech, collnet=tech.sharp)
    e = nccl.predict(where, "allreduce", size).chosen
    floor, bound = floor_s(where, size, result.get("in_server_gbps"))
    return {"server": server, "network": tech.describe(), "ran": e.name,
            "seconds": max(e.time_us * 1e-6, floor), "model_seconds": e.time_us * 1e-6,
            "minimum_s": floor, "at_minimum": floor > e.time_us * 1e-6, "bound": bound,
            "in_server_gbps": result.get("in_server_gbps"), "size_bytes": size,
            "nics": hw.nics, "nic_gbps": hw.nic_gbps, "servers": result["servers"],
            "channels": e.channels}


def format_nccl(sim: dict, inp: dict) -> str:
    hw = server_of(inp, sim["server"])
    lines = [f"What NCCL would run: AllReduce on {count_text(sim['gpus'])} GPUs, "
             f"{hw.name} servers as sold ({hw.gpu.name}, {hw.gpus} GPUs, {hw.nics} NIC(s) of "
             f"{number_text(hw.nic_gbps)} Gbit/s); oversubscription "
             f"{ratio_text(inp['oversubscription'])}",
             f"# NCCL 2.30's tuner: algorithm, protocol and channels per size (sim/nccl/); "
             f"{sim['network_title']}, routing {sim['routing']}"
             + (f", {sim['connections_per_nic']} connection(s) per NIC hashed by ECMP"
                if sim["routing"] in ("ecmp", "flowlet") else "")
             + (f", median of {sim['seeds']} draws" if sim["seeds"] > 1 else ", seed 0")]
    lines += [f"# note: {note}" for note in sim["notes"]]
    block = None
    for r in sim["rows"]:
        if (r["design"], r["wiring"]) != block:
            block = (r["design"], r["wiring"])
            lines += ["", f"# {r['design']}, {WIRING_NAMES[r['wiring']]} wiring, radix "
                          f"{r['radix']}: the fabric delivers {r['fabric_share']:.0%} of a "
                          "NIC's rate to the rail rings; a step between servers "
                          f"{round(r['network_us'], 2) + 0.0:+.2f} us against NCCL's own figure",
                      f"#  {'size':>14} {'NCCL runs':<16} {'ch':>3} {'time(us)':>14} "
                      f"{'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'fabric x':>9}"]
        lines.append(f"   {r['size_bytes']:>14} {r['ran']:<16} {r['channels']:>3} "
                     f"{r['seconds'] * 1e6:14.1f} {r['algbw_gbytes']:12.2f} "
                     f"{r['busbw_gbytes']:12.2f} {r['fabric_factor']:9.2f}")
    return "\n".join(lines)





def networks_side_by_side(result: dict, sizes, techs, seeds: int = 1,
                          server: str = DEFAULT_SERVER, progress=None) -> dict:
    """The same plan under each technology of `techs`: NCCL's AllReduce per
    Clos design, wiring and size, and what each technology's routing and
    latency cost (the NICs' share, each step's latency against NCCL's own)."""
    shares: dict = {}
    plans = {t.name: nccl_plan(result, sizes, seeds, server, progress, t, shares) for t in techs}
    first = plans[techs[0].name]
    rows = []
    for i, r in enumerate(first["rows"]):
        rows.append({"design": r["design"], "radix": r["radix"], "wiring": r["wiring"],
                     "size_bytes": r["size_bytes"],
                     "by_network": {name: {k: p["rows"][i][k] for k in (
                         "ran", "seconds", "busbw_gbytes", "fabric_share", "network_us",
                         "effects")}
                         for name, p in plans.items()}})
    return {"server": server, "gpus": first["gpus"], "networks": [t.name for t in techs],
            "titles": {t.name: t.describe() for t in techs},
            "routings": {t.name: t.routing for t in techs}, "rows": rows,
            "congestion": {t.name: t.congestion_mode for t in techs},
            "notes": first["notes"], "plans": plans}


def format_steps_side_by_side(side: dict, steps: dict) -> str:
    """The training step and the run's days under each technology, per
    design and wiring (`steps`: technology -> planner/steptime.py's result)."""
    names = side["networks"]
    first = steps[names[0]]
    lines = ["", f"# the training step by technology: {first['params']:,} parameters, "
                 f"{first['buckets']:,} buckets, DDP overlap on; step (days)",
             "#  " + f"{'design, wiring':<26}" + "".join(
                 f" {side['titles'][n][:22]:>22}" for n in names)]
    for i, r in enumerate(first["rows"]):
        cells = "".join(f" {steps[n]['rows'][i]['step_s']:>12.3g} s ({steps[n]['rows'][i]['days']:.3g})"
                        .rjust(23) for n in names)
        lines.append("   " + f"{r['design'] + ', ' + WIRING_NAMES[r['wiring']]:<26}" + cells)
    return "\n".join(lines)


def format_side_by_side(side: dict) -> str:
    """One block per design and wiring: each size's time and busbw under each
    technology; what its routing leaves of a NIC and adds a step; and, at the
    block's largest size, what each effect costs."""
    names = side["networks"]
    lines = [f"Network technologies side by side: AllReduce as NCCL runs it on "
             f"{count_text(side['gpus'])} GPUs ({side['server']} servers; docs/networks.md)",
             "# per technology: time (us) and busbw (GB/s); share = what its routing leaves "
             "of a NIC's rate, step = what a step between servers costs beyond NCCL's own "
             "figure (its switches, links, transport); congestion and losses are not in "
             "this flow-level figure (what a full queue does is named below; the packet "
             "engine measures it: docs/packets.md)"]
    lines += [f"# note: {note}" for note in side["notes"]]
    rows = side["rows"]
    for i, r in enumerate(rows):
        block = (r["design"], r["wiring"])
        if i == 0 or block != (rows[i - 1]["design"], rows[i - 1]["wiring"]):
            lines += _block_head(side, r)
        lines.append("   " + f"{r['size_bytes']:>14}" + "".join(
            f" {r['by_network'][n]['seconds'] * 1e6:>14.1f} {r['by_network'][n]['busbw_gbytes']:>7.1f}"
            for n in names))
        if i + 1 == len(rows) or (rows[i + 1]["design"], rows[i + 1]["wiring"]) != block:
            lines += _effects_lines(side, r)
    return "\n".join(lines)


def _block_head(side: dict, r: dict) -> list:
    names, by = side["networks"], r["by_network"]
    return ["", f"# {r['design']}, {WIRING_NAMES[r['wiring']]} wiring, radix {r['radix']}",
            "#  " + f"{'':>14}" + "".join(f" {side['titles'][n][:22]:>22}" for n in names),
            "#  " + f"{'routing':>14}" + "".join(f" {side['routings'][n]:>22}" for n in names),
            "#  " + f"{'share, step':>14}" + "".join(
                f" {format(by[n]['fabric_share'], '.0%') + ', ' + format(round(by[n]['network_us'], 1) + 0.0, '+.1f') + ' us':>22}"
                for n in names),
            "#  " + f"{'size':>14}" + "".join(f" {'time(us)  busbw':>22}" for n in names)]


EFFECTS = (("nccl_s", "NCCL's own"), ("transport_s", "+ transport"), ("latency_s", "+ latency"),
           ("collisions_s", "+ collisions"))


def _effects_lines(side: dict, r: dict) -> list:
    """At one size: NCCL's own time on the reference path, then what each
    technology's transport, latency and collisions add (us), and what a
    full queue does on it."""
    names, by = side["networks"], r["by_network"]
    lines = [f"#  what each effect costs at {r['size_bytes']} bytes (us): NCCL's own figure on "
             "InfiniBand's reference path with nothing colliding, then what each adds"]
    for key, label in EFFECTS:
        lines.append("#  " + f"{label:>14}" + "".join(
            f" {by[n]['effects'][key] * 1e6:>{22 if key == 'nccl_s' else '+22'}.1f}"
            for n in names))
    lines.append("#  " + f"{'a full queue':>14}" + "".join(
        f" {side['congestion'][n][:22]:>22}" for n in names))
    return lines
