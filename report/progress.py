"""Progress: on a terminal, one line rewritten in place with the time left
once the work says how far it is; elsewhere (a pipe, a file, CI) a plain
`#` line, flushed, each time a part of the work finishes (a size of a
sweep, a rate of --calibrate), so that a reader of the pipe sees the run
advance as nccl-tests' rows do. Nothing at all when the output is JSON.

The work calls the display with what it is doing (`progress("[2/4]
allreduce 131072 B: iteration 3/6")`), when a part is finished with what
it came to (`progress.finished("[2/4] allreduce 131072 B: ...")`) and,
where it can weigh its parts, with how much of the whole is done
(`progress.done(0.42)`): the time left is then the time so far scaled by
what remains, shown once a twentieth is done and a second has passed, so
that a first slow step does not promise an hour.
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
                 clock: Callable[[], float] = time.monotonic,
                 on_size: Optional[Callable[[dict], None]] = None):
        self.stream = stream or sys.stderr
        # told each finished size's record (an nccl-tests program prints its row)
        self.on_size = on_size
        self.enabled = self.stream.isatty() if enabled is None else enabled
        # a line per finished part where no line can be rewritten
        self.lines = enabled is None and not self.enabled
        self.clock, self.start = clock, clock()
        self.fraction, self.message = 0.0, ""

    def __call__(self, message: str) -> None:
        self.message = message
        self._show()

    def done(self, fraction: float) -> None:
        """How much of the whole is done, 0 to 1."""
        self.fraction = min(1.0, max(self.fraction, fraction))
        self._show()

    def finished(self, message: str, record: Optional[dict] = None) -> None:
        """A part of the work is done: on a terminal, the line says so; on a
        pipe or a file, a line of its own, written at once. A size's
        `record` goes to `on_size` first, the terminal's line cleared for
        what it prints."""
        if self.on_size is not None and record is not None:
            if self.enabled:
                self.stream.write("\r\033[K")
                self.stream.flush()
            self.on_size(record)
        if self.lines:
            self.message = message
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        else:
            self(message)

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
