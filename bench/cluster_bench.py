#!/usr/bin/env python3
"""One fabric on this host, on one test-bed machine and on two (cluster
mode), side by side in one run; and, on paper from the figures, what N real
machines would carry.

    sudo scripts/lab bench cluster [--fabric F] [--sizes 1M,4M] [--json out.json]
    sudo scripts/lab bench cluster --tls [--rounds 3]    # only TLS against plain TCP

For each layout: seconds to start the controller, build, be programmed and
tear down (each machine's build and teardown too); a ring AllReduce per size
(time, measured/simulated, the verdict, #wrong); the bytes the links between
machines carried (the tunnels' inner frames, as the monitor counts them) and
what the wire under them sent (outer frames, the VXLAN overhead and the
lab's own ssh and OpenFlow traffic included); CPU seconds per machine (its
processes: switch daemon, agents, Mininet shells) and of the controller here.

The two machines run twice: with OpenFlow over TLS (a cluster run's
default) and in plain TCP (cluster.tls: false). --tls runs only those two,
alternately, --rounds times each, and compares their medians: the time of
each size, the time to be ready, the controller's CPU; TLS is "as fast" when
every ratio of collective times is within 5%.

The test-bed machines share this host's two cores: two machines here show
what cluster mode costs, never more capacity. The paper part divides the
bytes the switches forwarded by the CPU seconds the machines spent on it,
and scales that to machines with more cores.

Brings up a 2-machine test bed if none is up, and takes it down after.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, TOPOLOGIES
from harness.commandline import command_line
from harness.traffic import process_cpu_seconds
from devtools import testbed
from lab.cluster.cluster import ClusterLab
from lab.cluster.tunnels import VXLAN_OVERHEAD
from lab.lifecycle import Lab
from topologies.fabric import load_fabric
from toolkit.validators import parse_size
from topologies.placement import cluster_of, place
from runs.experiment import Experiment
from runs.measured import run_experiment

MACHINES = ("10.77.0.11", "10.77.0.12")
BUSY = 0.8                   # of a machine's cores the paper part lets the lab use
TWO, PLAIN = "2 test-bed machines", "2 test-bed machines, plain TCP"
LAYOUTS = ("this host", "1 test-bed machine", TWO, PLAIN)
AS_FAST = 0.05               # TLS against plain TCP: each size's time within this


def size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def make_lab(layout: str, fabric, workdir: Path):
    if layout == "this host":
        return Lab(fabric, workdir)
    hosts = MACHINES[:1] if layout == "1 test-bed machine" else MACHINES
    cluster = dataclasses.replace(cluster_of(fabric, list(hosts)), tls=layout != PLAIN)
    return ClusterLab(fabric, workdir, cluster, place(fabric, len(hosts)))


def usage(lab) -> list:
    return lab.usage() if isinstance(lab, ClusterLab) else []


def one_layout(layout: str, fabric, sizes, workdir: Path) -> dict:
    exp = Experiment(algorithm="ring", minbytes=sizes[0], maxbytes=sizes[-1], stepfactor=4, iters=3, warmup=1,
                     idle_seconds=1.0)
    lab = make_lab(layout, fabric, workdir)
    with lab:
        before, ctrl0 = usage(lab), process_cpu_seconds(lab.controller.pid)
        result = run_experiment(lab, exp, workdir / "run")
        after, ctrl1 = usage(lab), process_cpu_seconds(lab.controller.pid)
    runs = result.runs
    row = {"timings": {k: round(v, 2) for k, v in lab.timings.items()},
           "sizes": [{"size": r["size_bytes"], "time_s": round(r["time_s"], 3),
                      "meas_sim": r["measured_over_simulated"] and round(
                          r["measured_over_simulated"], 3),
                      "cpu_pct": round(r["cpu_busy_pct"]), "ovs_pct": round(r["ovs_core_pct"]),
                      "wrong": r["wrong"]} for r in runs],
           "trustworthy": result.fidelity["trustworthy"],
           "host_bound": bool(result.fidelity.get("host_bound")),
           "controller_cpu_s": round(ctrl1 - ctrl0, 2)}
    busy = sum(r["time_s"] * r["iterations"] for r in runs)
    row["forwarded_mbit_s"] = round(sum(l["tx_bytes"] for r in runs for l in r["links"].values())
                                    * 8 / 1e6 / busy, 1)
    if isinstance(lab, ClusterLab):
        row["machines"] = [{"host": m.host, "build_s": m.built["build_s"],
                            "teardown_s": m.built.get("teardown_s"),
                            **{k: round(b[k] - a[k], 2) for k in (
                                "cpu_s", "ovs_cpu_s", "wire_tx_bytes", "tunnel_tx_bytes",
                                "tunnel_tx_packets", "switch_tx_bytes")}}
                           for m, a, b in zip(lab.machines, before, after)]
        row["tunnels"] = len(lab.tunnels)
    return row


def show(layout: str, row: dict) -> None:
    t = row["timings"]
    print(f"\n{layout}: controller {t['controller_s']:.1f} s, build {t['build_s']:.1f} s, "
          f"programmed {t['programmed_s']:.1f} s, ready {t['start_s']:.1f} s, "
          f"teardown {t['teardown_s']:.1f} s; verdict "
          f"{'trustworthy' if row['trustworthy'] else 'NOT trustworthy'}"
          f"{', HOST-BOUND' if row['host_bound'] else ''}")
    for s in row["sizes"]:
        print(f"   ring AllReduce {size_text(s['size']):>7}: {s['time_s']:7.3f} s  meas/sim "
              f"{s['meas_sim']}  CPU {s['cpu_pct']}%  busiest ovs-vswitchd {s['ovs_pct']}% "
              f"of a core  #wrong {s['wrong']}")
    for i, m in enumerate(row.get("machines", [])):
        print(f"   machine {i + 1} {m['host']}: build {m['build_s']:.1f} s, teardown "
              f"{m['teardown_s']} s, CPU {m['cpu_s']:.1f} s, its switches sent "
              f"{m['switch_tx_bytes'] / 1e6:.1f} MB, into tunnels {m['tunnel_tx_bytes'] / 1e6:.2f}"
              f" MB, on the wire {m['wire_tx_bytes'] / 1e6:.2f} MB")
    if row.get("tunnels"):
        inner = sum(m["tunnel_tx_bytes"] for m in row["machines"])
        vxlan = VXLAN_OVERHEAD * sum(m["tunnel_tx_packets"] for m in row["machines"])
        wire = sum(m["wire_tx_bytes"] for m in row["machines"])
        print(f"   {row['tunnels']} tunnels carried {inner / 1e6:.2f} MB of fabric frames; the "
              f"wire under them sent {wire / 1e6:.2f} MB: VXLAN's headers "
              f"{vxlan / 1e6:.2f} MB ({vxlan / max(inner, 1):.2%}), the lab's own traffic "
              f"(ssh to the head: agents, monitor, probes) {(wire - inner - vxlan) / 1e6:.2f} MB")
    print(f"   controller CPU {row['controller_cpu_s']:.2f} s")


def tls_against_tcp(rounds: dict) -> dict:
    """Medians over the rounds of each layout (TWO: TLS, PLAIN: plain TCP),
    and TLS over TCP for each size's time, readiness and controller CPU."""
    def median(layout, get):
        return statistics.median(get(row) for row in rounds[layout])
    sizes = [s["size"] for s in rounds[TWO][0]["sizes"]]
    out = {"rounds": len(rounds[TWO]), "sizes": {}}
    for i, size in enumerate(sizes):
        on, off = (median(l, lambda r: r["sizes"][i]["time_s"]) for l in (TWO, PLAIN))
        out["sizes"][size] = {"tls_s": on, "tcp_s": off, "ratio": round(on / off, 4)}
    for key, get in (("ready_s", lambda r: r["timings"]["start_s"]),
                     ("controller_cpu_s", lambda r: r["controller_cpu_s"])):
        on, off = median(TWO, get), median(PLAIN, get)
        out[key] = {"tls": on, "tcp": off}
    out["as_fast"] = all(abs(v["ratio"] - 1) <= AS_FAST for v in out["sizes"].values())
    print(f"\nTLS against plain TCP, 2 test-bed machines, median of {out['rounds']} rounds "
          "each (taken in turns):")
    for size, v in out["sizes"].items():
        print(f"   ring AllReduce {size_text(size):>7}: TLS {v['tls_s']:.3f} s, TCP "
              f"{v['tcp_s']:.3f} s, TLS/TCP {v['ratio']:.3f}")
    print(f"   ready: TLS {out['ready_s']['tls']:.1f} s, TCP {out['ready_s']['tcp']:.1f} s; "
          f"controller CPU: TLS {out['controller_cpu_s']['tls']:.2f} s, TCP "
          f"{out['controller_cpu_s']['tcp']:.2f} s")
    print(f"   TLS {'is' if out['as_fast'] else 'is NOT'} as fast as plain TCP (every size "
          f"within {AS_FAST:.0%})")
    return out


