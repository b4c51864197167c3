"""Hostile schedule parameters: the schedule builders, the in-process
executor and the experiment refuse, in one sentence (a ValueError), every
count of ranks, elements, GPUs or pieces that is not a whole number in range,
a root that is not a rank and a name that does not exist, at build time,
before any buffer is allocated or any lab built: no crash in the executor,
no silently empty schedule, no #wrong from a root that is not a rank."""

import pytest
import yaml

from harness.fabrics import EXPERIMENT_YAML
from topologies.fabric import parse_fabric
from toolkit.errors import FabricError
from collectives import schedules as S
from harness.collectives import RankLayout, simulate
from runs.experiment import Experiment, MAX_SIZES, check_for_ranks, experiment_from

LINE_MAX = 200


def one_sentence(exc_info, *words):
    message = str(exc_info.value)
    assert "\n" not in message and len(message) <= LINE_MAX and message.isprintable(), message
    for word in words:
        assert word in message, (word, message)
    return message


# --- the builders ------------------------------------------------------------------------------

# (collective, algorithm, n, count, root, piece_elements, local), words of the refusal
BUILD = [
    (("allreduce", "hierarchical", 8, 100, 0, 0, 0), ["GPUs per server", "at least 1", "got 0"]),
    (("allreduce", "hierarchical", 8, 100, 0, 0, -4), ["GPUs per server", "got -4"]),
    (("allreduce", "hierarchical", 8, 100, 0, 0, 3), ["whole servers", "multiple of 3"]),
    (("allreduce", "hierarchical", 8, -5, 0, 0, 4), ["count", "at least 1 element", "got -5"]),
    (("allreduce", "hierarchical", 8, 0, 0, 0, 4), ["count", "got 0"]),
    (("allreduce", "hierarchical", 0, 100, 0, 0, 4), ["at least 2 ranks", "got 0"]),
    (("allreduce", "hierarchical", -8, 100, 0, 0, 4), ["at least 2 ranks", "got -8"]),
    (("allreduce", "hierarchical", 8, 100, 0, 0, 2.5), ["GPUs per server", "got 2.5"]),
    (("allreduce", "ring", 1, 100, 0, 0, 1), ["at least 2 ranks", "got 1"]),
    (("allreduce", "ring", 4.0, 100, 0, 0, 1), ["at least 2 ranks", "got 4.0"]),
    (("allreduce", "ring", True, 100, 0, 0, 1), ["at least 2 ranks"]),
    (("allreduce", "ring", 4, 0, 0, 0, 1), ["count", "got 0"]),
    (("allreduce", "rhd", 4, -1, 0, 0, 1), ["count", "got -1"]),
    (("allreduce", "tree", 4, "100", 0, 0, 1), ["count", "got '100'"]),
    (("alltoall", "pairwise", 4, 0, 0, 0, 1), ["count", "at least 1 element", "got 0"]),
    (("alltoall", "pairwise", 4, 6, 0, 0, 1), ["alltoall on 4 ranks", "multiple of 4", "got 6"]),
    (("allgather", "ring", 4, 2, 0, 0, 1), ["allgather on 4 ranks", "multiple of 4", "got 2"]),
    (("broadcast", "ring", 4, 100, 4, 0, 1), ["root", "0 to 3", "got 4"]),
    (("broadcast", "ring", 4, 100, -1, 0, 1), ["root", "0 to 3", "got -1"]),
    (("reduce", "ring", 4, 100, 99, 0, 1), ["root", "0 to 3", "got 99"]),
    (("reduce", "ring", 4, 100, None, 0, 1), ["root", "got null"]),
    (("allreduce", "ring", 4, 100, 0, -3, 1), ["piece size", "got -3"]),
    (("allreduce", "ring", 4, 100, 0, 1.5, 1), ["piece size", "got 1.5"]),
    (("bogus", "ring", 4, 100, 0, 0, 1), ["unknown collective 'bogus'",
                                           "expected one of allreduce, allgather"]),
    (("x" * 5000, "ring", 4, 100, 0, 0, 1), ["unknown collective", "..."]),
    (("allgather", "tree", 4, 8, 0, 0, 1), ["no 'tree' algorithm for allgather",
                                             "expected one of ring"]),
    (("allreduce", "\x1b[2J", 4, 8, 0, 0, 1), ["algorithm for allreduce", "\\x1b"]),
]


@pytest.mark.parametrize("params,words", BUILD, ids=[str(p)[:50] for p, _ in BUILD])
def test_the_builder_refuses_in_one_sentence(params, words):
    with pytest.raises(ValueError) as info:
        S.build(*params[:4], S.RankLayout(*params[4:]))
    one_sentence(info, *words)


