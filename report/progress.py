"""Progress on a terminal: one line, rewritten in place, with the time left
once the work says how far it is. Nothing at all when the stream is not a
terminal (a pipe, a file, CI) or the output is JSON.

The work calls the display with what it is doing (`progress("[2/4]
allreduce 131072 B: iteration 3/6")`) and, where it can weigh its parts,
with how much of the whole is done (`progress.done(0.42)`): the time left
is then the time so far scaled by what remains, shown once a twentieth is
done and a second has passed, so that a first slow step does not promise
an hour.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

MIN_FRACTION, MIN_SECONDS = 0.05, 1.0


def time_left(fraction: float, elapsed: float) -> Optional[float]:
    """Seconds left at this pace, None while too little is done to say."""
    if fraction < MIN_FRACTION or elapsed < MIN_SECONDS or fraction >= 1:
        return None
    return elapsed * (1 - fraction) / fraction


def left_text(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


class Progress:
    """The one-line display (the module docstring); `clock` for tests."""

    def __init__(self, stream: TextIO = None, enabled: Optional[bool] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.clock, self.start = clock, clock()
        self.fraction, self.message = 0.0, ""

    def __call__(self, message: str) -> None:
        self.message = message
        self._show()

    def done(self, fraction: float) -> None:
        """How much of the whole is done, 0 to 1."""
        self.fraction = min(1.0, max(self.fraction, fraction))
        self._show()

    def line(self) -> str:
        left = time_left(self.fraction, self.clock() - self.start)
        return f"# {self.message}" + (f" ({left_text(left)})" if left is not None else "")

    def _show(self) -> None:
        if not self.enabled:
            return
        if self.message == "done":
            self.stream.write("\r\033[K")
        else:
            self.stream.write(f"\r\033[K{self.line()}")
        self.stream.flush()


def quiet(message: str) -> None:
    """The display for JSON output and for tests: nothing."""
