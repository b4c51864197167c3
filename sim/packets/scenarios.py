"""The scenarios the packet engine was built for, each runnable under any
preset, and the figures each reports (summary.py):

- incast: 16 senders, each at 400G, into one 400G port of one switch (or
  at whatever rate the overrides set: the tcp preset's lab comparison runs
  it at 50 Mbit/s with a 64-packet drop-tail queue);
- AllToAll: every NIC of a 2-tier leaf-spine sends an equal share to every
  other; the routing is the preset's (ECMP per flow for RoCE, d-mod-k for
  InfiniBand, per-packet adaptive for Spectrum-X); effective bandwidth is
  each NIC's bytes over the completion time, as a fraction of its line rate;
- permutation: every NIC sends to the NIC at the same place under the next
  leaf (a ring step of a hierarchical collective: all of it crosses the
  spines), each connection spread over `qps` queue pairs; with ECMP a QP is
  a flow hashed on its own, so more QPs is more entropy (Meta's E-ECMP with
  QP scaling);
- victim: a flow that shares its leaf's uplink with part of an incast but
  goes to an idle receiver; under PFC the incast's pauses spread up to that
  uplink and stall it too (head-of-line blocking), under DCQCN they should not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from sim.packets import columns as lo
from sim.packets.engine import FOREVER, Run, simulate
from sim.packets.presets import preset
from sim.packets.summary import figures, throughputs
from sim.packets.wiring import leaf_spine, single_switch


@dataclass
class Outcome:
    run: Run
    figures: Dict[str, float]


def packets(p, nbytes: float) -> int:
    return max(1, int(np.ceil(nbytes / p.value("mtu_bytes"))))


def incast(name: str, senders: int = 16, per_sender_bytes: Optional[float] = 4e6,
           horizon_us: float = 20_000, seed: int = 1,
           overrides: Optional[Dict[str, float]] = None) -> Outcome:
    """`senders` NICs into one; continuous for the horizon when
    per_sender_bytes is None; `overrides` changes some of the preset's
    numbers (Preset.with_values: for tcp, e.g. link_gbps, mtu_bytes,
    header_bytes, queue_limit_pkts, switch_latency_ns, rto_min_ms)."""
    p = preset(name).with_values(**(overrides or {}))
    size = FOREVER if per_sender_bytes is None else packets(p, per_sender_bytes)
    w = single_switch(senders + 1)
    run = simulate(p, w, [(i, senders, size) for i in range(senders)], horizon_us, seed)
    fig = figures(run)
    # a packet's way out and its ACK's (or NAK's) back, with no queue
    delays = run.links[:, lo.L_DELAY]
    path = delays[w.link_to(0, senders + 1)] + delays[w.link_to(senders + 1, senders)]
    fig["base_rtt_ms"] = (path + run.feedback_slots) * run.slot_ps * 1e-9
    return Outcome(run, fig)


def alltoall(name: str, leaves: int = 8, per_leaf: int = 8, spines: int = 8,
             per_pair_bytes: Optional[float] = 256e3, horizon_us: float = 20_000,
             seed: int = 1) -> Outcome:
    """AllToAll with `per_pair_bytes` from every NIC to every other (None:
    continuous for the horizon)."""
    p = preset(name)
    w = leaf_spine(leaves, per_leaf, spines)
    n = w.n_hosts
    size = FOREVER if per_pair_bytes is None else packets(p, per_pair_bytes)
    flows = [(a, b, size) for a in range(n) for b in range(n) if a != b]
    run = simulate(p, w, flows, horizon_us, seed)
    fig = figures(run)
    fig["effective"] = effective_bandwidth(run)
    return Outcome(run, fig)


def effective_bandwidth(run: Run) -> float:
    """Payload each NIC delivered per second of the collective, over its line
    rate: 1.0 is every NIC sending at 400G from start to end. Counted to the
    last completion (or to the end of the run, for continuous flows)."""
    FL = run.flows
    done = FL[:, lo.F_DONE]
    end = done.max() + 1 if (done >= 0).all() else run.slots
    # one packet a slot is the line rate (headers included), so packets
    # delivered per slot is the fraction of it the payload got
    per_nic = FL[:, lo.F_DELIV].sum() / run.wiring.n_hosts
    return float(per_nic / end)


def permutation(name: str, leaves: int = 8, per_leaf: int = 8, spines: int = 8, qps: int = 1,
                per_pair_bytes: float = 4e6, horizon_us: float = 20_000,
                seed: int = 1) -> Outcome:
    """NIC i to NIC i + per_leaf (mod the NICs), `per_pair_bytes` spread over
    `qps` flows; figures over all flows, effective bandwidth per NIC."""
    if qps < 1:
        raise ValueError(f"a connection needs at least one queue pair, not {qps}")
    p = preset(name)
    w = leaf_spine(leaves, per_leaf, spines)
    n = w.n_hosts
    size = packets(p, per_pair_bytes / qps)
    flows = [(a, (a + per_leaf) % n, size) for a in range(n) for _ in range(qps)]
    run = simulate(p, w, flows, horizon_us, seed)
    fig = figures(run)
    fig["effective"] = effective_bandwidth(run)
    return Outcome(run, fig)


def victim(name: str, local: int = 7, remote: int = 4, horizon_us: float = 3_000,
           seed: int = 1) -> Outcome:
    """Two leaves under one spine. Leaf B: the incast receiver R, an idle
    receiver W and `local` incast senders; leaf A: `remote` incast senders
    and the victim V, which sends to W. V shares only A's uplink with the
    incast. All continuous; the figures are the incast's, plus the victim's
    throughput and its fair share without spreading (its uplink's rest)."""
    p = preset(name)
    per_leaf = max(local + 2, remote + 1)
    w = leaf_spine(2, per_leaf, 1)
    r, wv = per_leaf, per_leaf + 1
    senders = [per_leaf + 2 + i for i in range(local)] + list(range(remote))
    v = per_leaf - 1
    flows = [(s, r, FOREVER) for s in senders] + [(v, wv, FOREVER)]
    run = simulate(p, w, flows, horizon_us, seed)
    fig = figures(run, np.arange(len(senders)))
    line = p.value("link_gbps") * p.value("mtu_bytes") / (p.value("mtu_bytes")
                                                          + p.value("header_bytes"))
    fig["victim_gbps"] = float(throughputs(run, np.array([len(senders)]))[0])
    fig["victim_fair_gbps"] = line - remote * line / len(senders)
    return Outcome(run, fig)
