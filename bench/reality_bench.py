#!/usr/bin/env python3
"""The simulator against real clusters: published nccl-tests figures, each
with its source and setup, beside what the NCCL model (sim/nccl/) predicts
for the same hardware, size and NCCL settings. No network, no root.

    scripts/lab bench reality            # or: .venv/bin/python -m bench.reality_bench
    .venv/bin/python -m bench.reality_bench --json out.json
    .venv/bin/python -m bench.reality_bench --markdown       # docs/networks.md's table

Large sizes are compared in busbw (GB/s, nccl-tests' definition: algbw x
2(n-1)/n for AllReduce), 8-byte AllReduces in time (us, in-place, as the
first out-of-place row carries warm-up), and the ECMP case as the speed-up
the published change gave. The last lines give the median and the worst
|simulated/measured - 1|, and the worst of the multi-server cases.

Every row is a measurement of a real cluster, never this project's own
output; where a source gives a figure in prose rather than a table, the
setup says so. Sources (github.com/NVIDIA/... unless given in full) were
read in the issue threads and pages named; the figures are copied as
printed.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

from harness.commandline import command_line
from networks import network
from sim import nccl
from sim.clos import ClosShape
from topologies.hardware import partition, server
from sim.nccl import rails

GIB, MIB = 1 << 30, 1 << 20


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    setup: str
    server: str
    nodes: int
    size: int                       # bytes, nccl-tests' size column
    measured: float
    unit: str = "busbw"             # busbw (GB/s), us (time), or speedup
    algo: Optional[str] = None      # NCCL_ALGO as set in the run
    proto: Optional[str] = None     # NCCL_PROTO as set in the run
    options: dict = field(default_factory=dict)   # nccl.cluster's: min_channels, ...
    nics: Optional[int] = None      # NICs per server where the system had fewer than sold
    network: str = "infiniband"     # the scale-out technology it ran on (networks/)
    tech: str = ""                  # the tag the table shows, where not the network's
    collective: str = "allreduce"
    nic_gbps: Optional[float] = None  # Gbit/s per NIC where the system's differ from sold
    fitted: str = ""                # what this case set, if it set a parameter (not a check)
    ppn: Optional[int] = None       # ranks per server, where not every GPU
    domain: Optional[int] = None    # GPUs per NVLink domain where a rack was partitioned

    @property
    def tag(self) -> str:
        """What the case measured: the network between servers, or the
        scale-up domain alone on one server."""
        return self.tech or (self.network if self.nodes > 1 else "nvlink")


NT = "https://github.com/NVIDIA/nccl-tests/issues/"
NC = "https://github.com/NVIDIA/nccl/issues/"
META = ("https://engineering.fb.com/2024/08/05/data-center-engineering/"
        "roce-network-distributed-ai-training-at-scale/ (SIGCOMM 2024, 'RDMA over Ethernet "
        "for Distributed AI Training at Meta Scale')")
NO_NVLS = "^nvls,nvlstree"
AWS = ("https://github.com/aws-samples/awsome-distributed-training/blob/main/micro-benchmarks/"
       "nccl-tests/README.md")
DSTACK = "https://github.com/dstackai/dstack/blob/master/"
A3MEGA = ("https://github.com/lessizzmore/create-a3mega-ztan-fork/blob/main/"
          "ztan-NCCL-test-result")
VOLTAGE = ("https://github.com/ZiyanIshani/vpbenchmarking/blob/main/results/nccl/nccl_multinode/"
           "nccl_{}_20260224_225706.txt")
STAS = "https://github.com/stas00/ml-engineering/blob/master/network/README.md"
CW = ("https://github.com/coreweave/nccl-tests/blob/0120901ac7a1e6425640a57540e142070452f8a2/"
      "README.md#gb200 (CoreWeave, 'Expected Performance', NCCL 2.26.2)")
AAC = ("https://github.com/hisohara/ai-scripts/blob/0780bb3c957ba1dd4254b3147c2027a44304db34/"
       "training/01_rccl-smoketest/README.md")
MNNVL_RING = ("NCCL 2.26.2's default, read as Ring from the times: their fixed cost, ~4.8 ms "
              "over 1,440 ranks from 1 to 16 GiB, is a ring's 2 x 1,439 steps, not an "
              "NVLSTree's few tens of us (2.26.2's tuner priced NVLSTree otherwise than 2.30's: "
              "src/graph/tuning.cc at v2.26.2-1); priced as NCCL_ALGO=Ring, where 2.30's tuner, "
              "modelled here, would run NVLSTree (765 GB/s, unmeasured)")

CASES = (
    Case("1x8 H100 ring", NT + "309", "HGX H100, NCCL 2.26.2, NCCL_NVLS_ENABLE=0, peak "
         "out-of-place busbw (prose: 368.76)", "hgx-h100", 1, 16 * GIB, 368.76, algo=NO_NVLS),
    Case("1x8 H100 default", NT + "290", "8 x H100 80GB HBM3, -g 8, 4 GiB out-of-place",
         "hgx-h100", 1, 4 * GIB, 473.60),
    Case("2x8 H100 ring", NT + "309", "8 x 400G IB, NCCL_ALGO=Ring, NCCL_MIN_CTAS=24, "
         "NCCL_IB_QPS_PER_CONNECTION=2, 8 GiB (comment of 2025-06-18)", "hgx-h100", 2,
         8 * GIB, 392.69, algo="ring", options={"min_channels": 24}),
    Case("2x8 H100 default", NT + "309", "Dell XE9680, 8 x CX-7 400G IB, NCCL 2.26.2, 16 GiB",
         "hgx-h100", 2, 16 * GIB, 469.21),
    Case("4x8 H100 ring", NC + "1221", "8 x 400G RoCE, NCCL 2.19.3, NCCL_NVLS_ENABLE=0, "
         "4-8 GiB (prose: 320 GB/s)", "hgx-h100", 4, 8 * GIB, 320.0, algo=NO_NVLS,
         network="roce"),
    Case("4x8 H100 default", NT + "309", "8 x 400G IB, VMware VMs, NCCL 2.26.2, 16 GiB",
         "hgx-h100", 4, 16 * GIB, 365.84),
    Case("8x8 H100 default", NT + "309", "8 x 400G IB, default settings, 8 GiB "
         "(comment of 2025-06-18)", "hgx-h100", 8, 8 * GIB, 320.70),
    Case("1,024 H100 ring LL128", NT + "322", "128 nodes, RoCE, NCCL_ALGO=Ring, "
         "NCCL_PROTO=LL128, NCCL_MIN_NCHANNELS=32, 16 GiB", "hgx-h100", 128, 16 * GIB, 367.29,
         algo="ring", proto="LL128", options={"min_channels": 32}, network="roce"),
    Case("1,984 H200 default", NT + "283", "248 nodes x 8 H200, 8 HCAs each, 512 MiB "
         "(prose: 'typically measuring around 350G')", "hgx-h200", 248, 512 * MIB, 350.0),
    Case("1x8 A100 default", "https://github.com/Azure/AI-benchmarking-guide/blob/main/"
         "Azure_Results/ND_A100_v4_results.md", "ND A100 v4 (8 x A100 80GB, NVSwitch), "
         "NCCL 2.18.5, 8 GiB in-place", "dgx-a100", 1, 8 * GIB, 231.58),
    Case("DGX-A100 multi-node", NC + "812", "DGX-A100, 8 x 200G IB (maintainer: 'we measure "
         "192GB/s AllReduce BusBW'; node count not given, taken as 2)", "dgx-a100", 2,
         8 * GIB, 192.0),
    Case("8 B, 2x8 H100", NT + "309", "as 2x8 H100 default, 8 B in-place", "hgx-h100", 2,
         8, 24.70, unit="us"),
    Case("8 B, 4x8 H100", NT + "309", "as 4x8 H100 default, 8 B in-place", "hgx-h100", 4,
         8, 34.75, unit="us"),
    Case("8 B, 16x8 H100", NC + "1469", "16 nodes x 8 H100, NCCL 2.20.5, 8 B in-place",
         "hgx-h100", 16, 8, 61.98, unit="us"),
    Case("8 B, 32x8 A100", NC + "652", "32 nodes x 8 A100-SXM4, 4 HDR IB NICs each, 8 B "
         "in-place", "dgx-a100", 32, 8, 62.03, unit="us", nics=4),
    Case("ECMP: E-ECMP + QP scaling", META, "RoCE, 2-tier Clos, baseline ECMP on the 5-tuple "
         "against ECMP on the QP with more QPs: AllReduce 'up to 40%' faster (prose); "
         "simulated as 128 servers of 8 H100 on a 1:1 leaf-spine of radix 64, whole servers "
         "per leaf, 1 flow per NIC pair against 8 (an assumption: the QP count is not given)",
         "hgx-h100", 128, 16 * GIB, 1.40, unit="speedup", network="roce"),
    # --- InfiniBand, more clusters --------------------------------------------------
    Case("2x8 H100 IB (Nebius)", DSTACK + "mkdocs/docs/examples/clusters/nebius.md",
         "H100:8 fleet, NDR InfiniBand, default NCCL settings, 8 GiB out-of-place", "hgx-h100",
         2, 8 * GIB, 467.54),
    Case("8 B, 2x8 H100 IB (Nebius)", DSTACK + "mkdocs/docs/examples/clusters/nebius.md",
         "as above, 8 B in-place", "hgx-h100", 2, 8, 29.78, unit="us"),
    Case("2x8 A100 IB (Crusoe)", DSTACK + "examples/clusters/crusoe/README.md",
         "A100 80GB SXM, 8 HDR HCAs, NCCL_IB_QPS_PER_CONNECTION=2, 2 GiB out-of-place",
         "dgx-a100", 2, 2 * GIB, 194.06),
    Case("8 B, 2x8 A100 IB (Crusoe)", DSTACK + "examples/clusters/crusoe/README.md",
         "as above, 8 B in-place", "dgx-a100", 2, 8, 29.82, unit="us"),
    Case("4x8 H100 AllGather", VOLTAGE.format("allgather"), "Voltage Park, 400G InfiniBand, "
         "NCCL 2.24.3, default settings, 8 GiB out-of-place", "hgx-h100", 4, 8 * GIB, 323.53,
         collective="allgather"),
    Case("8 B, 4x8 H100 IB (VP)", VOLTAGE.format("allreduce"), "as above, AllReduce 8 B "
         "in-place", "hgx-h100", 4, 8, 38.27, unit="us"),
    # --- RoCE -----------------------------------------------------------------------
    Case("2x8 A100 RoCE (OCI)", "https://github.com/oracle-quickstart/oci-hpc-oke/blob/main/"
         "docs/running-nccl-rccl-tests-from-slurm-operator.md", "BM.GPU.B4.8, A100 40GB, 16 "
         "x 100G RoCE HCAs (taken as 8 x 200G), NCCL 2.29.3, 8 GiB out-of-place", "dgx-a100", 2,
         8 * GIB, 189.60, network="roce"),
    # --- AWS EFA --------------------------------------------------------------------
    Case("2x8 H100 EFA (p5)", AWS, "2 x p5.48xlarge, 32 x 100G EFA (4 per GPU, taken as one "
         "400G NIC per GPU), aws-ofi-nccl, 16 GiB out-of-place", "hgx-h100", 2, 16 * GIB,
         487.09, network="efa"),
    Case("8 B, 2x8 H100 EFA (p5)", AWS, "as above, 8 B in-place", "hgx-h100", 2, 8, 72.43,
         unit="us", network="efa", fitted="efa message_us (with p6's)"),
    Case("2x8 A100 EFA (p4de)", AWS, "2 x p4de.24xlarge, 4 x 100G EFA, 2 GiB out-of-place",
         "dgx-a100", 2, 2 * GIB, 78.33, network="efa", nics=4, nic_gbps=100),
    Case("8 B, 2x8 B200 EFA (p6)", "https://github.com/dstackai/dstack/pull/3961",
         "2 x p6-b200, EFA, 8 B in-place", "hgx-b200", 2, 8, 54.46, unit="us", network="efa",
         fitted="efa message_us (with p5's)"),
    # --- Google Cloud GPUDirect-TCPXO (A3 Mega) ---------------------------------------
    Case("2x8 H100 TCPXO", A3MEGA, "2 x a3-megagpu-8g, 8 x 200G NICs, GPUDirect-TCPXO, "
         "8 GiB out-of-place", "hgx-h100", 2, 8 * GIB, 338.82, network="tcpxo", nic_gbps=200),
    Case("8 B, 2x8 H100 TCPXO", A3MEGA, "as above, 8 B in-place", "hgx-h100", 2, 8, 123.5,
         unit="us", network="tcpxo", nic_gbps=200, fitted="tcpxo message_us"),
    Case("2x8 H100 TCPXO AllGather", DSTACK + "mkdocs/docs/examples/clusters/gcp.md",
         "A3 Mega, TCPXO (LL128 profile), 8 GiB out-of-place", "hgx-h100", 2, 8 * GIB, 188.54,
         network="tcpxo", nic_gbps=200, collective="allgather", fitted="tcpxo efficiency"),
    # --- NCCL's socket transport over kernel TCP ---------------------------------------
    Case("8 B Bcast, 2x1 V100 TCP", "https://github.com/NVIDIA/nccl-tests/issues/82",
         "Azure, 1 V100-PCIE a node, NCCL 2.9.6, NCCL_IB_DISABLE=1, NCCL_ALGO=Ring "
         "NCCL_PROTO=Simple, 8 B in-place", "dgx-1v", 2, 8, 38.17, unit="us", network="tcp",
         collective="broadcast", algo="ring", proto="Simple", ppn=1),
    Case("2x8 H100 sockets (A3 Mega)", "https://github.com/NVIDIA/aicr (docs and PR 1565: "
         "'about 4 GB/s' when NCCL falls back to TCP on A3 Mega)", "GKE a3-megagpu-8g without "
         "TCPXO (sockets on one NIC), 16 GiB (prose: about 4 GB/s)", "hgx-h100", 2, 16 * GIB,
         4.0, network="tcp", nics=1, nic_gbps=200, fitted="tcp nic_gbytes_cap"),
    # --- one server: the other collectives -----------------------------------------------
    Case("1x8 H200 AllGather", STAS, "HGX H200, NCCL 2.27.7, all_gather_perf 16 GiB",
         "hgx-h200", 1, 16 * GIB, 361.4, collective="allgather"),
    Case("1x8 H200 ReduceScatter", STAS, "HGX H200, NCCL 2.27.7, reduce_scatter_perf 16 GiB",
         "hgx-h200", 1, 16 * GIB, 362.9, collective="reducescatter"),
    Case("1x8 H100 AllToAll", "https://github.com/NVIDIA/nccl-tests/issues/212",
         "maintainer: 'an effective NVLink bandwidth of 370GB/s, which you can observe as "
         "BusBw when running non-allreduce operations' (prose)", "hgx-h100", 1, 8 * GIB, 370.0,
         collective="alltoall"),
    # --- scale-up as sold: NVL72 racks (MNNVL), their partitions, AMD's mesh (RCCL) ---
    Case("1x72 GB200 NVL72 default", CW, "one rack, 72 ranks in one NVLink domain (MNNVL), "
         "8 GiB out-of-place", "gb200-nvl72", 1, 8 * GIB, 834.57, tech="nvl72"),
    Case("2x72 GB200 NVL72 default", CW, "2 racks, 144 ranks, InfiniBand between racks, "
         "16 GiB out-of-place", "gb200-nvl72", 2, 16 * GIB, 810.41, tech="nvl72"),
    Case("20x72 GB200 NVL72 ring", CW, f"20 racks, 1,440 ranks, 16 GiB out-of-place; "
         f"{MNNVL_RING}", "gb200-nvl72", 20, 16 * GIB, 405.74, algo="ring", tech="nvl72"),
    Case("20x72 GB200 NVL72 1 GiB", CW, "as above, 1 GiB out-of-place", "gb200-nvl72", 20,
         1 * GIB, 218.85, algo="ring", tech="nvl72"),
    Case("3 x NVL8 partitions ring", NC + "1801", "GB200 NVL72, 3 NVL8 partitions in 3 racks "
         "(IB between them), NCCL 2.27.3, NCCL_NVLS_ENABLE=0, NCCL's default (Ring), 16 GiB",
         "gb200-nvl72", 3, 16 * GIB, 393.66, algo=NO_NVLS, tech="nvl72", domain=8),
    Case("3 x NVL8 partitions tree", NC + "1801", "as above, NCCL_ALGO=Tree, 16 GiB",
         "gb200-nvl72", 3, 16 * GIB, 485.68, algo="tree", tech="nvl72", domain=8),
    Case("3 x NVL4 partitions ring", NC + "1801", "3 NVL4 partitions in 3 racks, NVLS off, "
         "NCCL's default (Ring), 16 GiB", "gb200-nvl72", 3, 16 * GIB, 196.72, algo=NO_NVLS,
         tech="nvl72", domain=4),
    Case("3 x NVL4 partitions tree", NC + "1801", "as above, NCCL_ALGO=Tree, 16 GiB",
         "gb200-nvl72", 3, 16 * GIB, 234.43, algo="tree", tech="nvl72", domain=4),
    Case("1x8 MI300X default", AAC, "AAC8, 8 x MI300X, rccl-tests -g 1 over MPI, 8 GiB "
         "out-of-place", "mi300x", 1, 8 * GIB, 315.69, tech="amd-rccl"),
    Case("2x8 MI300X default", AAC, "AAC10, 8 x MI300X and 8 x ConnectX RoCE NICs a node, "
         "RCCL 2.22.3, 16 GiB out-of-place", "mi300x", 2, 16 * GIB, 357.46, network="roce",
         tech="amd-rccl"),
    Case("1x8 MI325X default", AAC, "AAC11, 8 x MI325X, 16 GiB out-of-place", "mi325x", 1,
         16 * GIB, 319.08, tech="amd-rccl"),
    Case("8x8 MI325X ring", AAC, "AAC11, 8 nodes, 8 x Broadcom RoCE NICs a node, "
         "NCCL_ALGO=Ring, 16 GiB out-of-place", "mi325x", 8, 16 * GIB, 350.84, algo="ring",
         network="roce", tech="amd-rccl"),
)
ECMP_CONNECTIONS = (1, 8)
ECMP_SEEDS = 5


def ecmp_shape(nodes: int) -> ClosShape:
    return ClosShape(servers=nodes, gpus=8, nics=8, down=32, up=32, tiers=2, radix=64,
                     wiring="server", routing="hash")


BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0,
              "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


def hardware_of(case: Case):
    """The case's servers: as sold, with its NICs where the system had others."""
    hw = server(case.server)
    if case.domain is not None:
        hw = partition(hw, case.domain)
    if case.nics is not None or case.nic_gbps is not None:
        nics, gbps = case.nics or hw.nics, case.nic_gbps or hw.nic_gbps
        hw = replace(hw, name=f"{hw.name} ({nics} x {gbps:g}G NICs)", nics=nics, nic_gbps=gbps)
    return hw


