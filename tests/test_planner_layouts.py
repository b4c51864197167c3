"""`python -m planner --layouts`: the layout search on each simulated
design, its flags refused in one line."""

import json

import pytest

from planner.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv,words", [
    (["--gpus", "64", "--layouts"], "--layouts needs the model"),
    (["--gpus", "64", "--model", "gpt-175b"], "--model goes with --layouts"),
    (["--gpus", "64", "--layouts", "--model", "gpt-9"], "--model: no model called 'gpt-9'"),
    (["--gpus", "64", "--layouts", "--model", "gpt-175b", "--params", "1e9"], "not both"),
    (["--gpus", "64", "--layouts", "--params", "1e9", "--efficiency", "2"],
     "--efficiency must be above 0 and at most 1"),
])
def test_bad_layout_flags_are_one_line(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and words in err and err.count("\n") == 1 and not out


def test_layouts_per_design_on_a_published_model(capsys):
    code, out, err = run(capsys, "--gpus", "1024", "--model", "gpt-175b", "--layouts",
                         "--batch-tokens", "3M", "--json")
    assert code == 0, err
    t = json.loads(out)["layouts"]
    assert t["model"] == "gpt-175b" and t["gpus"] == 1024
    assert {b["wiring"] for b in t["designs"]} >= {"server"}
    for b in t["designs"]:
        assert b["best"], b
        days = [r["days"] for r in b["best"]]
        assert days == sorted(days)
        for r in b["best"]:
            assert r["memory_gb"] <= 80 and 0 < r["mfu"] < 1
            assert 1.5e6 <= r["batch_tokens"] <= 4.5e6


def test_layouts_as_text(capsys):
    code, out, _ = run(capsys, "--gpus", "256", "--params", "7e9", "--layouts")
    assert code == 0
    assert "Parallel layouts: a GPT shaped for 7e+09 parameters" in out
    assert "MFU" in out and "bubble" in out and "TP" in out
