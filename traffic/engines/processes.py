"""Per-rank processes driven with JSON lines: the rank agents' and the Scapy
engine's common driver.

One long-lived process per rank runs in its endpoint's namespace (started by
the lab, so the lab stops it at teardown if the engine cannot), reads
commands as JSON lines on stdin and answers with JSON lines on stdout
(traffic/programs/jsonlines.py is the other side). An error line from any
rank, a rank that exits or one that does not answer in time becomes a
CheckError in one sentence.
"""

from __future__ import annotations

import json
import selectors
import subprocess
from typing import Dict, List, Sequence
import time

from lab.processes import stop_process
from lab.processes import CheckError


class AgentProcesses:
    def __init__(self, lab, ranks: Sequence[str], argv_for_rank, timeout: float = 60):
        self.lab, self.ranks, self.timeout = lab, list(ranks), timeout
        self.procs = [lab.popen(s, argv_for_rank(r, s), stdin=subprocess.PIPE, text=True,
                                bufsize=1) for r, s in enumerate(self.ranks)]
        self.selector = selectors.DefaultSelector()
        for rank, proc in enumerate(self.procs):
            self.selector.register(proc.stdout, selectors.EVENT_READ, rank)
        self.collect("ready")

    @property
    def n(self) -> int:
        return len(self.procs)

    def send(self, msg: dict) -> None:
        line = json.dumps(msg) + "\n"
        for rank, proc in enumerate(self.procs):
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise CheckError(f"the rank {rank} agent ({self.ranks[rank]}) is gone") from None

    def collect(self, event: str, timeout: float = None) -> List[dict]:
        """One `event` line from every process; an error line from any is raised.
        `timeout` bounds the wait for the next reply, not for all of them: a
        slow host that brings up 256 agents one after another still gets
        there, a stuck agent is still found."""
        replies: Dict[int, dict] = {}
        patience = timeout or self.timeout
        deadline = time.monotonic() + patience
        while len(replies) < self.n:
            left = deadline - time.monotonic()
            if left <= 0:
                late = [self.ranks[r] for r in range(self.n) if r not in replies]
                raise CheckError(f"agents on {', '.join(late[:4])} did not report "
                                 f"'{event}' ({len(replies)} of {self.n} did; none for "
                                 f"{patience:.0f} s)")
            for key, _ in self.selector.select(timeout=left):
                replies[key.data] = self._read(key)
                deadline = time.monotonic() + patience
        return [replies[r] for r in range(self.n)]

    def _read(self, key) -> dict:
        line = key.fileobj.readline()
        if not line:
            err = self.procs[key.data].stderr.read()[-300:]
            raise CheckError(f"the rank {key.data} agent exited: {err.strip()}")
        try:
            msg = json.loads(line)
        except ValueError:
            raise CheckError(f"the rank {key.data} agent said {line.strip()[:200]!r}") from None
        if msg.get("event") == "error":
            raise CheckError(f"rank {msg['rank']} ({self.ranks[msg['rank']]}): {msg['message']}")
        return msg

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
        except CheckError:
            pass
        for proc in self.procs:
            stop_process(proc, grace=5, ask=False)       # told to quit: give it time
        self.selector.close()
