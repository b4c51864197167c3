"""all_gather_perf: nccl-tests' all_gather_perf on a fabric-lab fabric (docs/nccl-tests.md).

    python -m ncclperf.all_gather_perf [FABRIC] [nccl-tests flags] [--engine sim ...]
"""

import sys

from ncclperf.nccl_sweeps import command

main = command("all_gather_perf")

if __name__ == "__main__":
    sys.exit(main())
