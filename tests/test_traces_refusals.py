"""A trace the replay cannot take is refused in one sentence naming the file
and the event; nothing half-read comes back. The bad traces are the kept
4-rank job (tests/data/traces/gloo-mlp-4) edited in tmp_path."""

import builtins
import gzip
import json
import shutil
from pathlib import Path

import pytest

from traces import kineto
from traces.reading import read_trace
from traces.trace_model import TraceError

JOB = Path(__file__).parent / "data" / "traces" / "gloo-mlp-4"


@pytest.fixture
def job(tmp_path):
    folder = tmp_path / "job"
    shutil.copytree(JOB, folder, ignore=shutil.ignore_patterns("*.md"))
    return folder


def load(path):
    return json.load(gzip.open(path, "rt"))


def save(path, data):
    with gzip.open(path, "wt") as f:
        json.dump(data, f)


def refusal(path, **kwargs) -> str:
    with pytest.raises(TraceError) as caught:
        read_trace(path, **kwargs)
    text = str(caught.value)
    assert text.count(". ") == 0 or text.endswith(")."), text       # one sentence
    assert "\n" not in text and text.endswith(".")
    return text


def edit_et(path, name, change):
    """Apply `change(node)` to every node named `name` of the execution trace."""
    data = load(path)
    hits = [node for node in data["nodes"] if node["name"] == name]
    assert hits
    for node in hits:
        change(node)
    save(path, data)


def test_the_kept_job_reads(job):
    assert read_trace(job).world == 4          # so each refusal below is the edit's doing


