"""What this host can emulate: the same fabric at rising link rates.

For each rate the fabric is built with every link at that rate, and a ring
AllReduce, sized to take about two seconds, runs through the rank agents. A
rate the host keeps up with gives busbw close to the link rate (TCP/IP headers
cap it at 1448/1514 = 0.96) and no link held back below its rate. The
recommendation is the highest such rate; the figures per rate are what to
quote next to any result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Sequence

from topologies.fabric import Fabric
from lab.lifecycle import Lab
from traffic.experiment import Experiment
from traffic.sweep import run_experiment

RATES = (5, 10, 20, 40, 80)
GOOD_BUSBW = 0.85          # of the link rate; 0.96 is the TCP/IP ceiling


def at_rate(fabric: Fabric, rate: float) -> Fabric:
    """The fabric with its server links at `rate` and every other link class
    scaled by the same factor (an NVLink 8x the NIC stays 8x)."""
    factor = rate / fabric.spec["links"]["server_leaf"]["rate_mbit"]

    def edit(spec):
        for link in spec["links"].values():
            if link is not None:
                link["rate_mbit"] = round(link["rate_mbit"] * factor, 6)
        spec["routing"]["policy"] = "ecmp"
    return fabric.edited(edit)


def calibrate_rates(fabric: Fabric, run_dir: Path, datapath: str = "auto",
              rates: Sequence[float] = RATES,
              progress: Callable[[str], None] = lambda m: None) -> List[dict]:
    rows = []
    n = len(fabric.endpoints)
    for rate in rates:
        progress(f"calibrating at {rate:g} Mbit/s")
        # about 2 s of ring AllReduce: 2(n-1)/n x size at the link rate
        size = int(rate * 1e6 / 8 * 2 / (2 * (n - 1) / n))
        exp = Experiment(minbytes=size, maxbytes=size, iters=2, warmup=1)
        with Lab(at_rate(fabric, rate), run_dir / f"{rate:g}mbit", datapath=datapath) as lab:
            result = run_experiment(lab, exp, run_dir / f"{rate:g}mbit")
        run = result["runs"][0]
        verdict = result["fidelity"]
        rows.append({"rate_mbit": rate, "size_bytes": run["size_bytes"],
                     "busbw_over_link": run["busbw_over_link"], "wrong": run["wrong"],
                     "trustworthy": verdict["trustworthy"],
                     "cpu_busy_pct": round(run["cpu_busy_pct"], 1),
                     "ovs_core_pct": round(run["ovs_core_pct"], 1),
                     "latency_p99_us": run["latency"]["p99_us"]})
        if run["busbw_over_link"] < GOOD_BUSBW / 2:
            break                                   # far past what the host can do
    progress("done")
    return rows


def recommended(rows: List[dict]):
    good = [r["rate_mbit"] for r in rows if r["busbw_over_link"] >= GOOD_BUSBW and r["trustworthy"]]
    return max(good) if good else None


def calibration_table(fabric: Fabric, rows: List[dict]) -> str:
    lines = [f"# Calibration of {fabric.name} ({fabric.shape()}): ring AllReduce over all "
             f"{len(fabric.endpoints)} servers, every link at each rate",
             "#  rate (Mbit/s)  busbw/link  host kept up  CPU busy  ovs-vswitchd  p99 latency (us)"]
    for r in rows:
        lines.append(f"{r['rate_mbit']:15g}  {r['busbw_over_link']:10.2f}  "
                     f"{'yes' if r['trustworthy'] else 'NO':>12}  {r['cpu_busy_pct']:7.0f}%  "
                     f"{r['ovs_core_pct']:11.0f}%  {r['latency_p99_us']:16.0f}")
    best = recommended(rows)
    lines.append(f"# Recommended: links of {best:g} Mbit/s or less for this fabric on this host"
                 if best else f"# No rate tried here reached busbw/link {GOOD_BUSBW} with the "
                              "host keeping up: try fewer servers, a smaller fabric or jumbo "
                              "frames (fabric.mtu: 9000)")
    return "\n".join(lines)
