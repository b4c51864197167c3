#!/usr/bin/env python3
"""Mutation testing of the pure core: how many small, plausible bugs the pure
suite catches, per module, and which it lets through.

    scripts/lab bench mutation [--only collectives/metrics.py ...] [--tests tests/test_x.py ...]
                               [--workdir DIR]
                               [--jobs 2] [--fail-under 85] [--json out.json]

mutmut (3.x, configured in setup.cfg's [mutmut] section: which modules are the
pure core, which tests run) puts every mutant of those modules into a copy
of the tree, behind a switch, and runs the tests that reach the mutated
function with that one mutant on. A mutant is killed when some test fails,
survives when every test passes. Timeouts count as killed (the mutant made
the code loop or crawl and a test noticed); a mutant that no test reaches
counts as surviving: nothing would notice it.

The copy is made from this checkout's files as they are now (committed or
not, ignored files left out) into --workdir (default results/mutation), so
edits made while it runs do not reach it; mutmut keeps its results there, and
a second run re-checks only the mutants of functions that changed, or every
mutant once a test has changed (`forget_if_tests_changed`).

Prints, per module, the mutants, killed, timed out, survived, untested and
the score, then every surviving mutant as its name and changed lines.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from harness import REPO
from harness.commandline import command_line

# mutmut's exit codes per mutant (mutmut/stats.py), by what they mean here.
KILLED = {1, 3, 37}
TIMEOUT = {24, -24, 36, 152, 255}
SURVIVED = {0}
UNTESTED = {5, 33}


def forget_if_tests_changed(dest: Path) -> None:
    """mutmut re-checks only the mutants of functions that changed, so a
    test added since the last run would never meet the mutants it kills:
    where any file under tests/ changed, its results go and every mutant
    is checked again."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "tests").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    stamp, now = dest / ".tests-digest", digest.hexdigest()
    if stamp.exists() and stamp.read_text() != now:
        shutil.rmtree(dest / "mutants", ignore_errors=True)
    stamp.write_text(now)


def copy_tree(dest: Path) -> None:
    """This checkout's files as they are (tracked or new, not ignored) into `dest`,
    leaving mutmut's own folder in `dest` alone."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    wanted = {Path(os.fsdecode(p)) for p in listed if p}
    dest.mkdir(parents=True, exist_ok=True)
    for old in sorted(dest.rglob("*"), reverse=True):
        rel = old.relative_to(dest)
        if rel.parts[0] in ("mutants", ".hypothesis") or rel in wanted:
            continue
        if old.is_file() or old.is_symlink():
            old.unlink()
        elif old.is_dir() and not any(old.iterdir()):
            old.rmdir()
    for rel in wanted:
        src = REPO / rel
        if not src.is_file():
            continue
        target = dest / rel
        if target.is_file() and target.read_bytes() == src.read_bytes():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def restrict(setup_cfg: Path, modules: list, tests: list) -> None:
    """The copy's [mutmut] section mutates only `modules` (if any) and runs
    only `tests` (if any)."""
    cfg = configparser.ConfigParser()
    cfg.read(setup_cfg)
    if modules:
        cfg["mutmut"]["only_mutate"] = "\n" + "\n".join(modules)
    if tests:
        cfg["mutmut"]["pytest_add_cli_args_test_selection"] = "\n" + "\n".join(tests)
    with open(setup_cfg, "w") as f:
        cfg.write(f)


def outcomes(workdir: Path) -> dict:
    """{module path: {mutant name: exit code}} from mutmut's .meta files."""
    found = {}
    for meta in sorted((workdir / "mutants").rglob("*.py.meta")):
        module = str(meta.relative_to(workdir / "mutants"))[:-len(".meta")]
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        if codes:
            found[module] = codes
    return found


def verdict(code) -> str:
    if code in KILLED:
        return "killed"
    if code in TIMEOUT:
        return "timeout"
    if code in SURVIVED:
        return "survived"
    if code in UNTESTED:
        return "untested"
    return "not checked" if code is None else "suspicious"


