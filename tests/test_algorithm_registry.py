"""The collectives' algorithms register themselves (collectives/algorithms/):
what the registry derives is today's lists, and a new algorithm is one new
module, which the flags, the schedules and a checked replay then take."""

import os
import shutil
import subprocess
import sys
import textwrap

from harness import REPO
from collectives import registry
from collectives.algorithms import ALGORITHM_REGISTRY, Algorithm


def test_the_registered_algorithms_give_each_collective_its_list_default_first():
    assert registry.ALGORITHMS == {
        "allreduce": ("ring", "rhd", "tree", "hierarchical", "rail-ring", "nccl-tree"),
        "allgather": ("ring", "pat"), "reducescatter": ("ring", "pat"),
        "broadcast": ("ring",), "reduce": ("ring",), "alltoall": ("pairwise",),
        "sendrecv": ("ring",)}
    assert registry.BY_SERVER == ("hierarchical", "rail-ring", "nccl-tree")
    # what the step shortcut, the planner and the fold-aware model pick by
    assert (registry.FLAT_RING, registry.SERVER_RINGS) == ("ring", "hierarchical")
    assert registry.PHASED == ("ring", "hierarchical") and registry.FOLDING == ("rhd",)
    assert registry.ALL_ALGORITHMS == tuple(sorted(ALGORITHM_REGISTRY.names()))
    assert all(isinstance(a, Algorithm) for a in ALGORITHM_REGISTRY.values())


def test_a_new_algorithm_is_one_new_file(tmp_path):
    """Direct AllGather (each rank sends its block to every other at once),
    dropped into a copy of collectives/: the lists, the flags and a replay
    whose every element is checked take it."""
    shutil.copytree(REPO / "collectives", tmp_path / "collectives",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "collectives" / "algorithms" / "direct.py").write_text(textwrap.dedent('''
        from collectives import schedules
        from collectives.algorithms import Algorithm, register

        @register
        class Direct(Algorithm):
            name, order = "direct", 9
            collectives = ("allgather",)

            def build(self, collective, n, count, root, local):
                blocks = schedules.bounds(count, n)
                return {r: [schedules.send_op(p, blocks[r], 0) for p in range(n) if p != r]
                        + [schedules.recv_op(p, blocks[p], 0, {p}) for p in range(n) if p != r]
                        for r in range(n)}
    '''))
    program = textwrap.dedent('''
        from collectives import registry
        from harness.collectives import simulate
        from runs import flags
        args = flags.parse_args(["-c", "allgather", "-a", "direct"], "", None)
        print(registry.ALGORITHMS["allgather"], args.algorithm)
        print(sum(rank.wrong() for rank in simulate("allgather", "direct", 4, 8)))
    ''')
    # the copied collectives/ first, the rest of the project from this checkout
    out = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["('ring', 'pat', 'direct') direct", "0"]
