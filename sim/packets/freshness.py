"""Numba's on-disk cache, kept honest across modules. Numba checks a cached
function against its own source file only, but `kernel.run` has the NIC
code of transports.py and kerneltcp.py and the PFC code of linklevel.py
compiled (some of it inlined) into it: edit one of those alone and the old
machine code would still be loaded. So the compiled modules' sources are
hashed together, and when the hash is not the one the cache was built from,
their cache files in `__pycache__` are removed before anything is compiled or loaded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPILED = ("columns.py", "kernel.py", "linklevel.py", "transports.py", "kerneltcp.py")


def digest() -> str:
    h = hashlib.sha256()
    for name in COMPILED:
        h.update((HERE / name).read_bytes())
    return h.hexdigest()


def keep_cache_fresh(cache: Path = HERE / "__pycache__") -> bool:
    """Drop the cached machine code if the sources changed since it was
    built; True when something was dropped. A cache folder that cannot be
    written is left alone (numba then caches elsewhere or not at all)."""
    stamp = cache / "packets-sources.sha256"
    now = digest()
    try:
        if stamp.is_file() and stamp.read_text() == now:
            return False
        dropped = False
        for name in COMPILED:
            for f in cache.glob(f"{name[:-3]}.*.nb[ic]"):
                f.unlink()
                dropped = True
        cache.mkdir(exist_ok=True)
        stamp.write_text(now)
        return dropped
    except OSError:
        return False
