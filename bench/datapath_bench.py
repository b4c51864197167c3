#!/usr/bin/env python3
"""What the userspace datapath moves per CPU-second of ovs-vswitchd, for each
way Open vSwitch offers here to forward (lab/datapath.py's variants), side by
side in one run, in interleaved pairs.

    sudo .venv/bin/python -m bench.datapath_bench [--variants a,b] [--rates 20,0]
        [--repeat 3] [--seconds 6] [--json out.json]

Each measurement runs in a throwaway namespace (unshare --net --pid --mount):
a private ovsdb-server and ovs-vswitchd (OVS_RUNDIR in a folder of its own),
the default fabric's shape built by hand (2 spines, 2 leaves, 4 servers, 8
links of MTU 9000, every interface shaped by lab/shaping.py's HTB, static
routes: h1<->h3 over spine1, h2<->h4 over spine2), and four iperf3 TCP flows
crossing the spines, one each way on every link. The host's Open vSwitch is
never touched; the namespace dies with the measurement.

Per measurement: link traffic (bytes sent on every link, both directions,
what the monitor counts), ovs-vswitchd's CPU-seconds (all its threads), the
host's CPU, Mbit of link traffic per ovs-vswitchd CPU-second, and the
shaping check: two flows converging on one switch port shaped at the rate
(h1, h2 -> h3) must not pass more than the rate, and that port's HTB must
have sent what the interface did (a path that bypasses the qdiscs would not).
A rate of 0 means unshaped (what the datapath can do flat out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab import datapath                       # noqa: E402
from lab.shaping import tc_commands             # noqa: E402
from topologies.fabric import LinkSpec          # noqa: E402

MTU = 9000
HOSTS = ("h1", "h2", "h3", "h4")
SWITCHES = ("leaf1", "leaf2", "spine1", "spine2")
# (a, a_port, b, b_port): the default fabric's wiring and port numbers
LINKS = (("h1", 0, "leaf1", 1), ("h2", 0, "leaf1", 2), ("h3", 0, "leaf2", 1),
         ("h4", 0, "leaf2", 2), ("leaf1", 3, "spine1", 1), ("leaf1", 4, "spine2", 1),
         ("leaf2", 3, "spine1", 2), ("leaf2", 4, "spine2", 2))
# destination host -> output port, per switch
ROUTES = {"leaf1": {1: 1, 2: 2, 3: 3, 4: 4}, "leaf2": {3: 1, 4: 2, 1: 3, 2: 4},
          "spine1": {1: 1, 2: 1, 3: 2, 4: 2}, "spine2": {1: 1, 2: 1, 3: 2, 4: 2}}
CROSSING = (("h1", "h3"), ("h3", "h1"), ("h2", "h4"), ("h4", "h2"))
CONVERGING = (("h1", "h3"), ("h2", "h3"))
UNSHAPED_MBIT = 100000


def intf(node: str, port: int) -> str:
    return f"{node}-eth{port}"


def ip(host: str) -> str:
    return f"10.0.0.{host[1:]}"


# --- inside the throwaway namespace -------------------------------------------------


class Inside:
    """One measurement's namespace: private Open vSwitch, the fabric, the flows."""

    def __init__(self, variant: str, rate: float, work: Path):
        self.variant, self.rate, self.work = variant, rate, work
        self.mtu = datapath.max_mtu(variant) or MTU
        self.env = dict(os.environ, OVS_RUNDIR=str(work), OVS_DBDIR=str(work),
                        OVS_LOGDIR=str(work))

    def sh(self, cmd: str, check: bool = True) -> str:
        p = subprocess.run(cmd, shell=True, env=self.env, capture_output=True, text=True)
        if check and p.returncode:
            raise RuntimeError(f"{cmd}: {p.stderr.strip() or p.stdout.strip()}")
        return p.stdout

    def start_ovs(self) -> None:
        w = self.work
        self.sh("mount -t sysfs sysfs /sys && mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns && ip link set lo up")
        self.sh(f"ovsdb-tool create {w}/conf.db /usr/share/openvswitch/vswitch.ovsschema")
        self.sh(f"ovsdb-server {w}/conf.db --remote=punix:{w}/db.sock --pidfile={w}/ovsdb-server.pid "
                f"--log-file={w}/ovsdb-server.log --detach --no-chdir")
        self.sh("ovs-vsctl --no-wait init")
        extra = datapath.vsctl_other_config(self.variant)
        if extra:
            self.sh("ovs-vsctl --no-wait " + " ".join(extra[1:]))
        subprocess.run(datapath.vswitchd_command(str(w), str(w), self.variant), check=True,
                       env=dict(self.env, **datapath.vswitchd_env(self.variant)))
        self.sh("ovs-appctl --timeout=10 -t ovs-vswitchd version")

    def build(self) -> None:
        rate = self.rate or UNSHAPED_MBIT
        spec = LinkSpec(rate_mbit=rate, queue_packets=32, delay_ms=0, loss_percent=0)
        MTU = self.mtu
        for h in HOSTS:
            self.sh(f"ip netns add {h} && ip -n {h} link set lo up")
        for k, sw in enumerate(SWITCHES, 1):
            self.sh(f"ovs-vsctl --timeout=20 add-br {sw} -- set bridge {sw} datapath_type=netdev "
                    f"fail_mode=secure protocols=OpenFlow13 other_config:datapath-id={k:016x}")
        tc = []
        for a, ap, b, bp in LINKS:
            ia, ib = intf(a, ap), intf(b, bp)
            self.sh(f"ip link add {ia} mtu {MTU} type veth peer name {ib} mtu {MTU}")
            if a in HOSTS:
                self.sh(f"ip link set {ia} netns {a}")
                n = f"ip netns exec {a} "
                self.sh(f"{n}sysctl -qw net.ipv6.conf.all.disable_ipv6=1 && "
                        f"{n}ip addr add {ip(a)}/24 dev {ia} && {n}ip link set {ia} address "
                        f"00:00:00:00:00:0{a[1:]} && {n}ip link set {ia} up && "
                        f"{n}ethtool -K {ia} tx off tso off gso off >/dev/null")
                for h in HOSTS:
                    if h != a:
                        self.sh(f"{n}ip neigh add {ip(h)} lladdr 00:00:00:00:00:0{h[1:]} "
                                f"dev {ia} nud permanent")
                self.sh("printf '%s\\n' " + " ".join(f"'{c}'" for c in tc_commands(ia, spec, MTU))
                        + f" | ip netns exec {a} tc -batch -")
            else:
                tc += tc_commands(ia, spec, MTU)
            tc += tc_commands(ib, spec, MTU)
            for node, i in ((a, ia), (b, ib)):
                if node in SWITCHES:
                    self.sh(f"sysctl -qw net.ipv6.conf.{i}.disable_ipv6=1 2>/dev/null; "
                            f"ip link set {i} up")
        for a, ap, b, bp in LINKS:
            for node, port in ((a, ap), (b, bp)):
                if node in SWITCHES:
                    i = intf(node, port)
                    args = ["ovs-vsctl", "--timeout=20", "add-port", node, i, "--", "set",
                            "Interface", i, f"ofport_request={port}"] + datapath.port_settings(i, self.variant)
                    subprocess.run(args, check=True, env=self.env, capture_output=True)
        # after the ports are added, as the lab does: adding a port resets its qdisc
        subprocess.run(["tc", "-batch", "-"], input="".join(c + "\n" for c in tc), text=True,
                       check=True, env=self.env)
        for sw, routes in ROUTES.items():
            flows = "".join(f"ip,nw_dst=10.0.0.{h},actions=output:{p}\n" for h, p in routes.items())
            subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", sw, "-"], input=flows,
                           text=True, check=True, env=self.env)
        for h in HOSTS:
            for port in (5201, 5202):
                self.sh(f"ip netns exec {h} iperf3 -s -D -p {port}")
        time.sleep(0.5)
        for h in HOSTS[1:]:
            out = self.sh(f"ip netns exec h1 ping -c 2 -i 0.2 -W 2 {ip(h)}", check=False)
            if " 0% packet loss" not in out and " 50% packet loss" not in out:
                raise RuntimeError(f"h1 does not reach {h} with {self.variant}: {out[-200:]}")

    def ovs_cpu(self) -> float:
        pid = (self.work / "ovs-vswitchd.pid").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def host_cpu() -> tuple:
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return v[3] + v[4], sum(v)

    def link_bytes(self) -> int:
        """Bytes sent on every link, both directions: each interface's tx."""
        total = 0
        for a, ap, b, bp in LINKS:
            for node, port in ((a, ap), (b, bp)):
                i = intf(node, port)
                pre = f"ip netns exec {node} " if node in HOSTS else ""
                total += int(self.sh(f"{pre}cat /sys/class/net/{i}/statistics/tx_bytes"))
        return total

    def qdisc_sent(self, i: str) -> int:
        out = json.loads(self.sh(f"tc -s -j qdisc show dev {i}"))
        return sum(q.get("bytes", 0) for q in out if q.get("root"))

    def flows(self, pairs, seconds: float) -> dict:
        procs = [subprocess.Popen(f"ip netns exec {s} iperf3 -c {ip(d)} -p {5201 + k % 2} "
                                  f"-t {seconds} -J", shell=True, stdout=subprocess.PIPE,
                                  text=True, env=self.env)
                 for k, (s, d) in enumerate(pairs)]
        time.sleep(1.0)
        watched = intf("leaf2", 1)
        b0, c0, h0, q0 = self.link_bytes(), self.ovs_cpu(), self.host_cpu(), self.qdisc_sent(watched)
        i0 = int(Path(f"/sys/class/net/{watched}/statistics/tx_bytes").read_text())
        t0 = time.monotonic()
        time.sleep(seconds - 2.0)
        b1, c1, h1, q1 = self.link_bytes(), self.ovs_cpu(), self.host_cpu(), self.qdisc_sent(watched)
        i1 = int(Path(f"/sys/class/net/{watched}/statistics/tx_bytes").read_text())
        dt = time.monotonic() - t0
        goodput = []
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 30)
            try:
                goodput.append(json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6)
            except (ValueError, KeyError):
                goodput.append(0.0)
        idle, total = h1[0] - h0[0], h1[1] - h0[1]
        ovs_s = c1 - c0
        link_mbit = (b1 - b0) * 8 / 1e6
        return {"link_mbit_s": round(link_mbit / dt, 1), "ovs_cpu_s": round(ovs_s, 2),
                "ovs_core_pct": round(100 * ovs_s / dt), "host_cpu_pct": round(100 * (1 - idle / total)),
                "mbit_per_ovs_cpu_s": round(link_mbit / ovs_s) if ovs_s > 0 else None,
                "goodput_mbit": [round(g, 1) for g in goodput],
                "watched_port_mbit": round((i1 - i0) * 8 / 1e6 / dt, 1),
                "watched_qdisc_share": round((q1 - q0) / (i1 - i0), 3) if i1 > i0 else None}


