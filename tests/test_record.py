"""The run record (runs/record.py): its fields in summary.json's order, a
part no backend produced left out and one produced as None kept, and a
backend's part the record has no field for refused."""

import json

import pytest

from harness.fabrics import leaf_spine
from report.write import write_summary
from runs.experiment import Experiment
from runs.record import ABSENT, FIELDS, RunRecord
from runs.simulated import simulate_experiment

COMMON = {"experiment": {"collective": "allreduce"}, "ranks": ["h1", "h2"], "gpus_per_server": 1,
          "alpha_s": 1e-4, "beta_s_per_byte": 4e-7, "link_rate_mbit": 20.0, "runs": [],
          "timeline": None}


def test_the_fields_are_summary_jsons_order():
    assert FIELDS == ("experiment", "ranks", "gpus_per_server", "probe", "idle_latency",
                      "alpha_s", "beta_s_per_byte", "link_rate_mbit", "runs", "simulated",
                      "fidelity", "uplink_tx_bytes", "tiers", "cross_traffic", "timeline",
                      "failures", "routing", "figures")


def test_a_part_not_produced_is_left_out_and_one_produced_as_none_stays():
    record = RunRecord.from_parts(COMMON, {"routing": {"policy": "ecmp"}, "cross_traffic": None,
                                           "probe": ["h1", "h2"]})
    out = record.to_dict()
    assert list(out) == ["experiment", "ranks", "gpus_per_server", "probe", "alpha_s",
                         "beta_s_per_byte", "link_rate_mbit", "runs", "cross_traffic",
                         "timeline", "routing"]
    assert out["cross_traffic"] is None and out["timeline"] is None
    assert record.failures is ABSENT and not record.failures and not record.fidelity


def test_a_backends_part_wins_and_an_unknown_one_is_refused():
    record = RunRecord.from_parts(COMMON, {"timeline": {"events": []}})
    assert record.timeline == {"events": []}
    with pytest.raises(ValueError, match="finish returned flavour, which the run record"):
        RunRecord.from_parts(COMMON, {"flavour": 1})


def test_a_simulated_record_and_summary_json_hold_the_same_keys_in_order(tmp_path):
    record = simulate_experiment(leaf_spine(2, 2, 2, rate=20),
                                 Experiment(engine="sim", minbytes=1 << 15, maxbytes=1 << 15))
    assert list(record.to_dict()) == [
        "experiment", "ranks", "gpus_per_server", "probe", "idle_latency", "alpha_s",
        "beta_s_per_byte", "link_rate_mbit", "runs", "simulated", "fidelity",
        "uplink_tx_bytes", "tiers", "cross_traffic", "timeline"]
    record.figures = ["busbw.png"]
    write_summary({"fabric": "t", "collectives": record, "compared": {"rhd": record}}, tmp_path,
                  False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["collectives"]) == [*record.to_dict()]
    assert summary["collectives"]["figures"] == ["busbw.png"]
    assert summary["compared"]["rhd"]["runs"][0]["size_bytes"] == 1 << 15
