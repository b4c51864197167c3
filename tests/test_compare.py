"""report/compare.py: runs side by side. Three simulated runs of the default
fabric (ring, tree, ring on a single path; no root), made once, and copies
of them changed as a lab's run, an older summary or another collective
would be: the ratios are the summaries' own times over the first run's,
flagged sizes are marked in the table, the JSON and the figure, the figure
has a curve per run labelled measured or simulated, and every refusal is
one sentence with exit status 2."""

import copy
import json
import subprocess
import sys

import pytest

from harness import REPO
from report import busbw_plot, canvas, compare, plots

DEFAULT = REPO / "topologies" / "default.yaml"


def simulate(results, *options):
    """A simulated run of the default fabric into `results`: its folder."""
    subprocess.run([sys.executable, str(REPO / "run_topology.py"), str(DEFAULT), "--engine",
                    "sim", "--results", str(results), *options], check=True,
                   capture_output=True, text=True, timeout=120)
    (folder,) = [p for p in results.iterdir() if p.is_dir()]
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{name: results folder}: ring and tree at 32K and 128K, the ring on a
    single path up to 512K."""
    base = tmp_path_factory.mktemp("runs")
    return {"ring": simulate(base / "ring", "-a", "ring", "-b", "32K", "-e", "128K"),
            "tree": simulate(base / "tree", "-a", "tree", "-b", "32K", "-e", "128K"),
            "single": simulate(base / "single", "-a", "ring", "--policy", "single-path",
                               "-b", "32K", "-e", "512K")}


def summary(folder) -> dict:
    return json.loads((folder / "summary.json").read_text())


def variant(tmp_path, folder, name, change) -> str:
    """A copy of a run's summary.json in tmp_path/name, changed by `change`."""
    data = summary(folder)
    change(data)
    (tmp_path / name).mkdir()
    (tmp_path / name / "summary.json").write_text(json.dumps(data))
    return str(tmp_path / name)


def as_lab_run(data: dict) -> None:
    """As a lab's run from before provenance was recorded, whose verdict
    flagged its smallest size."""
    del data["provenance"]
    record = data["collectives"]
    del record["simulated"]
    record["experiment"]["engine"] = "agents"
    for r in record["runs"]:
        r["wrong"] = 0
    record["runs"][0]["flags"] = ["over-rate", "below-resolution"]


