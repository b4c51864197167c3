"""Kept for old command lines and imports: ``python -m topologies.planner ...``
is ``python -m planner ...``, and ``from topologies.planner import plan`` gets
the planner package's. (`calibrate` is now `calibrate_from_run`.)"""

import sys

from planner import *  # noqa: F401,F403
from planner import calibrate_from_run as calibrate  # noqa: F401
from planner.cli import main

if __name__ == "__main__":
    sys.exit(main())
