"""The fabric file's JSON Schema (draft 2020-12), derived from the one
schema in schema.py: each validator carries its type, bounds, enum, pattern
and description, each section its description, and each kind of fabric
(topologies/kinds/) says which keys and link classes it takes. Editors read it to complete and check
a fabric file as it is typed (see docs/fabric.md); the loader stays the
judge, with checks no JSON Schema can say (sizes, names, physics).

    python -m topologies.jsonschema > docs/fabric.schema.json

The ``experiment:`` section is described as a mapping only: its keys are the
experiment's, in traffic/, which the model does not import.
"""

from __future__ import annotations

import json
import sys

import networks
from topologies import kinds
from topologies.kinds import FabricKind
from toolkit.validators import OPTIONAL_SECTION, REQUIRED
from topologies.schema import DEFAULT_KIND, SCHEMA, current

DIALECT = "https://json-schema.org/draft/2020-12/schema"
LINK_CLASSES = tuple(SCHEMA["links"][0])


def json_schema() -> dict:
    """The whole schema, as a JSON-able dict."""
    schema = current()
    root = _object(schema, "A fabric-lab fabric file: what to build, how to route, name "
                           "and address it, and what to replay on it (docs/fabric.md).")
    root["properties"]["fabric"]["allOf"] = [_kind_keys(kind, schema)
                                             for kind in kinds.kinds()]
    root["allOf"] = [_kind_links(kind) for kind in kinds.kinds()] + [_intra_node()]
    root["properties"]["network"] = _network(root["properties"]["network"])
    return {"$schema": DIALECT, "title": "fabric-lab fabric", **root}


def _network(section: dict) -> dict:
    """`network:` as the loader reads it: a technology's name alone
    (`network: infiniband`, its options at their defaults), or the section."""
    section = dict(section)
    description = section.pop("description")
    name = {"description": "a technology by its name alone, its options at their defaults",
            "type": "string", "enum": list(networks.NETWORKS)}
    return {"description": description, "anyOf": [name, section]}


def _object(schema: dict, description: str) -> dict:
    properties, required = {}, []
    for key, (check, default) in schema.items():
        if isinstance(check, dict):
            sub = _object(check, getattr(check, "description", ""))
            if default is OPTIONAL_SECTION:
                sub = {"description": sub.pop("description"),
                       "anyOf": [sub, {"type": "null"}]}
        else:
            sub = dict(check.json_schema)
            if "description" in sub:                      # first, as a reader looks for it
                sub = {"description": sub.pop("description"), **sub}
        if default is REQUIRED:
            required.append(key)
        elif default not in (None, {}, OPTIONAL_SECTION):
            sub["default"] = default
        properties[key] = sub
    out = {"description": description, "type": "object", "properties": properties,
           "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _when_kind(kind: str) -> dict:
    """The condition 'fabric.kind is `kind`' on the fabric section (an absent
    kind is the default kind)."""
    condition = {"properties": {"kind": {"const": kind}}}
    if kind != DEFAULT_KIND:
        condition["required"] = ["kind"]
    return condition


def _kind_keys(kind: FabricKind, schema: dict) -> dict:
    """The keys of `fabric:` a kind requires, and those it does not take."""
    counts = [k for k in schema["fabric"][0] if k not in ("kind", "mtu")]
    then = {k: {"type": "integer", **kind.json_counts.get(k, {})} for k in kind.required}
    then.update((k, {"type": "null", "description": f"not used by a {kind.name} fabric"})
                for k in counts if k not in kind.takes())
    return {"if": _when_kind(kind.name),
            "then": {"required": list(kind.required), "properties": then}}


def _kind_links(kind: FabricKind) -> dict:
    """The link classes a kind needs, and those it has no links of."""
    links = kind.links
    unused = [c for c in LINK_CLASSES
              if c not in links + kind.optional_links + ("server_leaf", "intra_node")]
    then = {c: {"type": "object"} for c in links}
    then.update((c, {"type": "null", "description": f"a {kind.name} fabric has no such links"})
                for c in unused)
    needs = {"required": list(links)} if links else {}
    return {"if": {"properties": {"fabric": _when_kind(kind.name)}},
            "then": {"properties": {"links": {**needs, "properties": then}}}}


def _intra_node() -> dict:
    """intra_node: required with several GPUs or NICs per server, else unused."""
    several = {"anyOf": [{"required": [k], "properties": {k: {"minimum": 2}}}
                         for k in ("gpus", "nics")]}
    return {"if": {"required": ["server"], "properties": {"server": several}},
            "then": {"properties": {"links": {"required": ["intra_node"],
                                              "properties": {"intra_node": {"type": "object"}}}}},
            "else": {"properties": {"links": {"properties": {"intra_node": {
                "type": "null", "description": "servers have one GPU and one NIC"}}}}}}


def main() -> int:
    json.dump(json_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
