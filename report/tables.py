"""Results as nccl-tests prints them, plus what the fabric did, and as CSV."""

from __future__ import annotations

import csv
import io
import math

from runs.record import RunRecord
from sim.simulator import LIBRARY_OF
from traffic.measure.fidelity import verdict_lines

NAN = float("nan")

NCCL_HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        ")


# `# Ranks:` names every rank up to RANKS_NAMED, else the first RANKS_SHOWN and the last
RANKS_NAMED, RANKS_SHOWN = 64, 8


def _num(value, fmt):
    return "N/A" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else format(value, fmt)


def nccl_table(result: RunRecord, link_rate_mbit: float) -> str:
    exp, runs = result.experiment, result.runs
    lines = [f"# Collective test: {exp['collective']} ({exp['algorithm']}), engine {exp['engine']}, "
             f"{len(result.ranks)} ranks, {exp['channels']} connection(s) per peer, "
             + (f"{exp['iters']} iterations after {exp['warmup']} warm-up"
                if exp["engine"] != "sim" else "one iteration a size (the simulation is "
                                               "deterministic)")
             + (", NVLink in memory" if exp.get("scale_up") == "memory" else ""),
             f"# Ranks: {ranks_text(result.ranks)}; links {link_rate_mbit:g} Mbit/s "
             f"= {link_rate_mbit / 8e3:.6f} GB/s",
             "#", NCCL_HEADER]
    if exp["algorithm"] == "auto":          # which algorithm each size ran
        lines[-1] += "  algorithm (NCCL's)"
    for r in runs:
        lines.append(f"{r['size_bytes']:12d}  {r['count']:12d}  {r['type']:>8}  {r['redop']:>6}  "
                     f"{r['root']:>6}  {r['time_s'] * 1e6:9.0f}  {_gbs(r['algbw_gbps'])}  "
                     f"{_gbs(r['busbw_gbps'])}  {_num(r['wrong'], 'd'):>6}"
                     + (f"  {_ran(r)}" if "auto" in r else ""))
    checked = [r["wrong"] for r in runs if r["wrong"] is not None]
    if checked:
        lines.append(f"# Out of bounds values : {sum(checked)} {'OK' if sum(checked) == 0 else 'FAILED'}")
    avg = sum(r["busbw_gbps"] for r in runs) / len(runs) if runs else 0.0
    lines.append(f"# Avg bus bandwidth    : {avg:.6f}")
    return "\n".join(lines)


def ranks_text(ranks) -> str:
    """The ranks by name; past RANKS_NAMED of them, the first few, the last
    and how many (16,384 names were a 122,262-character line)."""
    if len(ranks) <= RANKS_NAMED:
        return " ".join(ranks)
    return f"{' '.join(ranks[:RANKS_SHOWN])} ... {ranks[-1]} ({len(ranks)} ranks)"


def _gbs(x: float) -> str:
    """GB/s in the column's six characters: four decimals for a lab's slow
    links (0.0025), two from 10 GB/s up (434.95), as nccl-tests prints."""
    return f"{x:6.4f}" if x < 10 else f"{x:6.2f}"


def _ran(r: dict) -> str:
    """What a size of auto ran: the lab's schedule, and the NCCL algorithm
    it stands for where the name differs (rail-ring (ring)), or NCCL's own
    choice where its model priced it (auto (NVLSTree/Simple, 16 channels))."""
    said = auto_text(r["auto"])
    return r["algorithm"] if said == r["algorithm"] else f"{r['algorithm']} ({said})"


def auto_text(tuned: dict) -> str:
    """What auto ran, as NCCL names it; and what NCCL itself would run on
    the servers as sold, where the fabric names them and the lab ran other."""
    return tuned["nccl"] + (f"; {tuned['nccl_model']}" if "nccl_model" in tuned else "")


def fabric_table(result: RunRecord, link_rate_mbit: float) -> str:
    idle, probe = result.idle_latency, result.probe
    lines = [f"# Fabric during each size (latency probe {probe[0]} -> {probe[1]}; "
             f"idle p50 {_num(idle['p50_us'], '.0f')} us, p99 {_num(idle['p99_us'], '.0f')} us)",
             "#       size  busbw/link  meas/pred  meas/sim  peak util  max queue  drops  ECMP max/mean"
             "  lat p50  lat p99  lat max   CPU  note"]
    for r in result.runs:
        links = r["links"].values()
        peak = max((l["peak_util"] for l in links), default=0)
        queue = max((l["peak_backlog_bytes"] for l in links), default=0)
        drops = sum(l["drops"] for l in links)
        imb = max(r["ecmp_imbalance"].values(), default=float("nan"))
        lat = r["latency"]
        lines.append(f"{r['size_bytes']:12d}  {r['busbw_over_link']:10.2f}  "
                     f"{_num(r['measured_over_predicted'], '9.2f')}  "
                     f"{_num(r.get('measured_over_simulated'), '8.2f')}  {peak:9.0%}  "
                     f"{queue / 1024:7.0f} KB  {drops:5d}  {_num(imb, '13.2f')}  "
                     f"{_num(lat['p50_us'], '7.0f')}  {_num(lat['p99_us'], '7.0f')}  "
                     f"{_num(lat['max_us'], '7.0f')}  {r['cpu_busy_pct']:3.0f}%  "
                     f"{_note(r.get('flags', []))}".rstrip())
    lines += verdict_lines(result.fidelity, link_rate_mbit)
    return "\n".join(lines)


