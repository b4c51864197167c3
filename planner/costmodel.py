"""The plan's AllReduce: its GPUs, servers, NICs and link rates as the
alpha and beta of the closed forms in sim/closed_form.py, which price it
(a flat ring and the hierarchical AllReduce, pipelined as NCCL runs it);
nothing is priced here.

beta = 8 / (Gbit/s * 1e9 * efficiency) seconds a byte. `predict_allreduce`
has the flat ring priced at the scale-out link for every hop (the design
without scale-up) and the hierarchical one with NVLink inside the server
(``NVLINK_GBPS`` unless told otherwise). When a server has fewer NICs than
GPUs, the g/nics GPUs sharing a NIC share its rate: b_inter is multiplied
by g/nics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from planner import inputs as check
from sim.closed_form import hierarchical_allreduce_seconds, ring_allreduce_seconds

# H100 SXM: 18 NVLink-4 links x 25 GB/s per direction = 450 GB/s = 3,600 Gbit/s.
NVLINK_GBPS = 3600.0


@dataclass(frozen=True)
class Links:
    """What `predict_allreduce` prices an AllReduce at: the latency of a step
    (`alpha_s`; `intra_alpha_s` inside a server, alpha_s when None), the rate
    of the scale-out link (`link_gbps`; None: the plan's, 400 without one) and
    of NVLink inside a server (`intra_gbps`; None: NVLINK_GBPS), and the share
    of those rates a transfer reaches (`efficiency`)."""
    alpha_s: float = 5e-6
    link_gbps: Optional[float] = None
    intra_gbps: Optional[float] = None
    efficiency: float = 1.0
    intra_alpha_s: Optional[float] = None


def predict_allreduce(plan_or_gpus, gradient_bytes, links: Links = Links(), *,
                      gpus_per_server=None, nics_per_server=None) -> dict:
    """Flat-ring and hierarchical AllReduce times of `gradient_bytes` over the GPUs
    of a plan (the dict `plan` returns) or over a GPU count, on `links`.

    beta = 8 / (link_gbps * 1e9 * efficiency) for the scale-out link and
    8 / (intra_gbps * 1e9 * efficiency) inside a server. A server's GPUs and
    NICs and the link rate given explicitly win over the plan's inputs;
    without a plan, 8 GPUs and 8 NICs per server at 400 Gbit/s."""
    link_gbps = links.link_gbps
    if isinstance(plan_or_gpus, dict):
        inputs = plan_or_gpus.get("inputs", plan_or_gpus)
        gpus = inputs.get("gpus")
        if gpus_per_server is None:
            gpus_per_server = inputs.get("gpus_per_server")
        if nics_per_server is None:
            nics_per_server = inputs.get("nics_per_server")
        if link_gbps is None:
            link_gbps = inputs.get("link_gbps")
    else:
        gpus = plan_or_gpus
    gpus = check.whole("gpus", gpus, 1, check.MAX_GPUS)
    g = check.whole("gpus_per_server", 8 if gpus_per_server is None else gpus_per_server,
                    1, check.MAX_GPUS_PER_SERVER)
    nics = check.nics_per_server(g if nics_per_server is None else nics_per_server, g)
    link_gbps = check.positive("link_gbps", 400.0 if link_gbps is None else link_gbps)
    intra_gbps = check.positive("intra_gbps", NVLINK_GBPS if links.intra_gbps is None
                                else links.intra_gbps)
    efficiency = check.fraction("efficiency", links.efficiency)
    S = check.non_negative("gradient_bytes", gradient_bytes)
    alpha = float(check.non_negative("alpha_s", links.alpha_s))
    intra_alpha = float(check.non_negative("intra_alpha_s", alpha if links.intra_alpha_s is None
                                           else links.intra_alpha_s))

    nodes = math.ceil(gpus / g)
    per_node = min(g, gpus)
    beta = 8.0 / (link_gbps * 1e9 * efficiency)
    beta_intra = 8.0 / (intra_gbps * 1e9 * efficiency)
    beta_inter = beta * per_node / min(nics, per_node)     # GPUs sharing a NIC share its rate
    ring = ring_allreduce_seconds(gpus, S, alpha, beta)
    hier = hierarchical_allreduce_seconds(nodes, per_node, S, intra_alpha, beta_intra, alpha, beta_inter)
    return {
        "gpus": gpus, "nodes": nodes, "gpus_per_node": per_node, "nics_per_node": min(nics, per_node),
        "gradient_bytes": S, "alpha_s": alpha, "intra_alpha_s": intra_alpha,
        "link_gbps": link_gbps, "intra_gbps": intra_gbps, "efficiency": efficiency,
        "beta_s_per_byte": beta, "intra_beta_s_per_byte": beta_intra,
        "inter_beta_s_per_byte": beta_inter,
        "ring_seconds": ring, "hierarchical_seconds": hier,
        "speedup": ring / hier if hier > 0 else 1.0,
    }