def demand_mbit(fabric, exp) -> float:
    """Mbit/s the switches of `fabric` forward during `exp`, simulated
    (sim): bytes every switch port sends over the collective's time.
    NVLink-class links count only where the experiment puts them on the wire
    (scale_up packets)."""
    from runs.simulated import simulate_experiment
    switches = {s.name for s in fabric.switches}
    ports = {intf for l in fabric.links if l.kind != "intra_node" or exp.scale_up == "packets"
             for node, intf in ((l.a, l.a_intf), (l.b, l.b_intf)) if node in switches}
    run = simulate_experiment(fabric, exp).runs[-1]
    sent = sum(v["tx_bytes"] for intf, v in run["links"].items() if intf in ports)
    return sent * 8 / 1e6 / run["time_s"]


def on_paper(row: dict, measured_mbit: float) -> dict:
    """What a machine forwards per CPU second, so what it can carry; and,
    from the simulator, what each example fabric's collective asks of each
    of its machines per Mbit/s of NIC rate: the highest NIC rate N machines
    of each kind carry."""
    ms = row["machines"]
    sent = sum(m["switch_tx_bytes"] for m in ms) * 8 / 1e6
    per_ovs = sent / max(sum(m["ovs_cpu_s"] for m in ms), 1e-9)
    per_cpu = sent / max(sum(m["cpu_s"] for m in ms), 1e-9)
    kinds = {"userspace": per_ovs * BUSY, "16 cores": per_cpu * 16 * BUSY,
             "64 cores": per_cpu * 64 * BUSY}
    out = {"mbit_per_ovs_cpu_s": round(per_ovs), "mbit_per_cpu_s": round(per_cpu),
           "capacity_mbit": {k: round(v) for k, v in kinds.items()}, "fabrics": {}}
    print(f"\non paper: per CPU second the machines forwarded {per_ovs:.0f} Mbit of link traffic "
          f"in ovs-vswitchd and {per_cpu:.0f} Mbit counting all their processes (agents, "
          f"shells), every switch port counted (the benchmark's collective forwarded "
          f"{measured_mbit:.0f} Mbit/s). At {BUSY:.0%} busy a machine forwards: "
          + ", ".join(f"{k} {v:,.0f} Mbit/s" for k, v in kinds.items()) + ".")
    print("   userspace: one ovs-vswitchd thread forwards, as here; 16 and 64 cores: every core "
          "forwards, as the kernel datapath would, at the CPU cost measured here, agents "
          "included.\n   The simulator's forwarding per machine per 1 Mbit/s of NIC rate, and "
          "the highest NIC rate the machines carry:")
    print(f"   {'fabric, collective':<52} {'machines':>8} {'per Mbit':>8} "
          + " ".join(f"{k:>10}" for k in kinds))
    for name, fabric, exp, machines in PAPER_FABRICS():
        nic = fabric.nic_rate_mbit
        per_nic = demand_mbit(fabric, exp) / nic / machines
        rates = {k: v / per_nic for k, v in kinds.items()}
        out["fabrics"][name] = {"machines": machines, "mbit_per_machine_per_nic_mbit":
                                round(per_nic, 1), "highest_nic_mbit": {
                                    k: round(v, 2) for k, v in rates.items()}}
        print(f"   {name:<52} {machines:>8} {per_nic:>8.1f} "
              + " ".join(f"{v:>10.2f}" for v in rates.values()))
    return out


