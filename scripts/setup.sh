#!/usr/bin/env bash
# Idempotent set-up for the fabric lab, shared by the README, .ci/run and the
# Vagrantfile: Debian/Ubuntu packages, the Open vSwitch daemons, and the Python
# environment in .venv. The second run checks and returns in well under a second.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY=/usr/bin/python3
PACKAGES=(mininet openvswitch-switch iperf3 iperf tcpdump ethtool iputils-ping fping
          iproute2 procps python3 python3-venv python-is-python3 make
          debootstrap)   # the test bed's machines (scripts/lab testbed)

say() { printf 'set-up: %s\n' "$*"; }
die() { printf 'set-up: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (it installs packages and starts Open vSwitch): run it with sudo."
command -v dpkg-query >/dev/null && command -v apt-get >/dev/null \
  || die "this script supports Debian and Ubuntu (apt) only."

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# Open vSwitch: systemd starts it on a normal machine; containers and CI have no
# init, so start the daemons with ovs-ctl. ovs-ctl will not start ovs-vswitchd
# when the kernel has module support but no openvswitch module (a container);
# then start it directly: the lab uses the userspace datapath there anyway.
OVS_RUN=/var/run/openvswitch
ovs_up() {
  ovs-vsctl --timeout=3 show >/dev/null 2>&1 \
    && ovs-appctl --timeout=3 -t ovs-vswitchd version >/dev/null 2>&1
}
# The userspace datapath sends every frame of every switch port through one
# packet socket, whose send buffer (net.core.wmem_default when the socket
# opens) holds every frame waiting in any shaped egress queue of the fabric:
# at Linux's default, 208 KiB, a dozen 9000-byte frames. Frames past it were
# dropped where no queue counts them (ovs-vswitchd.log: "error sending
# Ethernet packet ... Resource temporarily unavailable"), and TCP lost 5% of
# its segments on a 4-server ring. Raise it, for this boot and the next,
# before ovs-vswitchd opens that socket; lab/host.py OVS_SEND_BUFFER checks it.
OVS_SEND_BUFFER=$((64 << 20))
sysctl -q -w net.core.wmem_default=$OVS_SEND_BUFFER
printf '# fabric lab: scripts/setup.sh\nnet.core.wmem_default = %s\n' "$OVS_SEND_BUFFER" \
  > /etc/sysctl.d/60-fabric-lab.conf
# DCTCP, for the lab's ECN (lab/ecn.py), where the kernel has it: a network
# namespace may set only a congestion control the host allows (Linux keeps
# the others to the first namespace), so allow it; nothing is chosen here.
# A kernel without modules (this project's CI host) has no DCTCP: nothing to do.
CC=/proc/sys/net/ipv4
if { grep -qw dctcp "$CC/tcp_available_congestion_control" || modprobe -q tcp_dctcp 2>/dev/null; } \
   && ! grep -qw dctcp "$CC/tcp_allowed_congestion_control"; then
  sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$(cat "$CC/tcp_allowed_congestion_control") dctcp" \
    || say "warning: DCTCP could not be allowed: the lab's ECN runs without it"
fi
send_buffer() {         # of the running ovs-vswitchd's sending socket, if it has one yet
  ss -0 -m -a -p 2>/dev/null | grep -F '"ovs-vswitchd"' | grep -F '[0]:*' \
    | grep -o 'tb[0-9]*' | head -1 | tr -d tb
}
if ovs_up; then
  have=$(send_buffer || true)
  if [ -n "$have" ] && [ "$have" -lt "$OVS_SEND_BUFFER" ]; then
    if [ -z "$(ovs-vsctl --timeout=3 list-br)" ]; then
      say "restarting Open vSwitch (no bridges) so its send buffer is $((OVS_SEND_BUFFER >> 20)) MiB"
      if [ -d /run/systemd/system ]; then
        systemctl restart openvswitch-switch || true
      else
        /usr/share/openvswitch/scripts/ovs-ctl stop >/dev/null 2>&1 || true
      fi
    else
      say "warning: Open vSwitch's send buffer is $((have >> 10)) KiB and it has bridges," \
          "so it was not restarted: restart it when they are gone, or queued frames past" \
          "that are dropped uncounted"
    fi
  fi
fi
if ! ovs_up; then
  say "starting Open vSwitch"
  if [ -d /run/systemd/system ]; then
    systemctl start openvswitch-switch || true
  else
    /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null 2>&1 || true
  fi
  if ! ovs-appctl --timeout=3 -t ovs-vswitchd version >/dev/null 2>&1 \
      && ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
    ovs-vswitchd "unix:$OVS_RUN/db.sock" -vconsole:emer -vsyslog:err -vfile:info --no-chdir \
      --log-file=/var/log/openvswitch/ovs-vswitchd.log --pidfile="$OVS_RUN/ovs-vswitchd.pid" \
      --detach --monitor
  fi
  ovs_up || die "Open vSwitch did not start (see /var/log/openvswitch/)."
fi

# Python environment: Debian's python3 (the one Debian's mininet module is built
# for), project and pinned dependencies from setup.cfg, Debian's mininet linked in.
stamp="$VENV/.fabric-lab-setup"
want=$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" "$0" | sha256sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "building the Python environment in .venv"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  "$VENV/bin/pip" install -q -e "$ROOT[test,traces]" 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c "import os_ken, scapy, yaml, networkx, pytest, hta" \
    || die "the Python environment is incomplete (pip install failed above)."
  site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  ln -sfn "$("$PY" -c 'import mininet, os; print(os.path.dirname(mininet.__file__))')" "$site/mininet"
  echo "$want" > "$stamp"
fi
say "ready (packages, Open vSwitch, .venv)"