def inside_main(args) -> int:
    work = Path(args.work)
    box = Inside(args.variant, args.rate, work)
    box.start_ovs()
    box.build()
    out = {"variant": args.variant, "rate": args.rate}
    out["crossing"] = box.flows(CROSSING, args.seconds)
    if args.rate:
        out["converging"] = box.flows(CONVERGING, args.seconds)
    print("RESULT " + json.dumps(out), flush=True)
    return 0


# --- the host side: one namespace per measurement -----------------------------------


def measure(variant: str, rate: float, seconds: float) -> dict:
    work = Path(f"/tmp/datapath-bench-{os.getpid()}-{variant}-{int(time.time() * 1000)}")
    work.mkdir(parents=True)
    cmd = ["unshare", "--net", "--pid", "--mount", "--mount-proc", "--fork", "--kill-child",
           sys.executable, "-m", "bench.datapath_bench", "--inside", "--variant", variant,
           "--rate", str(rate), "--seconds", str(seconds), "--work", str(work)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"variant": variant, "rate": rate,
            "error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def vswitchd_wrapper(variant: str, folder: Path) -> Path:
    """A folder holding an `ovs-vswitchd` that starts the real one as the
    variant asks (its environment, its other_config, its command line): a lab
    run with this folder first on its PATH starts its own Open vSwitch
    (lab/sandbox.py) that way, and nothing else of the lab changes."""
    real = subprocess.run(["sh", "-c", "command -v ovs-vswitchd"], capture_output=True,
                          text=True, check=True).stdout.strip()
    env = " ".join(f"{k}={v}" for k, v in datapath.vswitchd_env(variant).items())
    config = datapath.vsctl_other_config(variant)
    lines = ["#!/bin/sh"]
    if config:
        lines.append("ovs-vsctl --no-wait " + " ".join(config[1:]))
    extra = " ".join(datapath.VARIANTS[variant].get("args", []))
    lines.append(f'exec env {env} {real} "$@" {extra}')
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "ovs-vswitchd"
    wrapper.write_text("\n".join(lines) + "\n")
    wrapper.chmod(0o755)
    return folder


def within(variants, repeat: int, command, keep) -> int:
    """A command of this repository (run_topology.py --calibrate, a
    benchmark) run once per variant, interleaved, each lab starting its own
    Open vSwitch the variant's way; the lines `keep` picks from each output."""
    for k in range(repeat):
        for v in variants:
            work = Path(f"/tmp/datapath-bench-{os.getpid()}-{v}-{k}")
            bindir = vswitchd_wrapper(v, work / "bin")
            env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
            p = subprocess.run([sys.executable] + command, cwd=REPO, capture_output=True,
                               text=True, timeout=3600, env=env)
            (work / "output.txt").write_text(p.stdout + p.stderr)
            lines = [l for l in p.stdout.splitlines() if keep(l)]
            print(f"## {v} (run {k + 1}; {work})")
            print("\n".join(lines) or (p.stdout + p.stderr)[-1500:], flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=f"{datapath.BEFORE},{datapath.ADOPTED}")
    parser.add_argument("--rates", default="20,0", help="Mbit/s per link; 0: unshaped")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--calibrate", action="store_true",
                        help="run_topology.py --calibrate on the default fabric with each variant")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--within", metavar="ARGS",
                        help="run this python command line (its arguments) with each variant")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=20, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside_main(args)
    if os.geteuid() != 0:
        print("datapath_bench needs root (namespaces, Open vSwitch)", file=sys.stderr)
        return 1
    variants = list(dict.fromkeys(args.variants.split(",")))
    if args.calibrate:
        return within(variants, args.repeat, ["run_topology.py", "--calibrate"],
                      lambda l: l.startswith("#") or l[:16].strip().isdigit())
    if args.within:
        return within(variants, args.repeat, args.within.split(), lambda l: True)
    rates = [float(r) for r in args.rates.split(",")]
    rows = []
    print(f"{'rate':>6} {'variant':<22} {'link Mbit/s':>11} {'ovs core':>8} {'host CPU':>8} "
          f"{'Mbit/ovs-CPU-s':>14} {'converging Mbit/s':>17} {'HTB saw':>7}")
    for rate in rates:
        for k in range(args.repeat):
            for v in variants:                   # interleaved: a, b, a, b, ...
                r = measure(v, rate, args.seconds)
                rows.append(r)
                label = f"{rate:g}" if rate else "flat"
                if "error" in r:
                    print(f"{label:>6} {v:<22} error: {r['error']}", flush=True)
                    continue
                c, g = r["crossing"], r.get("converging", {})
                print(f"{label:>6} {v:<22} {c['link_mbit_s']:>11} {c['ovs_core_pct']:>7}% "
                      f"{c['host_cpu_pct']:>7}% {str(c['mbit_per_ovs_cpu_s'] or '-'):>14} "
                      f"{round(sum(g.get('goodput_mbit', [])), 1) or '-':>17} "
                      f"{str(g.get('watched_qdisc_share', '-')):>7}", flush=True)
    print("# medians")
    for rate in rates:
        for v in variants:
            ok = [r["crossing"]["mbit_per_ovs_cpu_s"] for r in rows
                  if r["variant"] == v and r["rate"] == rate and "error" not in r
                  and r["crossing"]["mbit_per_ovs_cpu_s"]]
            if ok:
                print(f"{rate:>6g} {v:<22} Mbit per ovs-vswitchd CPU-second: median "
                      f"{statistics.median(ok):g} ({', '.join(map(str, ok))})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
