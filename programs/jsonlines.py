"""The agents' side of the lab's JSON-lines protocol (traffic/engines/rank_processes.py
is the lab's).

A process hosts one rank or several. It announces {"event": "ready", "rank"}
for each, then answers each command read on stdin with one JSON line per
hosted rank; any exception becomes {"event": "error", "rank", "message"} and
a non-zero exit, so the lab reports it in one sentence instead of hanging.
"""

from __future__ import annotations

import json
import sys
from typing import Callable, Dict, List, Union


def say(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(ranks: Union[int, List[int]], start: Callable[[], object],
          handlers: Dict[str, Callable[[object, dict], Union[dict, List[dict]]]]) -> int:
    """Build the agent with `start()`, then answer commands until "quit" or
    the end of input: `handlers[cmd](agent, msg)` returns the reply, or a
    list of replies (one per hosted rank, each naming its rank)."""
    ranks = [ranks] if isinstance(ranks, int) else list(ranks)
    try:
        agent = start()
        for rank in ranks:
            say({"event": "ready", "rank": rank})
        for line in sys.stdin:
            msg = json.loads(line)
            if msg["cmd"] == "quit":
                break
            replies = handlers[msg["cmd"]](agent, msg)
            for reply in replies if isinstance(replies, list) else [replies]:
                say({"rank": ranks[0], **reply})
    except Exception as exc:          # noqa: BLE001 - report, then exit non-zero
        say({"event": "error", "rank": ranks[0], "message": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0
