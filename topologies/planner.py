"""Kept for old command lines and imports: ``python -m topologies.planner ...``
is ``python -m planner ...`` (the planner package)."""

import sys

from planner.cli import main

if __name__ == "__main__":
    sys.exit(main())