@pytest.mark.parametrize("params,words", BUILD, ids=[str(p)[:50] for p, _ in BUILD])
def test_the_executor_refuses_before_it_allocates(params, words):
    with pytest.raises(ValueError) as info:
        simulate(*params[:4], RankLayout(*params[4:]))
    one_sentence(info, *words)


@pytest.mark.parametrize("n,local,words", [(8, 0, ["GPUs per server", "got 0"]),
                                           (8, -2, ["GPUs per server", "got -2"]),
                                           (10, 4, ["multiple of 4 GPUs per server"])])
def test_hierarchical_called_directly_refuses_too(n, local, words):
    with pytest.raises(ValueError) as info:
        S.hierarchical_allreduce(n, 100, local)
    one_sentence(info, *words)


def test_a_good_root_and_pieces_still_build():
    sched = S.build("broadcast", "ring", 4, 100, S.RankLayout(root=3, piece_elements=7))
    assert sum(len(ops) for ops in sched.values()) > 0
    ranks = simulate("reduce", "ring", 4, 100, RankLayout(root=3, piece_elements=7))
    assert [r.wrong() for r in ranks] == [0] * 4


def test_the_expected_result_names_an_unknown_collective():
    with pytest.raises(ValueError) as info:
        S.expected_regions("bogus\n", 4, 100, 0)
    one_sentence(info, "unknown collective 'bogus\\n'")


# --- the experiment: the same refusals, by field, before any schedule is built ---------------------

# Experiment fields, the rank count and GPUs per server, words of the refusal
EXPERIMENTS = [
    ({"collective": "broadcast", "root": 4}, 4, 1, ["root: 4 is not a rank", "0 to 3"]),
    ({"collective": "reduce", "root": -1}, 4, 1, ["root", "got -1"]),
    ({"piece_bytes": -64}, 4, 1, ["piece_bytes", "got -64"]),
    ({"piece_bytes": 0}, 4, 1, ["piece_bytes", "got 0"]),
    ({"collective": "bogus"}, 4, 1, ["collective", "expected one of allreduce", "'bogus'"]),
    ({"algorithm": "bogus"}, 4, 1, ["algorithm", "'bogus'"]),
    ({"collective": "allgather", "algorithm": "rhd"}, 4, 1, ["not an algorithm of allgather"]),
    ({"algorithm": "hierarchical"}, 8, 1, ["algorithm", "several GPUs"]),
    ({"algorithm": "hierarchical"}, 8, 3, ["algorithm", "multiple of 3 GPUs per server"]),
    ({"algorithm": "hierarchical"}, 8, 0, ["GPUs per server", "got 0"]),
    ({"algorithm": "hierarchical"}, 8, -4, ["GPUs per server", "got -4"]),
    ({}, 1, 1, ["at least 2 ranks", "got 1"]),
    ({}, 0, 1, ["at least 2 ranks", "got 0"]),
    ({"iters": 0}, 4, 1, ["iters", "got 0"]),
    ({"iters": 10 ** 9}, 4, 1, ["iters", "from 1 to 1000"]),
    ({"warmup": -1}, 4, 1, ["warmup", "got -1"]),
    ({"channels": 0}, 4, 1, ["channels", "got 0"]),
    ({"minbytes": 4 << 20, "maxbytes": 1 << 20}, 4, 1, ["minbytes 4M is larger than maxbytes 1M"]),
    ({"minbytes": 0}, 4, 1, ["minbytes", "got 0"]),
    ({"minbytes": "64K"}, 4, 1, ["minbytes", "as a number", "'64K'"]),
    ({"stepfactor": 1.0000001}, 4, 1, ["stepfactor", "sizes", f"at most {MAX_SIZES}"]),
    ({"stepfactor": float("nan")}, 4, 1, ["stepfactor", "nan"]),
    ({"stepfactor": 1}, 4, 1, ["stepfactor", "above 1"]),
    ({"piece_bytes": 64, "maxbytes": 1 << 30}, 4, 1, ["piece_bytes", "pieces"]),
    ({"engine": "scapy"}, 300, 1, ["engine", "at most 256 ranks"]),
    ({"probe": ["h1", "h1"]}, 4, 1, ["probe", "names one server twice"]),
]


@pytest.mark.parametrize("fields,n,local,words", EXPERIMENTS,
                         ids=[str(f)[:40] + f" n={n} local={l}" for f, n, l, _ in EXPERIMENTS])
def test_an_impossible_experiment_is_one_sentence_naming_the_field(fields, n, local, words):
    with pytest.raises(ValueError) as info:
        check_for_ranks(Experiment(**fields), n, local)
    one_sentence(info, *words)