def run_compare(*args, cwd=None):
    """python -m report.compare ARGS: (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "report.compare", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return done.returncode, done.stdout, done.stderr


def test_the_ratios_are_each_runs_time_over_the_first_runs(runs, tmp_path):
    code, out, err = run_compare(runs["ring"], runs["tree"], runs["single"] / "summary.json",
                                 "--json", "--out", tmp_path)
    assert code == 0, err
    comp = json.loads(out)
    times = [{r["size_bytes"]: r["time_s"] for r in summary(runs[n])["collectives"]["runs"]}
             for n in ("ring", "tree", "single")]
    assert [row["size_bytes"] for row in comp["sizes"]] == [32768, 131072, 524288]
    for row in comp["sizes"]:
        size = row["size_bytes"]
        for i, cell in enumerate(row["runs"]):
            if size not in times[i]:
                assert cell is None                  # the sweep did not reach it
                continue
            assert cell["time_us"] == pytest.approx(times[i][size] * 1e6)
            expected = times[i][size] / times[0][size] if size in times[0] else None
            assert cell["ratio"] == pytest.approx(expected) if expected else cell["ratio"] is None
            assert cell["quote"] and cell["flags"] == [] and cell["wrong"] is None
    assert comp["sizes"][0]["runs"][1]["ratio"] > 1.5          # the tree is slower here
    assert [h["algorithm"] for h in comp["runs"]] == ["ring", "tree", "ring"]
    assert {h["kind"] for h in comp["runs"]} == {"simulated"}
    assert comp["figure"] == str(tmp_path / "compare.png")
    assert plots.is_png(tmp_path / "compare.png")


def test_the_header_says_what_differs_and_where_each_run_came_from(runs, tmp_path):
    code, out, err = run_compare(runs["ring"], runs["tree"], "--out", tmp_path)
    assert code == 0 and err == ""
    lines = out.splitlines()
    origin = summary(runs["ring"])["provenance"]
    assert lines[0] == "compare  2 runs, each against run 1"
    assert lines[1].startswith(f"run 1    {runs['ring'].name} (simulated; ")
    assert lines[2] == ("         leaf-spine-2x2: 2 spines x 2 leaves x 2 servers per leaf = "
                        "4 servers, 4 switches, 8 links")
    for algorithm in ("ring", "tree"):
        assert (f"allreduce ({algorithm}), engine sim, network RoCEv2, policy ecmp, 4 ranks, "
                "links 20 Mbit/s") in out
    assert f"commit {origin['commit'][:12]}" in out and f"started {origin['started']}" in out
    assert f"command {origin['command']}" in out
    assert "differ   algorithm (1 ring; 2 tree)" in lines
    (same,) = [line for line in lines if line.startswith("same")]
    assert same == ("same     fabric, collective, engine, network, policy, ranks, "
                    "link_rate_mbit, fabric digest, commit, host")


def test_another_policy_is_another_fabric_digest(runs):
    comp = compare.comparison(compare.load_runs([runs["ring"], runs["single"]]))
    digests = [summary(runs[n])["provenance"]["fabric_sha256"] for n in ("ring", "single")]
    assert comp["differences"]["fabric digest"] == {"differ": True, "values": digests}
    assert comp["differences"]["policy"] == {"differ": True, "values": ["ecmp", "single-path"]}
    assert comp["differences"]["host"]["differ"] is False
    assert compare.difference_lines(comp)[0] == (
        f"differ   policy (1 ecmp; 2 single-path), fabric digest (1 {digests[0][:12]}; "
        f"2 {digests[1][:12]})")


def test_a_flagged_size_is_marked_and_its_ratio_not_quoted(runs, tmp_path):
    lab = variant(tmp_path, runs["tree"], "lab", as_lab_run)
    code, out, err = run_compare(runs["ring"], lab, "--out", tmp_path)
    assert code == 0, err
    assert "run 2    lab (measured; " in out
    assert f"         {compare.NO_PROVENANCE}" in out
    assert "unknown  fabric digest, commit, host: run(s) 2 have no provenance" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.strip() and line.split()[0].isdigit()}
    ring = summary(runs["ring"])["collectives"]["runs"]
    tree = summary(runs["tree"])["collectives"]["runs"]
    small, large = rows["32768"], rows["131072"]
    assert small[-1] == f"{tree[0]['time_s'] / ring[0]['time_s']:.2f}!"      # not to quote
    assert small[-4].endswith("!") and small[-2] == "0"                  # busbw marked; #wrong
    assert large[-1] == f"{tree[1]['time_s'] / ring[1]['time_s']:.2f}"    # quoted
    assert "#   run 2: 32768 B over-rate below-resolution" in out
    code, out, _ = run_compare(lab, runs["ring"], "--json", "--out", tmp_path)
    cells = [row["runs"][1] for row in json.loads(out)["sizes"]]
    assert [c["quote"] for c in cells] == [False, True]     # the first run's flag counts too
    assert cells[0]["flags"] == [] and json.loads(out)["runs"][0]["provenance"] is None


@pytest.fixture
def kept(monkeypatch):
    """The figures compare writes, left whole after their PNG is written."""
    figures = []

    def save_and_keep(fig, path):
        fig.clear = lambda *args, **kwargs: None
        figures.append(fig)
        return canvas.save(fig, path)
    monkeypatch.setattr(compare, "save", save_and_keep)
    return figures


def test_the_figure_has_a_curve_per_run_and_rings_flagged_sizes(runs, tmp_path, kept):
    lab = variant(tmp_path, runs["tree"], "lab", as_lab_run)
    assert compare.main([str(runs["ring"]), lab, str(runs["single"]), "--json",
                         "--out", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "compare.png").is_file()
    (ax,) = kept[0].axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    ring, single = runs["ring"].name, runs["single"].name
    assert labels == [f"1: {ring}, allreduce (ring), simulated",
                      "2: lab, allreduce (tree), measured",
                      f"3: {single}, allreduce (ring), simulated",
                      "link rate (0.0025 GB/s)", busbw_plot.FLAGGED_LABEL]
    for label, folder in zip(labels, (runs["ring"], tmp_path / "lab", runs["single"])):
        (line,) = [l for l in ax.lines if l.get_label() == label]
        rows = summary(folder)["collectives"]["runs"]
        assert list(line.get_xdata()) == [r["size_bytes"] for r in rows]
        assert list(line.get_ydata()) == [r["busbw_gbps"] for r in rows]
    (rings,) = [l for l in ax.lines if l.get_label() == busbw_plot.FLAGGED_LABEL]
    assert list(rings.get_xdata()) == [32768]
    assert [t.get_text() for t in ax.texts] == ["over-rate\nbelow-resolution"]
    assert ax.get_title().replace("\n", " ") == ("allreduce, measured and simulated: bus bandwidth by message "
                              "size, 3 runs compared")


def test_runs_of_different_networks_are_labelled_with_theirs(runs, tmp_path, kept):
    """Where the runs' network technologies differ, each curve of
    compare.png names its run's beside the folder; where they are the same
    (the test above), the labels leave it out."""
    def on_infiniband(data):
        data["network"].update(technology="infiniband", title="InfiniBand")
    other = variant(tmp_path, runs["tree"], "ib", on_infiniband)
    assert compare.main([str(runs["ring"]), other, "--json", "--out", str(tmp_path)]) == 0
    labels = [t.get_text() for t in kept[0].axes[0].get_legend().get_texts()]
    assert labels[:2] == [f"1: {runs['ring'].name} (RoCEv2), allreduce (ring), simulated",
                          "2: ib (InfiniBand), allreduce (tree), simulated"]


def test_different_collectives_are_compared_and_said(runs, tmp_path):
    def allgather(data):
        data["collectives"]["experiment"]["collective"] = "allgather"
    other = variant(tmp_path, runs["ring"], "gather", allgather)
    code, out, _ = run_compare(runs["ring"], other, "--out", tmp_path)
    assert code == 0
    assert ("note     the runs ran different collectives (1 allreduce, 2 allgather): busbw "
            "compares them, their times are of different work") in out
    assert "differ   collective (1 allreduce; 2 allgather)" in out


@pytest.mark.parametrize("make, sentence", [
    (lambda tmp: [tmp / "gone"], "compare: {tmp}/gone: no such results folder or summary.json"),
    (lambda tmp: [tmp], "compare: {tmp} has no summary.json: is it a results folder of "
                        "run_topology.py?"),
    (lambda tmp: [], "compare: it takes two runs or more to compare, got 1"),
    (lambda tmp: [_write(tmp / "step", {"fabric": "f", "step": {"summary": {"step_s": 1.0}}})],
     "compare: run 2 ({tmp}/step/summary.json) is a training step and run 1 a size sweep: "
     "compare sweeps with sweeps, steps with steps"),
    (lambda tmp: [_write(tmp / "check", {"fabric": "f"})],
     "compare: {tmp}/check/summary.json has no collectives to compare (not a sweep's "
     "summary.json)"),
])
def test_what_cannot_be_compared_is_one_sentence(runs, tmp_path, make, sentence):
    code, out, err = run_compare(runs["ring"], *make(tmp_path), "--out", tmp_path)
    assert (code, out, err) == (2, "", sentence.format(tmp=tmp_path) + "\n")
    assert not (tmp_path / "compare.png").exists()


def _write(folder, data):
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps(data))
    return folder


def test_a_summary_that_is_not_json_is_one_sentence(runs, tmp_path):
    (tmp_path / "summary.json").write_text("{")
    code, _, err = run_compare(runs["ring"], tmp_path / "summary.json")
    assert code == 2 and err.startswith(f"compare: {tmp_path}/summary.json is not a readable "
                                        "summary.json (") and err.count("\n") == 1


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(),
                    reason="needs the set-up's .venv (scripts/lab setup)")
def test_lab_compare_takes_the_users_paths_and_writes_there(runs, tmp_path):
    for name in ("ring", "tree"):
        (tmp_path / name).symlink_to(runs[name])
    done = subprocess.run([str(REPO / "scripts" / "lab"), "compare", "ring", "tree"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("compare  2 runs, each against run 1")
    assert done.stdout.rstrip().endswith("\nfigure   compare.png")      # where the user is
    assert (tmp_path / "compare.png").is_file()


def test_comparison_is_a_pure_function_of_the_summaries(runs):
    first = compare.load_runs([runs["ring"], runs["tree"]])
    again = copy.deepcopy(first)
    assert compare.comparison(first) == compare.comparison(again)
    assert compare.table_text(compare.comparison(first)).splitlines()[1].startswith(
        "#       size  time (us)  busbw GB/s  b/link  #wrong  time (us)")


def test_a_run_that_does_not_name_its_network_leaves_it_unknown():
    base = {"fabric": "f", "collective": "allreduce", "algorithm": "ring", "engine": "sim",
            "policy": "ecmp", "ranks": 4, "link_rate_mbit": 20.0,
            "provenance": {"fabric_sha256": "a", "commit": "c", "host": {}}}
    headers = [dict(base, number=1, network="RoCEv2"), dict(base, number=2, network=None)]
    comp = {"runs": headers, "differences": compare.differences(headers), "notes": []}
    assert comp["differences"]["network"]["differ"] is None
    lines = compare.difference_lines(comp)
    assert "unknown  network: run(s) 2 do not name it (written before runs did)" in lines
    both = [dict(base, number=1, network="RoCEv2"), dict(base, number=2, network="InfiniBand")]
    assert compare.difference_lines({"runs": both, "differences": compare.differences(both),
                                     "notes": []})[0] == "differ   network (1 RoCEv2; 2 InfiniBand)"
