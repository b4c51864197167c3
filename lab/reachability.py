"""Checks run on a live lab before traffic: every endpoint reaches every
other (fping, paced), and a server is listening on a port."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

from lab.processes import CheckError, communicate_progressing, tree_cpu_seconds
from lab.progress_wait import CAP_S, STALL_S, wait_progressing

PINGS_PER_SECOND = 4000


@dataclass
class Reachability:
    ok: int = 0
    total: int = 0
    failures: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.ok == self.total


def all_pairs_reachability(lab, sources: Sequence[str] = (), attempts: int = 4) -> Reachability:
    """Ping every other server from every server (or from `sources`), at the
    address collectives use (a GPU of the same server at its NVLink address:
    over the NVSwitch, or the mesh link between the two); each
    server runs its pings in sequence, all servers at once. The pairs that
    fail are retried, each time four times slower and waiting three times
    longer for the answer, so neither a first ARP exchange nor a host slower
    than this one fails a pair on timing alone."""
    fabric = lab.fabric
    endpoints = list(fabric.endpoints)
    sources = list(sources) or [h.name for h in endpoints]
    pending = {src: [h.address_from(fabric.endpoint(src)) for h in endpoints if h.name != src]
               for src in sources}
    ip_name = {**{h.ip: h.name for h in endpoints}, **{h.nv_ip: h.name for h in endpoints if h.nv_ip}}
    result = Reachability(total=sum(len(v) for v in pending.values()))
    # all sources together send about PINGS_PER_SECOND echoes: a userspace
    # datapath forwarding each over several switches must keep up
    gap_ms = max(1, round(len(sources) * 1000 / PINGS_PER_SECOND))
    wait_ms = 1000
    for attempt in range(attempts):
        if attempt:
            gap_ms, wait_ms = gap_ms * 4, wait_ms * 3
        procs = {}
        for src, ips in pending.items():
            if not ips:
                continue
            order = sorted(ips, key=lambda ip: hash((src, ip)))   # no synchronised hot spots
            procs[src] = lab.popen(src, ["sh", "-c", _ping_script(order, gap_ms, wait_ms)],
                                   text=True)
        still = {}
        for src, proc in procs.items():
            out = pings_output(src, proc, len(pending[src]), gap_ms, wait_ms)
            ok = {line.split()[1] for line in out.splitlines() if line.startswith("ok ")}
            still[src] = [ip for ip in pending[src] if ip not in ok]
            result.ok += len(ok & set(pending[src]))
        pending = still
    result.failures = [(src, ip_name[ip]) for src, ips in pending.items() for ip in ips]
    return result


def pings_output(src: str, proc, count: int, gap_ms: int, wait_ms: int) -> str:
    """What a source's pings printed, once they end: bounded by their
    progress (the CPU of the shell, fping and sed), not the clock. fping
    may rightly sit still for an answer's whole wait (`wait_ms`, twice with
    its retry), so only a longer stillness is a hang."""
    schedule = count * (2 * wait_ms + gap_ms) / 1000
    return communicate_progressing(proc, f"the pings from {src}",
                                   stall_s=STALL_S + 2 * wait_ms / 1000,
                                   cap_s=CAP_S + schedule)[0]


def _ping_script(ips: Sequence[str], gap_ms: int = 1, wait_ms: int = 1000) -> str:
    """One echo each (one retry), printing "ok <ip>" for each answer: fping
    (one process for all, `gap_ms` apart, `wait_ms` for an answer) where it
    is installed, else ping in a loop."""
    listed = " ".join(ips)
    return (f"if command -v fping >/dev/null; then "
            f"fping -a -r 1 -t {wait_ms} -i {gap_ms} {listed} 2>/dev/null | sed 's/^/ok /'; "
            f"else for d in {listed}; do "
            f"if ping -n -q -c1 -W{max(1, wait_ms // 1000)} $d >/dev/null 2>&1; then echo ok $d; "
            "else echo fail $d; fi; done; fi")


def wait_listening(lab, server: str, port: int, proc) -> None:
    """Until `proc`, started on `server`, listens on `port`: bounded by its
    progress (its CPU), not the clock; its exit ends the wait at once."""
    host = lab.host(server)

    def listening():
        if host.cmd(f"ss -Hltn 'sport = :{port}'").strip():
            return True
        if proc.poll() is not None:
            raise CheckError(f"the server on {server}:{port} exited before it listened")
        return False
    waited = wait_progressing(listening, lambda: tree_cpu_seconds(proc.pid), stall_s=STALL_S,
                              cap_s=CAP_S)
    if not waited.ready:
        raise CheckError(f"nothing listens on {server}:{port}: "
                         f"{waited.reason('its server')}")
