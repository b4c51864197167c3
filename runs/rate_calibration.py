"""What this host can emulate: the same fabric at rising link rates.

For each rate the fabric is built with every link at that rate, and a ring
AllReduce, sized to take about two seconds (at most MAX_SIZE), runs through
the rank agents. A rate the host keeps up with gives busbw close to the link
rate (TCP/IP headers cap it at 1448/1514 = 0.96), no link held back below its
rate, no size flagged. The rate doubles from 5 Mbit/s until it is clearly
past what the host can do (links held back, host-bound, or busbw/link under
half the mark) or reaches MAX_RATE: the highest rate the host kept up with is
its ceiling for this fabric, and the figures per rate are what to quote next
to any result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Sequence

from topologies.fabric import Fabric
from lab.lifecycle import Lab
from runs.experiment import Experiment
from runs.measured import run_experiment

FIRST_RATE, MAX_RATE = 5, 2560        # Mbit/s, doubling
RATES = tuple(FIRST_RATE * 2 ** k for k in range(10))
GOOD_BUSBW = 0.85          # of the link rate; 0.96 is the TCP/IP ceiling
MAX_SIZE = 32 << 20        # bytes per rank: four ranks' buffers stay within host memory


def at_rate(fabric: Fabric, rate: float) -> Fabric:
    """The fabric with its server links at `rate` and every other link class
    scaled by the same factor (an NVLink 8x the NIC stays 8x)."""
    factor = rate / fabric.nic_rate_mbit

    def edit(spec):
        for link in spec["links"].values():
            if link is not None:
                link["rate_mbit"] = round(link["rate_mbit"] * factor, 6)
        spec["routing"]["policy"] = "ecmp"
    return fabric.edited(edit)


def calibrate_rates(fabric: Fabric, run_dir: Path, datapath: str = "auto",
                    rates: Sequence[float] = RATES,
                    progress: Callable[[str], None] = lambda m: None) -> List[dict]:
    """One row per rate, up to the first that is clearly past what the host
    can do: links held below their rate, host-bound, or busbw/link under
    half of GOOD_BUSBW (a rate merely under GOOD_BUSBW may be a noisy dip)."""
    rows = []
    for rate in rates:
        progress(f"calibrating at {rate:g} Mbit/s")
        rows.append(_at(fabric, rate, run_dir, datapath))
        _finished(progress, rows[-1])
        if rows[-1]["past"]:
            break
    progress("done")
    return rows


def _finished(progress, row: dict) -> None:
    """A rate done: a display that says so (a line a rate on a pipe,
    report/progress.py) hears what it came to, and the row (which
    run_topology.py --calibrate prints then)."""
    finished = getattr(progress, "finished", None)
    if finished is not None:
        finished(f"calibrated {row['rate_mbit']:g} Mbit/s: busbw/link "
                 f"{row['busbw_over_link']:.2f}"
                 + ("" if row["kept_up"] else ", not kept up")
                 + ("; past what this host can emulate" if row["past"] else ""), row)


def _at(fabric: Fabric, rate: float, run_dir: Path, datapath: str) -> dict:
    n = len(fabric.endpoints)
    # about 2 s of ring AllReduce: 2(n-1)/n x size at the link rate
    size = min(int(rate * 1e6 / 8 * 2 / (2 * (n - 1) / n)), MAX_SIZE)
    exp = Experiment(minbytes=size, maxbytes=size, iters=2, warmup=1)
    with Lab(at_rate(fabric, rate), run_dir / f"{rate:g}mbit", datapath=datapath) as lab:
        result = run_experiment(lab, exp, run_dir / f"{rate:g}mbit")
    run, verdict = result.runs[0], result.fidelity
    held_back = not verdict.get("host_kept_up", verdict["trustworthy"]) or verdict.get("host_bound")
    return {"past": bool(held_back) or run["busbw_over_link"] < GOOD_BUSBW / 2,
            "rate_mbit": rate, "size_bytes": run["size_bytes"],
            "busbw_over_link": run["busbw_over_link"], "wrong": run["wrong"],
            "trustworthy": verdict["trustworthy"] and not verdict.get("host_bound"),
            "kept_up": (verdict["trustworthy"] and not verdict.get("host_bound")
                        and run["busbw_over_link"] >= GOOD_BUSBW and run["wrong"] == 0),
            "cpu_busy_pct": round(run["cpu_busy_pct"], 1),
            "ovs_core_pct": round(run["ovs_core_pct"], 1),
            "latency_p99_us": run["latency"]["p99_us"]}


def recommended(rows: List[dict]):
    """The ceiling: the highest rate the host kept up with."""
    return max((r["rate_mbit"] for r in rows if r["kept_up"]), default=None)


def calibration_table(fabric: Fabric, rows: List[dict]) -> str:
    """The whole table: its head, a row per rate, the ceiling."""
    return "\n".join([calibration_head(fabric), *map(calibration_row, rows),
                      calibration_ceiling(rows)])


def calibration_head(fabric: Fabric) -> str:
    return (f"# Calibration of {fabric.name} ({fabric.shape()}): ring AllReduce over all "
            f"{len(fabric.endpoints)} servers, every link at each rate\n"
            "#  rate (Mbit/s)  busbw/link  host kept up  CPU busy  ovs-vswitchd  p99 latency (us)")


def calibration_row(r: dict) -> str:
    return (f"{r['rate_mbit']:15g}  {r['busbw_over_link']:10.2f}  "
            f"{'yes' if r['kept_up'] else 'NO':>12}  {r['cpu_busy_pct']:7.0f}%  "
            f"{r['ovs_core_pct']:11.0f}%  {r['latency_p99_us']:16.0f}")


def calibration_ceiling(rows: List[dict]) -> str:
    """The table's last line: the ceiling and why, or that none was found."""
    best = recommended(rows)
    failed = next((r for r in rows if not r["kept_up"] and r["rate_mbit"] > (best or 0)), None)
    if best and failed:
        why = ("busbw/link " f"{failed['busbw_over_link']:.2f}"
               + ("" if failed["trustworthy"] else ", links held below their rate")
               + f", CPU {failed['cpu_busy_pct']:.0f}% busy")
        return (f"# Ceiling: {best:g} Mbit/s per link for this fabric on this host "
                f"(at {failed['rate_mbit']:g} Mbit/s it did not keep up: {why}). "
                f"Recommended: links of {best:g} Mbit/s or less")
    if best:
        return (f"# Ceiling: above {best:g} Mbit/s, the highest rate tried. Recommended: "
                f"links of {best:g} Mbit/s or less")
    return (f"# No rate tried here reached busbw/link {GOOD_BUSBW} with the host "
            "keeping up: try fewer servers, a smaller fabric or jumbo frames "
            "(fabric.mtu: 9000)")
