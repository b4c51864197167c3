"""What a c10d operator's recorded arguments say of the operation: its
tensors' data type and elements, all-to-all splits, root, peer, and what the
shapes tell of the group's size.

The same arguments reach a reader two ways: the profiler's "Input type",
"Input Dims" and "Concrete Inputs" (Kineto: a tensor list's type is written
"TensorList", its element type lost) and an execution trace node's inputs
("GenericList[Tensor(float)]", shapes, values).
"""

from __future__ import annotations

import ast
import math
import re
from typing import List, Optional, Sequence

from traces.naming import scalar_type

# per operator (c10d:: and the trailing _ taken off): where its arguments are
POSITIONS = {
    "allreduce": dict(inp=0), "allreduce_coalesced": dict(inp=0),
    "_allgather_base": dict(out=0, inp=1), "allgather": dict(out=0, inp=1),
    "allgather_into_tensor_coalesced": dict(out=0, inp=1),
    "_reduce_scatter_base": dict(out=0, inp=1), "reduce_scatter": dict(out=0, inp=1),
    "reduce_scatter_tensor_coalesced": dict(out=0, inp=1),
    "alltoall_base": dict(out=0, inp=1, out_splits=3, in_splits=4),
    "alltoall": dict(out=0, inp=1),
    "broadcast": dict(inp=0, root=2), "reduce": dict(inp=0, root=3),
    "send": dict(inp=0, peer=2), "recv": dict(inp=0, peer=2),
}
GATHERING = ("_allgather_base", "allgather", "allgather_into_tensor_coalesced")
SCATTERING = ("_reduce_scatter_base", "reduce_scatter", "reduce_scatter_tensor_coalesced")
ELEMENT = re.compile(r"Tensor\(([^)]*)\)")


def tensors(type_name: str, dims) -> tuple:
    """(typed, elements, rows) of one argument: typed is (dtype, bytes) or None
    when the type is not recorded (Kineto's "TensorList")."""
    dims = dims if isinstance(dims, list) else []
    listed = type_name.startswith(("GenericList", "TensorList")) or (
        dims and isinstance(dims[0], list))
    shapes = flatten(dims) if listed else [dims]
    elements = sum(math.prod(s) for s in shapes)
    rows = shapes[0][0] if shapes and shapes[0] else 1
    inner = ELEMENT.findall(type_name)
    typed = scalar_type(inner[0]) if inner else (None if listed else scalar_type(type_name))
    return typed, elements, rows


def flatten(dims) -> List[list]:
    """The shapes in a (possibly nested) list of shapes."""
    if not dims or all(isinstance(d, int) for d in dims):
        return [dims]
    return [s for d in dims for s in flatten(d)]


def number(value) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def numbers(value) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(int(x) for x in value)
    text = str(value or "").strip()
    return tuple(int(x) for x in ast.literal_eval(text)) if text.startswith("[") else ()


def describe(op_name: str, types: Sequence[str], dims: Sequence, values: Sequence) -> dict:
    """dtype (None: not recorded), size, elems (as nccl-tests counts: an
    all-gather's output, the others' input), in_splits/out_splits (elements),
    root, peer (the peer's place in the group), group_size (0: the shapes
    do not tell)."""
    op = op_name.split("::")[-1].rstrip("_")
    at = POSITIONS.get(op, {})
    pick = (lambda seq, i: seq[i] if i is not None and i < len(seq) else None)
    typed, n_in, rows_in = tensors(str(pick(types, at.get("inp")) or ""),
                                   pick(dims, at.get("inp")))
    _, n_out, _ = tensors(str(pick(types, at.get("out")) or ""), pick(dims, at.get("out")))
    facts = {"dtype": typed[0] if typed else None, "size": typed[1] if typed else 0,
             "elems": n_in, "why": "a tensor list, whose element type Kineto does not write"}
    if op in GATHERING:
        facts["elems"] = n_out
        facts["group_size"] = n_out // n_in if n_in else 0
    elif op in SCATTERING:
        facts["group_size"] = n_in // n_out if n_out else 0
    if "in_splits" in at:
        per_row = n_in // rows_in if rows_in else 1
        ins, outs = numbers(pick(values, at["in_splits"])), numbers(pick(values, at["out_splits"]))
        facts["in_splits"] = tuple(r * per_row for r in ins)
        facts["out_splits"] = tuple(r * per_row for r in outs)
        facts["group_size"] = len(ins)
    for key in ("root", "peer"):
        if key in at and number(pick(values, at[key])) is not None:
            facts[key] = number(pick(values, at[key]))
    return facts
