"""A lab with BFD is ready only once every session runs at its own rate
(lab/lifecycle.py bfd_at_rate): a session starts at 1 s intervals, and a
silent failure in the second or two before its poll sequence ends took
seconds to be seen (the failover bench read 482 ms once)."""

from lab.lifecycle import bfd_at_rate

# ovs-appctl bfd/show, as Open vSwitch 3.x prints a session (shortened)
SESSION = """---- {intf} ----
	Forwarding: true
	Detect Multiplier: 3
	Concatenated Path Down: false
	TX Interval: Approx {tx}ms
	RX Interval: Approx {tx}ms
	Detect Time: now -1ms
	Next TX Time: now +8ms
	Last TX Time: now -2ms

	Local Flags: none
	Local Session State: up
	Local Minimum TX Interval: {tx}ms
	Local Minimum RX Interval: 10ms

	Remote Flags: none
	Remote Session State: up
	Remote Minimum TX Interval: {remote}ms
	Remote Minimum RX Interval: 10ms
"""


def shown(*sessions):
    return "".join(SESSION.format(intf=f"leaf1-eth{i + 2}", tx=tx, remote=remote)
                   for i, (tx, remote) in enumerate(sessions))


def test_every_session_at_its_rate_is_ready():
    assert bfd_at_rate(shown((10, 10), (10, 10)), 10)
    assert bfd_at_rate(shown((100, 100)), 100)


def test_a_session_still_at_its_slow_start_is_not():
    assert not bfd_at_rate(shown((10, 10), (1000, 1000)), 10)
    # this end is fast, its peer has not said so yet
    assert not bfd_at_rate(shown((10, 1000)), 10)
    assert not bfd_at_rate(shown((1000, 10)), 10)


def test_no_session_is_not_ready():
    assert not bfd_at_rate("", 10)
