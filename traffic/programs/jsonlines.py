"""The agents' side of the lab's JSON-lines protocol (see replay.AgentProcesses).

An agent announces {"event": "ready"}, then answers each command read on stdin
with one JSON line; any exception becomes {"event": "error", "message"} and a
non-zero exit, so the lab reports it in one sentence instead of hanging.
"""

from __future__ import annotations

import json
import sys
from typing import Callable, Dict


def say(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(rank: int, start: Callable[[], object],
          handlers: Dict[str, Callable[[object, dict], dict]]) -> int:
    """Build the agent with `start()`, then answer commands until "quit" or
    the end of input: `handlers[cmd](agent, msg)` returns the reply."""
    try:
        agent = start()
        say({"event": "ready", "rank": rank})
        for line in sys.stdin:
            msg = json.loads(line)
            if msg["cmd"] == "quit":
                break
            say(handlers[msg["cmd"]](agent, msg))
    except Exception as exc:          # noqa: BLE001 - report, then exit non-zero
        say({"event": "error", "rank": rank, "message": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0
