"""The controller's status file: a small JSON document the lab polls.

Written whole to a temporary file beside it and renamed over it, so a reader
sees the previous status or the next one, never half of one. Each write has
its own temporary file: connections refused at once (controller/tls.py) write
from several threads, and two writers sharing one would mix their texts.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path

_WRITES = itertools.count()


def write_status(path: Path, status: dict) -> None:
    """Replace the status file at `path` with `status`, atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}."
                         f"{next(_WRITES)}.tmp")
    try:
        tmp.write_text(json.dumps(status))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
