"""The progress display: one line on a terminal with the time left, nothing
elsewhere; a sweep says how far it is, weighing each size by its bytes."""

import io

import pytest

from harness import TOPOLOGIES
from report.progress import Progress, left_text, time_left
from runs.experiment import Experiment
from runs.simulated import simulate_experiment
from topologies.fabric import load_fabric


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_time_left_is_the_time_so_far_scaled_by_what_remains():
    assert time_left(0.25, 10.0) == pytest.approx(30.0)
    assert time_left(0.5, 3.0) == pytest.approx(3.0)
    assert time_left(0.04, 10.0) is None            # too little done to say
    assert time_left(0.5, 0.5) is None              # too soon
    assert time_left(1.0, 10.0) is None
    assert [left_text(s) for s in (0.2, 42, 90, 7200)] == [
        "about 1 s left", "about 42 s left", "about 2 min left", "about 2.0 h left"]


def test_a_terminal_gets_one_line_rewritten_with_the_time_left():
    clock, out = Clock(), Terminal()
    show = Progress(out, clock=clock)
    show("[1/4] allreduce 32768 B: iteration 1/6")
    assert out.getvalue() == "\r\033[K# [1/4] allreduce 32768 B: iteration 1/6"
    clock.now += 20.0
    show.done(0.4)
    assert out.getvalue().endswith("\r\033[K# [1/4] allreduce 32768 B: iteration 1/6 "
                                   "(about 30 s left)")
    show.done(0.2)                                   # never goes back
    assert show.fraction == 0.4
    show("done")
    assert out.getvalue().endswith("\r\033[K")


def test_elsewhere_nothing_is_written():
    out = io.StringIO()                              # not a terminal: a pipe, a file, CI
    show = Progress(out)
    show("working")
    show.done(0.5)
    assert out.getvalue() == "" and not Progress(Terminal(), enabled=False).enabled


def test_a_sweep_says_how_far_it_is_by_bytes():
    class Recorder:
        def __init__(self):
            self.fractions, self.messages = [], []

        def __call__(self, message):
            self.messages.append(message)

        def done(self, fraction):
            self.fractions.append(fraction)
    seen = Recorder()
    exp = Experiment(engine="sim", algorithm="ring", minbytes=1 << 15, maxbytes=1 << 17,
                     stepfactor=4)
    simulate_experiment(load_fabric(TOPOLOGIES / "default.yaml"), exp, progress=seen)
    # one iteration a size in the simulator: 32K then 128K of 160K
    assert seen.fractions == [pytest.approx(32 / 160), pytest.approx(1.0)]