def score(counts: Counter) -> float:
    """Killed and timed-out mutants over every mutant checked (survived and
    untested ones count against it)."""
    caught = counts["killed"] + counts["timeout"]
    checked = caught + counts["survived"] + counts["untested"]
    return 100.0 * caught / checked if checked else 0.0


def changed_lines(mutmut: list, workdir: Path, name: str) -> list:
    """The mutant's diff, the removed and added lines only."""
    shown = subprocess.run(mutmut + ["show", name], cwd=workdir, capture_output=True, text=True)
    return [ln for ln in shown.stdout.splitlines()
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def arguments(argv):
    ap = command_line(__doc__)
    ap.add_argument("--only", nargs="+", metavar="MODULE",
                    help="mutate these modules instead of setup.cfg's only_mutate")
    ap.add_argument("--tests", nargs="+", metavar="PATH",
                    help="run only these tests (quicker, while working on one module's tests)")
    ap.add_argument("--workdir", type=Path, default=REPO / "results" / "mutation")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                    help="exit 1 when the total score is below PCT")
    ap.add_argument("--json", type=Path, help="write the scores and survivors here")
    ap.add_argument("--no-diffs", action="store_true", help="survivors by name only")
    return ap.parse_args(argv)


def tally(found: dict):
    """Per module its verdict counts, the total, and the mutants not killed."""
    total, rows, survivors = Counter(), [], []
    for module, codes in found.items():
        counts = Counter(verdict(c) for c in codes.values())
        total.update(counts)
        rows.append((module, counts))
        survivors += [(module, name, verdict(c)) for name, c in sorted(codes.items())
                      if verdict(c) in ("survived", "untested", "suspicious")]
    return rows, total, survivors


def report(rows, total, survivors, diff_of) -> list:
    """Prints the score table and the survivors; returns the survivors listed."""
    print(f"# {'module':<34} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8} "
          f"{'untested':>8} {'score':>6}")
    for module, c in rows + [("total", total)]:
        print(f"  {module:<34} {sum(c.values()):>7} {c['killed']:>6} {c['timeout']:>7} "
              f"{c['survived']:>8} {c['untested']:>8} {score(c):>5.1f}%")
    print(f"# Surviving mutants ({len(survivors)}):")
    listed = []
    for module, name, what in survivors:
        diff = diff_of(name)
        listed.append({"module": module, "mutant": name, "verdict": what, "diff": diff})
        print(f"  {name}  [{what}]")
        for ln in diff:
            print(f"      {ln.strip()[:150]}")
    return listed


def main(argv=None) -> int:
    args = arguments(argv)
    mutmut = [str(Path(sys.executable).with_name("mutmut"))]
    if not Path(mutmut[0]).exists():
        print("mutmut is not installed in this environment: run `sudo scripts/lab setup`",
              file=sys.stderr)
        return 2
    workdir = args.workdir.resolve()
    copy_tree(workdir)
    forget_if_tests_changed(workdir)
    if args.only or args.tests:
        restrict(workdir / "setup.cfg", args.only, args.tests)
    started = time.monotonic()
    proc = subprocess.run(mutmut + ["run", "--max-children", str(args.jobs)], cwd=workdir,
                          capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        print((proc.stdout + proc.stderr)[-4000:], file=sys.stderr)
        print(f"mutmut run failed (exit {proc.returncode}) in {workdir}: the pure suite must "
              f"pass unmutated first", file=sys.stderr)
        return 2
    found = outcomes(workdir)
    if args.only:
        found = {m: c for m, c in found.items() if m in args.only}
    rows, total, survivors = tally(found)
    print(f"# Mutation testing of the pure core: mutmut, {args.jobs} jobs, {elapsed:.0f} s; "
          f"copy in {workdir}")
    listed = report(rows, total, survivors, lambda name: [] if args.no_diffs
                    else changed_lines(mutmut, workdir, name))
    if args.json:
        args.json.write_text(json.dumps({
            "seconds": round(elapsed, 1), "score_pct": round(score(total), 2),
            "modules": {m: dict(c, score_pct=round(score(c), 2)) for m, c in rows},
            "survivors": listed}, indent=1))
    if args.fail_under is not None and score(total) < args.fail_under:
        print(f"# score {score(total):.1f}% is below {args.fail_under:g}%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
