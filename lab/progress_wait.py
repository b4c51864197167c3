"""Waiting for something whose speed the host decides: bounded by progress,
not by the clock.

A process starting up, a VM booting, an agent answering: on a loaded host,
or in a VM without KVM, each takes several times the wall time it takes on
an idle one, while doing the same work. A fixed limit (`deadline = now +
30`) then fails a test that would have passed given the time. So a wait here
gives up only when

- what it waits on stopped moving: `progress()` (CPU seconds used, bytes
  written, samples read, anything that grows while the work goes on) gave
  the same value for `stall_s` seconds: a hang that uses no CPU;
- the work that should have sufficed is done and still nothing is ready:
  `spent()` says so (the controller used 60 s of its CPU and does not
  listen): a process spinning without getting anywhere;
- `cap_s` wall seconds passed, whatever happened: a generous cap, only
  against a hang the two signals above cannot see.

Pure: the clock, the sleep and the signals are passed in, so the rules are
tested with fake ones (tests/test_progress_wait.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

READY, STALLED, SPENT, CAPPED = "ready", "stalled", "spent", "capped"
STALL_S = 30.0      # the usual patience: nothing moved for this long is a hang
CAP_S = 900.0       # the usual cap, against a hang the signals cannot see


@dataclass(frozen=True)
class Waited:
    """How a wait ended: `why` is READY (then `value` is what `ready()`
    returned), STALLED, SPENT or CAPPED; `seconds` of wall time it took,
    `still_s` of them since progress last moved."""
    why: str
    value: Any = None
    seconds: float = 0.0
    still_s: float = 0.0

    @property
    def ready(self) -> bool:
        return self.why == READY

    def reason(self, what: str = "it") -> str:
        """Why it gave up, as the end of a sentence."""
        return {STALLED: f"{what} made no progress for {self.still_s:.0f} s",
                SPENT: f"{what} did the work that should have sufficed "
                       f"({self.seconds:.0f} s in all)",
                CAPPED: f"{self.seconds:.0f} s passed (the wait's cap)",
                READY: "ready"}[self.why]


def wait_progressing(ready: Callable[[], Any], progress: Callable[[], Any], *,
                     stall_s: Optional[float], cap_s: float,
                     spent: Optional[Callable[[], bool]] = None, interval: float = 0.05,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> Waited:
    """Call `ready()` every `interval` seconds until it returns something
    truthy (returned as `value`); it may raise to end the wait (the process
    waited on exited, say). Give up as the module says: `progress()` unchanged
    for `stall_s` seconds (None: never), `spent()` true, or `cap_s` passed.
    `ready()` is always asked once more before giving up, so a thing ready
    at the last moment is not lost."""
    started = clock()
    last, moved = progress(), started
    while True:
        value = ready()
        if value:
            now = clock()
            return Waited(READY, value, now - started, now - moved)
        now = clock()
        seen = progress()
        if seen != last:
            last, moved = seen, now
        why = (CAPPED if now - started >= cap_s else
               SPENT if spent is not None and spent() else
               STALLED if stall_s is not None and now - moved >= stall_s else None)
        if why:
            value = ready()
            if value:
                return Waited(READY, value, now - started, now - moved)
            return Waited(why, None, now - started, now - moved)
        sleep(interval)