def PAPER_FABRICS():                                   # noqa: N802 (a table)
    pod = load_fabric(TOPOLOGIES / "superpod-su.yaml")
    ring = Experiment(algorithm="ring", minbytes=4 << 20, maxbytes=4 << 20)
    hier = Experiment(algorithm="hierarchical", minbytes=16 << 20, maxbytes=16 << 20,
                      scale_up="memory")
    yield ("leaf-spine-4x4, ring AllReduce 4 MiB", load_fabric(
        TOPOLOGIES / "leaf-spine-4x4.yaml"), ring, 2)
    yield "SuperPOD unit (256 GPUs), hierarchical 16 MiB", pod, hier, 1
    yield ("4 SuperPOD units (1024 GPUs), hierarchical 16 MiB",
           pod.edited(lambda s: s["fabric"].update(units=4)), hier, 4)


def main() -> int:
    parser = command_line(__doc__)
    parser.add_argument("--fabric", type=Path, default=TOPOLOGIES / "leaf-spine-4x4.yaml")
    parser.add_argument("--sizes", default="1M,4M")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--tls", action="store_true",
                        help="only the two machines with TLS and in plain TCP, compared")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --tls: runs of each, taken in turns (default 3)")
    args = parser.parse_args()
    fabric = load_fabric(args.fabric)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ours = not testbed.RECORD.exists()
    if ours:
        subprocess.run([str(REPO / "scripts" / "lab"), "testbed", "up", "2"], check=True,
                       cwd=REPO, capture_output=True)
    out = {"fabric": fabric.shape(), "layouts": {}}
    print(f"fabric {fabric.name}: {fabric.shape()}")
    try:
        work = Path(f"/tmp/cluster-bench-{time.strftime('%Y%m%d-%H%M%S')}")
        if args.tls:
            rounds = {TWO: [], PLAIN: []}
            for n in range(args.rounds):
                for layout in (TWO, PLAIN) if n % 2 == 0 else (PLAIN, TWO):
                    name = f"{'tls' if layout == TWO else 'tcp'}-{n}"
                    row = one_layout(layout, fabric, sizes, work / name)
                    rounds[layout].append(row)
                    show(f"{layout}, round {n + 1}", row)
            out["layouts"] = rounds
            out["tls_against_tcp"] = tls_against_tcp(rounds)
        else:
            for i, layout in enumerate(LAYOUTS):
                out["layouts"][layout] = row = one_layout(layout, fabric, sizes, work / str(i))
                show(layout, row)
            two = out["layouts"][TWO]
            out["tls_against_tcp"] = tls_against_tcp({TWO: [two], PLAIN: [out["layouts"][PLAIN]]})
            out["on_paper"] = on_paper(two, two["forwarded_mbit_s"])
    finally:
        if ours:
            subprocess.run([str(REPO / "scripts" / "lab"), "testbed", "down"], cwd=REPO,
                           capture_output=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
