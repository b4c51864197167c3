"""Rank processes driven with JSON lines: the rank agents' and the Scapy
engine's common driver.

Long-lived processes, each hosting a group of ranks (one rank, or a server's
ranks), run in the namespace of their group's first endpoint (started by the
lab, so the lab stops them at teardown if the engine cannot), read commands
as JSON lines on stdin and answer with one JSON line per hosted rank on
stdout (programs/jsonlines.py is the other side). An error line from
any rank, a process that exits or a rank that does not answer in time
becomes a CheckError in one sentence.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
from typing import Dict, List, Sequence

from lab.processes import CheckError, stop_process, tree_cpu_seconds
from lab.progress_wait import wait_progressing

STALL_CAP = 20      # replies' patience times this: an agent busy but never answering


class AgentProcesses:
    def __init__(self, lab, ranks: Sequence[str], argv_for_group,
                 groups: Sequence[Sequence[int]] = None, timeout: float = 60):
        """`ranks` names each rank's endpoint; `groups` says which ranks each
        process hosts (default: one process per rank); `argv_for_group(group,
        endpoint)` is the command line of the process hosting `group`, which
        starts in `endpoint`'s namespace."""
        self.lab, self.ranks, self.timeout = lab, list(ranks), timeout
        self.groups = [list(g) for g in groups] if groups else [[r] for r in range(len(ranks))]
        self.procs = [lab.popen(self.ranks[g[0]], argv_for_group(g, self.ranks[g[0]]),
                                stdin=subprocess.PIPE, text=True, bufsize=1)
                      for g in self.groups]
        self.selector = selectors.DefaultSelector()
        self.partial = [b""] * len(self.procs)
        for index, proc in enumerate(self.procs):
            self.selector.register(proc.stdout, selectors.EVENT_READ, index)
        self.collect("ready")

    @property
    def n(self) -> int:
        return len(self.ranks)

    def send(self, msg: dict) -> None:
        line = json.dumps(msg) + "\n"
        for group, proc in zip(self.groups, self.procs):
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise CheckError(f"the agent of rank {group[0]} ({self.ranks[group[0]]}) "
                                 "is gone") from None

    def collect(self, event: str, timeout: float = None) -> List[dict]:
        """One `event` line for every rank, in rank order; an error line from any is raised.
        `timeout` is the patience without progress: the wait fails when no
        reply came and no agent used any CPU for that long (a stuck agent),
        or when no reply came for STALL_CAP times that long although the
        agents kept busy (one spinning). A slow or loaded host that brings
        up 256 agents one after another still gets there."""
        replies: Dict[int, dict] = {}
        patience = timeout or self.timeout

        def all_in():
            for key, _ in self.selector.select(timeout=min(0.5, patience)):
                for msg in self._read(key.data):
                    replies[msg["rank"]] = msg
            return len(replies) >= self.n

        counted = [-1]

        def progress():
            # the agents' CPU only while no reply comes: 256 of them answer at once
            if len(replies) != counted[0]:
                counted[0] = len(replies)
                return counted[0], None
            return counted[0], self._cpu()

        while True:
            count = len(replies)
            waited = wait_progressing(all_in, progress, stall_s=patience,
                                      cap_s=STALL_CAP * patience, interval=0)
            if waited.ready:
                return [replies[r] for r in range(self.n)]
            if len(replies) == count:
                late = [self.ranks[r] for r in range(self.n) if r not in replies]
                raise CheckError(f"agents on {', '.join(late[:4])} did not report "
                                 f"'{event}' ({len(replies)} of {self.n} did; "
                                 f"{waited.reason('they')})")

    def _cpu(self) -> float:
        return tree_cpu_seconds(*(proc.pid for proc in self.procs))

    def _read(self, index: int) -> List[dict]:
        """The whole lines process `index` has written. Read from the pipe
        itself: a process answers with several lines at once, and lines
        sitting in a file object's buffer would not wake the selector."""
        chunk = os.read(self.procs[index].stdout.fileno(), 1 << 16)
        first = self.groups[index][0]
        if not chunk:
            err = self.procs[index].stderr.read()[-300:]
            raise CheckError(f"the agent of rank {first} exited: {err.strip()}")
        *lines, self.partial[index] = (self.partial[index] + chunk).split(b"\n")
        return [self._parse(line.decode(errors="replace"), first) for line in lines]

    def _parse(self, line: str, first: int) -> dict:
        try:
            msg = json.loads(line)
        except ValueError:
            raise CheckError(f"the agent of rank {first} said {line.strip()[:200]!r}") from None
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
