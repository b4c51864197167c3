"""The figures of a run register themselves (report/png_*.py, `FIGURES`):
each says its file, its place and when the run has nothing for it; a new
figure is one new module, which every run then writes."""

import os
import shutil
import subprocess
import sys
import textwrap

from harness import REPO
from report.figures import FIGURES, RunFigure


def test_the_three_figures_in_their_order():
    assert FIGURES.names() == ("fabric.png", "busbw.png", "timeline.png")
    assert all(isinstance(f, RunFigure) for f in FIGURES.values())


def test_a_new_figure_is_one_new_file(tmp_path):
    shutil.copytree(REPO / "report", tmp_path / "report",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "report" / "png_sizes.py").write_text(textwrap.dedent('''
        from matplotlib.figure import Figure
        from report.figures import FIGURES, RunFigure

        @FIGURES.register
        class SizesPng(RunFigure):
            name, order = "sizes.png", 4

            def draw(self, fabric, result, compared, label):
                figure = Figure()
                figure.add_subplot().bar(range(len(result.runs)),
                                         [r["size_bytes"] for r in result.runs])
                return figure
    '''))
    program = textwrap.dedent(f'''
        import sys
        from dataclasses import replace
        from report.figures import write_figures
        from runs.experiment import experiment_from
        from runs.simulated import simulate_experiment
        from topologies.fabric import load_fabric
        fabric = load_fabric({str(REPO / "topologies" / "default.yaml")!r})
        exp = replace(experiment_from(fabric), engine="sim", minbytes=32768, maxbytes=65536)
        written = write_figures(fabric, simulate_experiment(fabric, exp), sys.argv[1])
        print([p.name for p in written])
    ''')
    # the copied report/ first, the rest of the project from this checkout
    out = subprocess.run([sys.executable, "-c", program, str(tmp_path / "run")], cwd=tmp_path,
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['fabric.png', 'busbw.png', 'timeline.png', 'sizes.png']"
    assert (tmp_path / "run" / "sizes.png").stat().st_size > 1000
