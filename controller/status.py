"""The controller's status file: a small JSON document the lab polls.

Written whole to a temporary file beside it and renamed over it, so a reader
sees the previous status or the next one, never half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_status(path: Path, status: dict) -> None:
    """Replace the status file at `path` with `status`, atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(status))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