class _CountedFactor(float):
    """A step factor that counts the sizes made from it (each is one
    multiplication) and stops the sweep long before 2e13 sizes."""
    budget = 10 * MAX_SIZES

    def __new__(cls, value):
        factor = super().__new__(cls, value)
        factor.multiplications = 0
        return factor

    def __rmul__(self, size):
        self.multiplications += 1
        if self.multiplications > self.budget:
            raise AssertionError(f"made more than {self.budget} sizes before refusing")
        return float(size) * float(self)


def test_a_tiny_step_factor_is_refused_at_once():
    """1 + 1e-12 would make 2e13 sizes from 4 to 1G: it is refused after
    at most MAX_SIZES + 1 of them (counted, whatever the host's speed)."""
    factor = _CountedFactor(1 + 1e-12)
    with pytest.raises(ValueError, match="stepfactor"):
        check_for_ranks(Experiment(minbytes=4, maxbytes=1 << 30, stepfactor=factor), 4)
    assert 0 < factor.multiplications <= MAX_SIZES + 1


def _fabric(**experiment):
    doc = yaml.safe_load(EXPERIMENT_YAML)
    doc["experiment"] = experiment
    return parse_fabric(yaml.safe_dump(doc), "t.yaml")


# the experiment section of a file, the key named
SECTIONS = [
    ({"collective": "broadcast", "root": 4}, "t.yaml: experiment.root: 4 is not a rank"),
    ({"collective": "broadcast", "root": -1}, "t.yaml: experiment.root: expected a whole number"),
    ({"piece_bytes": -64}, "t.yaml: experiment.piece_bytes: expected a size"),
    ({"minbytes": "4M", "maxbytes": "1M"}, "t.yaml: experiment.minbytes: 4M is larger than "
                                           "experiment.maxbytes (1M)"),
    ({"maxbytes": "1K"}, "t.yaml: experiment.minbytes: 32K is larger than experiment.maxbytes"),
    ({"stepfactor": 1.001, "maxbytes": "2M"}, "t.yaml: experiment.stepfactor: 1.001 would run"),
    ({"algorithm": "hierarchical"}, "t.yaml: experiment.algorithm: hierarchical needs servers"),
    ({"iters": 1000, "maxbytes": "1G"}, "t.yaml: experiment: the sweep would take at least"),
]


@pytest.mark.parametrize("section,message", SECTIONS, ids=[str(s)[:40] for s, _ in SECTIONS])
def test_the_same_mistake_in_a_file_names_file_and_key(section, message):
    with pytest.raises(FabricError) as info:
        experiment_from(_fabric(**section))
    assert one_sentence(info).startswith(message)


# the same through the flags, the flag named
FLAGGED = [
    ({"collective": "broadcast", "root": 4}, "--root: 4 is not a rank"),
    ({"root": 2}, "--root: allreduce has no root"),
    ({"minbytes": 4 << 20, "maxbytes": 1 << 20}, "-b/--minbytes 4M is larger than -e/--maxbytes 1M"),
    ({"maxbytes": 1024}, "the default minbytes 32K is larger than -e/--maxbytes 1K"),
    ({"stepfactor": 1.001, "maxbytes": 2 << 20}, "-f/--stepfactor: 1.001 would run"),
    ({"algorithm": "hierarchical"}, "-a/--algorithm: hierarchical needs servers"),
    ({"piece_bytes": 64, "maxbytes": 1 << 30}, "--piece-bytes: 64 cuts the largest message"),
    ({"cross": ["h1", "h9"]}, "--cross 'h1,h9': no server 'h9'"),
]


@pytest.mark.parametrize("flags,message", FLAGGED, ids=[str(f)[:40] for f, _ in FLAGGED])
def test_the_same_mistake_in_a_flag_names_the_flag(flags, message):
    with pytest.raises(ValueError) as info:
        experiment_from(_fabric(), flags)
    assert one_sentence(info).startswith(message)


def test_a_flag_meeting_a_file_value_names_both():
    fabric = _fabric(minbytes="4M", maxbytes="8M")
    with pytest.raises(ValueError) as info:
        experiment_from(fabric, {"maxbytes": 1 << 20})
    assert str(info.value) == "experiment.minbytes 4M is larger than -e/--maxbytes 1M"


@pytest.mark.parametrize("compare,message", [
    (["bogus"], "--compare: 'bogus' is not an algorithm of allreduce"),
    (["auto"], "--compare: auto is already the run's algorithm"),
    (["rhd", "rhd"], "--compare: rhd is named twice"),
    (["hierarchical"], "--compare: hierarchical needs servers with several GPUs"),
])
def test_compared_algorithms_are_checked_before_the_lab(compare, message):
    with pytest.raises(ValueError) as info:
        experiment_from(_fabric(), {}, compare)
    assert one_sentence(info).startswith(message)