def simulate(case: Case) -> dict:
    """What the model gives for the case: the figure in the case's unit,
    and what NCCL would run."""
    hw = hardware_of(case)
    tech = network(case.network)
    where = nccl.cluster(hw, case.nodes, case.ppn, network=tech, **case.options)
    if case.unit == "speedup":
        shares = [rails.share(ecmp_shape(case.nodes), c, ECMP_SEEDS) for c in ECMP_CONNECTIONS]
        times = [nccl.predict(nccl.cluster(hw, case.nodes, fabric_share=s, network=tech),
                              "allreduce", case.size).chosen for s in shares]
        return {"simulated": times[0].time_us / times[1].time_us, "ran": times[1].name,
                "channels": times[1].channels, "fabric_shares": shares}
    choice = nccl.predict(where, case.collective, case.size, case.algo, case.proto).chosen
    n = where.topo.ranks
    if case.unit == "us":
        value = choice.time_us
    else:
        value = case.size / (choice.time_us * 1e3) * BUS_FACTOR[case.collective](n)
    return {"simulated": value, "ran": choice.name, "channels": choice.channels}


def run() -> dict:
    rows = []
    for case in CASES:
        got = simulate(case)
        ratio = got["simulated"] / case.measured
        rows.append({**asdict(case), **got, "ratio": ratio, "tag": case.tag,
                     "gpus": case.nodes * (case.ppn or case.domain or server(case.server).gpus)})
    errors = [abs(r["ratio"] - 1) for r in rows]
    multi = [abs(r["ratio"] - 1) for r in rows if r["nodes"] > 1]
    large = [abs(r["ratio"] - 1) for r in rows if r["unit"] == "busbw"]
    small = [max(r["ratio"], 1 / r["ratio"]) for r in rows if r["unit"] == "us"]
    return {"rows": rows, "median_error": statistics.median(errors), "worst_error": max(errors),
            "worst_multi_node_error": max(multi),
            "large": {"cases": len(large), "median_error": statistics.median(large),
                      "worst_error": max(large)},
            "small": {"cases": len(small), "median_factor": statistics.median(small),
                      "worst_factor": max(small)},
            "networks": sorted({r["tag"] for r in rows})}


