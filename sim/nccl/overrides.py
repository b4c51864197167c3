"""NCCL_ALGO and NCCL_PROTO, as NCCL reads them (src/graph/tuning.cc):
a comma-separated list of names, case-insensitive, that enables only those,
or with a leading ``^`` disables those; optionally per collective,
``"<list>;allreduce:<list>;broadcast:<list>"``, the first entry for every
collective (its prefix may be left out) and later ones for theirs.

    ring,tree                   Ring and Tree only
    ^nvls,nvlstree              everything but NVLS and NVLSTree
    ring;allreduce:tree         Ring, but Tree for AllReduce
    ^LL128                      (NCCL_PROTO) everything but LL128
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from sim.nccl.tuner import ALGORITHMS, COLLECTIVES, NAMES, PROTOCOLS

ALGORITHM_NAMES = {NAMES[a].lower(): a for a in ALGORITHMS}
PROTOCOL_NAMES = {p.lower(): p for p in PROTOCOLS}


class OverrideError(ValueError):
    """A NCCL_ALGO / NCCL_PROTO string NCCL would refuse: one sentence."""


def _names(text: str, known: Dict[str, str], what: str) -> List[str]:
    out = []
    for word in text.split(","):
        key = word.strip().lower()
        if key not in known:
            raise OverrideError(f"{what}: {word.strip()!r} is not one of "
                                f"{', '.join(sorted(set(known)))}")
        out.append(known[key])
    return out


def _entry(text: str, known: Dict[str, str], everything: Sequence[str], what: str) -> List[str]:
    text = text.strip()
    if not text:
        raise OverrideError(f"{what}: an empty list")
    if text.startswith("^"):
        off = set(_names(text[1:], known, what))
        return [x for x in everything if x not in off]
    on = set(_names(text, known, what))
    return [x for x in everything if x in on]


def parse(text: Optional[str], known: Dict[str, str], everything: Sequence[str],
          what: str) -> Dict[str, List[str]]:
    """{collective: the names enabled for it} from one NCCL_ALGO or
    NCCL_PROTO string (None or "": everything for every collective)."""
    out = {c: list(everything) for c in COLLECTIVES}
    if not text:
        return out
    for i, part in enumerate(text.split(";")):
        head, sep, rest = part.partition(":")
        if sep:
            func = head.strip().lower()
            if func not in COLLECTIVES:
                raise OverrideError(f"{what}: {head.strip()!r} is not one of "
                                    f"{', '.join(COLLECTIVES)}")
            out[func] = _entry(rest, known, everything, what)
        elif i == 0:
            names = _entry(part, known, everything, what)
            out = {c: list(names) for c in COLLECTIVES}
        else:
            raise OverrideError(f"{what}: {part.strip()!r} after the first ';' needs a "
                                f"collective, as in allreduce:{part.strip()}")
    return out


def enabled(algo: Optional[str] = None, proto: Optional[str] = None) -> Dict[str, dict]:
    """{collective: {"algorithms": [...], "protocols": [...]}} from
    NCCL_ALGO-style `algo` and NCCL_PROTO-style `proto` strings."""
    algos = parse(algo, ALGORITHM_NAMES, ALGORITHMS, "NCCL_ALGO")
    protos = parse(proto, PROTOCOL_NAMES, PROTOCOLS, "NCCL_PROTO")
    return {c: {"algorithms": algos[c], "protocols": protos[c]} for c in COLLECTIVES}
