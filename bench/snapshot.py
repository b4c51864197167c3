#!/usr/bin/env python3
"""What a restructuring must leave unchanged, written to a folder to diff:
every example's `--check` (text and JSON), the fabric each example derives
(switches, endpoints, links), the planner at 200,000 GPUs (closed form,
--params, --simulate at 1,024 GPUs), and a simulated run of every collective
and algorithm, every routing policy and a training step (`--engine sim
--json`: numbers equal, not just close). Only what differs from run to run is
blanked: the results folder, the repository's path and wall-clock fields.

    .venv/bin/python -m bench.snapshot --out /tmp/before
    ... restructure ...
    .venv/bin/python -m bench.snapshot --out /tmp/after && diff -r /tmp/before /tmp/after

It drives the commands a user runs (run_topology.py, python -m planner) as
child processes, so it holds across moves of the code beneath them. No root.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import tempfile
from pathlib import Path

from harness import REPO, TOPOLOGIES
from harness.commandline import command_line
from harness.commands import python

EXAMPLES = sorted(TOPOLOGIES.glob("*.yaml"))
# wall-clock figures: they measure the host, not the code; the commit the code is at
VOLATILE = re.compile(r"wall|elapsed|started|seconds_taken|cpu_s|duration_s$|^commit$")
SIM_CASES = (
    [("default", c, a) for c, a in (
        ("allreduce", "ring"), ("allreduce", "rhd"), ("allreduce", "tree"),
        ("allgather", "ring"), ("reducescatter", "ring"), ("broadcast", "ring"),
        ("reduce", "ring"), ("alltoall", "pairwise"), ("sendrecv", "ring"))]
    + [("multi-gpu", "allreduce", a) for a in ("ring", "hierarchical", "tree", "rhd")]
    + [("multi-gpu", "alltoall", "pairwise")])


def run(args) -> str:
    """One command's stdout and exit status, the repository's path blanked."""
    done = python(*args)
    out = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr else "")
    return f"[exit {done.returncode}]\n" + out.replace(str(REPO), "<repo>")


def scrub(value):
    """A JSON document with the host's wall-clock fields and paths blanked."""
    if isinstance(value, dict):
        return {k: ("<volatile>" if VOLATILE.search(k) or k == "results" and isinstance(v, str)
                    else scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        value = re.sub(r"--results \S+", "--results <results>", value)   # a temporary folder
        return re.sub(r"/\S*/results/[^/\s\"]+", "<results>", value.replace(str(REPO), "<repo>"))
    return value


def key_tree(value, prefix=""):
    """Every key path of a JSON document, lists shown by their first item."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{prefix}/{k}"
            yield from key_tree(v, f"{prefix}/{k}")
    elif isinstance(value, list) and value:
        yield from key_tree(value[0], f"{prefix}[]")


def sim_json(args, results: Path) -> dict:
    done = python("run_topology.py", "--engine", "sim", "--json", "--results", str(results), *args)
    if done.returncode:
        return {"exit": done.returncode, "stderr": done.stderr}
    return json.loads(done.stdout)


def checks(out: Path) -> None:
    for yaml in EXAMPLES:
        rel = str(yaml.relative_to(REPO))
        (out / f"check.{yaml.stem}.txt").write_text(run(["run_topology.py", "--check", rel]))
        (out / f"check.{yaml.stem}.json").write_text(
            run(["run_topology.py", "--check", "--json", rel]))


def fabrics(out: Path) -> None:
    from topologies.fabric import load_fabric
    for yaml in EXAMPLES:
        fabric = load_fabric(yaml)
        derived = {"shape": fabric.shape(), "warnings": list(fabric.warnings),
                   "oversubscription": fabric.oversubscription(),
                   **{k: v for k, v in dataclasses.asdict(fabric).items() if k != "source"}}
        (out / f"fabric.{yaml.stem}.json").write_text(
            json.dumps(derived, indent=1, default=str, sort_keys=True))


def planner(out: Path) -> None:
    for name, args in (
            ("200k", ["--gpus", "200000"]),
            ("200k.json", ["--gpus", "200000", "--json"]),
            ("200k.params", ["--gpus", "200000", "--params", "70e9"]),
            ("1024.simulate", ["--gpus", "1024", "--simulate", "--json"]),
            ("fabric.superpod", ["--fabric", "topologies/superpod-su.yaml"])):
        (out / f"planner.{name}.txt").write_text(run(["-m", "planner", *args]))


def simulated(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp)
        for fabric, collective, algorithm in SIM_CASES:
            doc = sim_json([f"topologies/{fabric}.yaml", "-c", collective, "-a", algorithm,
                            "-n", "2", "-w", "0"], results)
            (out / f"sim.{fabric}.{collective}.{algorithm}.json").write_text(
                json.dumps(scrub(doc), indent=1, sort_keys=True))
        from policies import POLICIES
        for policy in POLICIES:
            doc = sim_json(["topologies/leaf-spine-4x4.yaml", "--policy", policy,
                            "-n", "1", "-w", "0"], results)
            (out / f"sim.policy.{policy}.json").write_text(
                json.dumps(scrub(doc), indent=1, sort_keys=True))
        doc = sim_json(["topologies/multi-gpu.yaml", "--step"], results)
        (out / "sim.step.json").write_text(json.dumps(scrub(doc), indent=1, sort_keys=True))
        summaries = sorted(results.rglob("summary.json"))
        keys = sorted({k for s in summaries for k in key_tree(json.loads(s.read_text()))})
        (out / "summary.keys.txt").write_text("\n".join(keys) + "\n")
        files = sorted({str(p.relative_to(p.parents[len(p.relative_to(results).parts) - 2]))
                        for p in results.rglob("*") if p.is_file()})
        (out / "results.files.txt").write_text("\n".join(files) + "\n")


def main(argv=None) -> int:
    parser = command_line(__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder to write (made if missing)")
    parser.add_argument("--parts", default="checks,fabrics,planner,simulated",
                        help="comma-separated: checks, fabrics, planner, simulated")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = {"checks": checks, "fabrics": fabrics, "planner": planner, "simulated": simulated}
    for part in args.parts.split(","):
        parts[part](args.out)
        print(f"{part}: written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