def format_table(out: dict) -> str:
    units = {"busbw": "GB/s", "us": "us", "speedup": "x"}
    lines = [f"{'case':<26} {'network':<11} {'GPUs':>6} {'size':>9} {'NCCL runs':<16} "
             f"{'ch':>3} {'simulated':>10} {'measured':>10} {'unit':<5} {'sim/meas':>8}"]
    for r in out["rows"]:
        size = f"{r['size'] // GIB} GiB" if r["size"] >= GIB else \
            f"{r['size'] // MIB} MiB" if r["size"] >= MIB else f"{r['size']} B"
        lines.append(f"{r['name']:<26} {r['tag']:<11} {r['gpus']:>6,} {size:>9} {r['ran']:<16} "
                     f"{r['channels']:>3} {r['simulated']:10.2f} {r['measured']:10.2f} "
                     f"{units[r['unit']]:<5} {r['ratio']:8.3f}")
    lines += ["", "sources:"]
    lines += [f"  {r['name']}: {r['source']} -- {r['setup']}" for r in out["rows"]]
    fitted = [f"  {r['name']}: sets {r['fitted']}" for r in out["rows"] if r["fitted"]]
    if fitted:
        lines += ["", "cases that set a parameter (the rest check it):"] + fitted
    large, small = out["large"], out["small"]
    lines += ["", f"median |sim/meas - 1| = {out['median_error']:.3f}   "
                  f"worst = {out['worst_error']:.3f}   "
                  f"worst multi-server = {out['worst_multi_node_error']:.3f}",
              f"large sizes (busbw, {large['cases']} cases): median |sim/meas - 1| = "
              f"{large['median_error']:.3f}, worst {large['worst_error']:.3f}",
              f"small sizes (time, {small['cases']} cases): median factor "
              f"{small['median_factor']:.2f}x, worst {small['worst_factor']:.2f}x",
              f"{len(out['rows'])} cases on {', '.join(out['networks'])}"]
    return "\n".join(lines)