def test_a_truncated_file(job):
    target = job / "rank-2.kineto.json.gz"
    text = gzip.open(target, "rt").read()
    with gzip.open(target, "wt") as f:
        f.write(text[: len(text) // 2])
    assert refusal(job).startswith("rank-2.kineto.json.gz: not complete JSON (JSONDecodeError")


def test_a_file_that_is_not_gzip_whole(job):
    target = job / "rank-1.et.json.gz"
    target.write_bytes(target.read_bytes()[:4000])
    assert refusal(job).startswith("rank-1.et.json.gz: not complete JSON (EOFError")


def test_a_missing_rank(job):
    for suffix in ("kineto", "et"):
        (job / f"rank-3.{suffix}.json.gz").unlink()
    assert refusal(job) == "job: rank 3 of 4 is missing (the files hold ranks [0, 1, 2])."


def test_an_execution_trace_without_its_kineto_partner(job):
    (job / "rank-1.kineto.json.gz").unlink()
    assert refusal(job) == ("rank-1.et.json.gz: an execution trace has no durations, and no "
                            "Kineto trace of the same process (pid) is beside it to give them.")


def test_an_execution_trace_node_without_its_kineto_event(job):
    target = job / "rank-1.kineto.json.gz"
    data = load(target)
    data["traceEvents"] = [e for e in data["traceEvents"]
                           if e.get("name") not in ("c10d::alltoall_base_", "gloo:all_to_all")]
    save(target, data)
    text = refusal(job)
    assert text.startswith("rank-1.et.json.gz: node ")
    assert text.endswith("one of 1 communication nodes of ProfilerStep#3, has no partner event "
                         "in rank-1.kineto.json.gz.")


def test_one_ranks_bytes_differ(job):
    def smaller(node):
        node["inputs"]["shapes"][0] = [[656000]]
    edit_et(job / "rank-1.et.json.gz", "c10d::allreduce_",
            lambda node: smaller(node) if node["inputs"]["shapes"][0] == [[656128]] else None)
    text = refusal(job)
    assert text.startswith("rank-0.et.json.gz + rank-0.kineto.json.gz: c10d::allreduce_ "
                           "(allreduce #0 in group 0, at ")
    assert text.endswith("2624512 bytes of float allreduce, where rank-1.et.json.gz + "
                         "rank-1.kineto.json.gz has 2624000 bytes of float allreduce.")


def test_all_to_all_splits_one_rank_sends_and_the_other_does_not_receive(job):
    def splits(node):
        node["inputs"]["values"][4] = [20, 36]        # rank 1 sends 20 rows, not 16, to rank 0
    edit_et(job / "rank-1.et.json.gz", "c10d::alltoall_base_", splits)
    text = refusal(job)
    assert text.startswith("rank-1.et.json.gz + rank-1.kineto.json.gz: c10d::alltoall_base_ "
                           "(alltoall #2 in group 1, at ")
    assert "ms): sends 5120 elements to rank 0, which receives 4096 from it (rank-0." in text


def test_a_rank_whose_groups_are_given_nowhere(job):
    target = job / "rank-2.kineto.json.gz"
    data = load(target)
    del data["distributedInfo"]["pg_config"]
    save(target, data)
    text = refusal(job)
    assert text.startswith("rank-2.kineto.json.gz: c10d::_allgather_base_ at ")
    assert text.endswith("its process group is unknown: the trace gives no process group's "
                         "ranks (distributedInfo.pg_config).")


def test_an_iteration_not_in_every_file(job):
    target = job / "rank-2.kineto.json.gz"
    data = load(target)
    for e in data["traceEvents"]:
        if e.get("name") == "ProfilerStep#3":
            e["name"] = "ProfilerStep#9"
    save(target, data)
    assert refusal(job, iteration=3) == ("rank-2.kineto.json.gz: iteration ProfilerStep#3 is "
                                         "not in the file (it has #2, #9).")
    assert read_trace(job).iteration == "ProfilerStep#2"      # the latest every file holds
    assert refusal(job, iteration=7).startswith(
        "rank-0.et.json.gz: iteration ProfilerStep#7 is not in the file")


def test_a_trace_with_no_communication(tmp_path):
    data = load(JOB / "rank-0.kineto.json.gz")
    data["traceEvents"] = [e for e in data["traceEvents"]
                           if not str(e.get("name", "")).startswith(("c10d::", "gloo:"))]
    data["distributedInfo"]["world_size"] = 1
    save(tmp_path / "rank-0.kineto.json.gz", data)
    assert refusal(tmp_path) == (f"{tmp_path.name}: no communication in ProfilerStep#3: "
                                 "nothing to replay.")


def test_kineto_alone_cannot_type_a_gloo_tensor_list(job):
    for rank in range(4):
        (job / f"rank-{rank}.et.json.gz").unlink()
    text = refusal(job)
    assert text.startswith("rank-0.kineto.json.gz: c10d::send at ")
    assert text.endswith("the profiler did not record its tensors' data type (a tensor list, "
                         "whose element type Kineto does not write); read it with the rank's "
                         "execution trace beside it (traces/execution.py).")


def test_a_file_of_neither_format(job):
    (job / "rank-0.kineto.json.gz").unlink()
    save(job / "rank-0.kineto.json.gz", {"hello": 1})
    assert refusal(job) == ("rank-0.kineto.json.gz: neither a Kineto trace (traceEvents) nor an "
                            "execution trace (nodes, schema).")


def test_a_real_gpu_rank_alone_is_missing_its_partner():
    folder = JOB.parent / "hta-nccl-resnet"
    assert refusal(folder) == ("hta-nccl-resnet: rank 1 of 2 is missing "
                               "(the files hold ranks [0]).")


def test_without_hta_the_reader_says_how_to_install_it(monkeypatch):
    real = builtins.__import__

    def no_hta(name, *args, **kwargs):
        if name.startswith("hta"):
            raise ImportError(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_hta)
    with pytest.raises(TraceError) as caught:
        kineto.load(JOB / "rank-0.kineto.json.gz")
    assert str(caught.value) == kineto.HTA_MISSING
    assert "pip install -e '.[traces]'" in kineto.HTA_MISSING
