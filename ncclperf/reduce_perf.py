"""reduce_perf: nccl-tests' reduce_perf on a fabric-lab fabric (docs/nccl-tests.md).

    python -m ncclperf.reduce_perf [FABRIC] [nccl-tests flags] [--engine sim ...]
"""

import sys

from ncclperf.nccl_sweeps import command

main = command("reduce_perf")

if __name__ == "__main__":
    sys.exit(main())
