"""PyTorch's names for collectives and data types, in the project's words.

A trace names a collective as record_param_comms does ("allreduce",
"all_gather", "_allgather_base", "all_to_allv", ...), as a c10d operator
("c10d::allreduce_", "c10d::_allgather_base_", ...) and a data type as ATen
does ("Float", "c10::BFloat16", "Tensor(float)"). The project's names are
collectives/registry COLLECTIVES (plus "send"/"recv") and collectives/datatypes
TYPE_NAMES.
"""

from __future__ import annotations

from typing import Optional

from collectives.datatypes import DATATYPES

# record_param_comms' "Collective name" -> the project's kind
COLLECTIVE_KINDS = {
    "allreduce": "allreduce", "all_reduce": "allreduce", "allreduce_coalesced": "allreduce",
    "allgather": "allgather", "all_gather": "allgather", "_allgather_base": "allgather",
    "allgather_into_tensor_coalesced": "allgather", "all_gather_into_tensor": "allgather",
    "allgather_coalesced": "allgather",
    "reduce_scatter": "reducescatter", "_reduce_scatter_base": "reducescatter",
    "reduce_scatter_tensor_coalesced": "reducescatter", "reduce_scatter_tensor": "reducescatter",
    "all_to_all": "alltoall", "all_to_allv": "alltoall", "alltoall": "alltoall",
    "alltoall_base": "alltoall",
    "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
}
# names record_param_comms gives what moves no data of the job's (skipped)
NOT_DATA = ("wait", "barrier", "init", "coalesced", "gather", "scatter")

# c10d operators (their name less "c10d::" and a trailing "_") -> the project's kind
C10D_KINDS = {
    "allreduce": "allreduce", "allreduce_coalesced": "allreduce",
    "_allgather_base": "allgather", "allgather": "allgather",
    "allgather_into_tensor_coalesced": "allgather",
    "_reduce_scatter_base": "reducescatter", "reduce_scatter": "reducescatter",
    "reduce_scatter_tensor_coalesced": "reducescatter",
    "alltoall_base": "alltoall", "alltoall": "alltoall",
    "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
}

# ATen's scalar type names (record_param_comms' "dtype", an op's "Input type"
# with or without "c10::", an execution trace's "Tensor(...)") -> (project name, bytes)
_ATEN = {
    "float": ("float", 4), "half": ("half", 2), "bfloat16": ("bfloat16", 2),
    "char": ("int8", 1), "signed char": ("int8", 1), "int8": ("int8", 1),
    "int": ("int32", 4), "int32": ("int32", 4),
    # types the project has no name for: carried as bytes (int8, one a byte)
    "byte": ("int8", 1), "unsigned char": ("int8", 1), "bool": ("int8", 1),
    "long": ("int8", 8), "long int": ("int8", 8), "int64": ("int8", 8),
    "double": ("int8", 8), "short": ("int8", 2), "short int": ("int8", 2),
    "float8_e4m3fn": ("int8", 1), "float8_e5m2": ("int8", 1),
}


def scalar_type(name: str) -> Optional[tuple]:
    """(project dtype, bytes per element) of an ATen type name, or None when
    the name is no scalar type (a tensor list, an unknown type)."""
    key = name.strip()
    if key.startswith("Tensor(") and key.endswith(")"):
        key = key[len("Tensor("):-1]
    key = key.replace("c10::", "").lower()
    found = _ATEN.get(key)
    if found is None:
        return None
    dtype, size = found
    assert dtype in DATATYPES
    return dtype, size