NOTES = {"over-rate": "faster than its link!", "below-resolution": "too small at this rate",
         "slower-than-simulated": "behind the simulator: the host?"}


def _note(flags) -> str:
    return "; ".join(NOTES[f] for f in flags)


CSV_FIELDS = ["collective", "algorithm", "engine", "network", "ranks", "size_bytes", "count", "type", "redop",
              "root", "time_s", "algbw_gbps", "busbw_gbps", "wrong", "predicted_s",
              "measured_over_predicted", "simulated_s", "measured_over_simulated",
              "lat_p50_us", "lat_p99_us", "lat_max_us",
              "peak_util", "drops", "ecmp_imbalance_max", "cpu_busy_pct",
              "payload_intra_node_bytes", "payload_inter_node_bytes",
              "wire_intra_node_bytes", "wire_network_to_servers_bytes", "flags"]


def csv_text(result: RunRecord, network: str) -> str:
    """The record's rows under CSV_FIELDS' header; `network` is the fabric's
    technology by its registered name (infiniband, roce, ...), on every row:
    a row read apart from its run still says what network it priced."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in result.runs:
        links = r["links"].values()
        w.writerow({**{k: r[k] for k in CSV_FIELDS if k in r}, "network": network,
                    "lat_p50_us": r["latency"]["p50_us"], "lat_p99_us": r["latency"]["p99_us"],
                    "lat_max_us": r["latency"]["max_us"],
                    "peak_util": max((l["peak_util"] for l in links), default=0),
                    "drops": sum(l["drops"] for l in links),
                    "ecmp_imbalance_max": max(r["ecmp_imbalance"].values(), default=""),
                    "payload_intra_node_bytes": r.get("payload_bytes", {}).get("intra", ""),
                    "payload_inter_node_bytes": r.get("payload_bytes", {}).get("inter", ""),
                    "wire_intra_node_bytes": r.get("wire_bytes", {}).get("intra_node", ""),
                    "wire_network_to_servers_bytes":
                        r.get("wire_bytes", {}).get("network_to_servers", ""),
                    "flags": " ".join(r.get("flags", []))})
    return out.getvalue()


def sim_table(result: RunRecord) -> str:
    """What the simulated fabric did per size: the figures an emulated run's
    fabric table gives where a simulation has them; a size NCCL's model
    priced has none of the links' (it replays no schedule)."""
    sim = result.simulated
    method = f", {sim['method']}" if sim.get("method") else ""
    how = (f"{sim['method']}: its tuner's latency and bandwidth per algorithm and protocol"
           if sim.get("method") in LIBRARY_OF else f"flow-level, max-min fair sharing{method}")
    net = (f"{sim['network_title']}: {sim['switch_latency_us']:g} us a switch, "
           f"{sim['message_us']:g} us a message more than verbs, routing {sim['routing']}; "
           if "network" in sim else "")
    extra = f", {sim['hop_latency_s'] * 1e6:g} us more per hop" if sim["hop_latency_s"] else ""
    # where sizes went different ways (event by event, then the step shortcut), each says its own
    mixed = len({r.get("method") for r in result.runs}) > 1
    lines = [f"# Simulated fabric ({how}; {net}seed {sim['seed']}{extra})",
             "#       size  busbw/link  sim/alpha-beta  busiest link  ECMP max/mean"
             + ("  method" if mixed else "")]
    for r in result.runs:
        if not r["links"] and "model" in r.get("auto", {}):
            lines.append(f"{r['size_bytes']:12d}  {r['busbw_over_link']:10.2f}  "
                         f"{'-':>14}  {'-':>12}  {'-':>13}")
            continue
        busiest = max((l["mean_util"] for l in r["links"].values()), default=0.0)
        imb = max(r["ecmp_imbalance"].values(), default=NAN)
        lines.append(f"{r['size_bytes']:12d}  {r['busbw_over_link']:10.2f}  "
                     f"{r['measured_over_predicted'] or NAN:14.2f}  {busiest:12.0%}  "
                     f"{'N/A' if math.isnan(imb) else format(imb, '13.2f'):>13}"
                     + (f"  {r.get('method', '')}" if mixed else ""))
    priced = [r for r in result.runs if not r["links"] and "model" in r.get("auto", {})]
    if priced:
        auto, lib = priced[0]["auto"], LIBRARY_OF.get(priced[0].get("method"), "NCCL")
        pattern = (f"{lib}'s AllToAll between servers"
                   if result.experiment.get("collective") == "alltoall" else f"{lib}'s rail rings")
        lines.append(f"# '-': priced by {lib}'s model of {auto['model']} (server.model): "
                     f"the algorithm, protocol and channels {lib}'s tuner picks, each NIC at "
                     f"{auto['fabric_share']:.2f} of its rate (bandwidth alone: this "
                     f"fabric's {sim.get('routing', 'routing')} on {pattern}), each step "
                     f"between servers {round(auto.get('network_us', 0.0), 2) + 0.0:+.2f} us "
                     f"against {lib}'s own figure (switches, links, transport); no schedule "
                     "replayed, so no per-link figures")
    lines.append("# Simulated, not measured: no TCP dynamics, no queueing beyond fair sharing, "
                 "no host CPU (docs/simulator.md)")
    return "\n".join(lines)