def format_markdown(out: dict) -> str:
    """The rows as docs/networks.md shows them."""
    units = {"busbw": "GB/s", "us": "us", "speedup": "x"}
    lines = ["| case | network | GPUs | size | NCCL runs (model) | simulated | measured | "
             "sim/meas | source |", "|---|---|---|---|---|---|---|---|---|"]
    for r in out["rows"]:
        size = f"{r['size'] // GIB} GiB" if r["size"] >= GIB else \
            f"{r['size'] // MIB} MiB" if r["size"] >= MIB else f"{r['size']} B"
        source = r["source"].split(" ")[0]
        mark = " (sets a parameter)" if r["fitted"] else ""
        lines.append(f"| {r['name']}{mark} | {r['tag']} | {r['gpus']:,} | {size} | {r['ran']} | "
                     f"{r['simulated']:.2f} {units[r['unit']]} | {r['measured']:g} | "
                     f"{r['ratio']:.3f} | [{source.split('/')[-1] or source}]({source}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--json", type=Path, help="also write the rows and errors as JSON here")
    p.add_argument("--markdown", action="store_true", help="print the rows as a markdown table "
                                                            "(docs/networks.md's)")
    args = p.parse_args(argv)
    out = run()
    print(format_markdown(out) if args.markdown else format_table(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
