"""alltoall_perf: nccl-tests' alltoall_perf on a fabric-lab fabric (docs/nccl-tests.md).

    python -m ncclperf.alltoall_perf [FABRIC] [nccl-tests flags] [--engine sim ...]
"""

import sys

from ncclperf.nccl_sweeps import command

main = command("alltoall_perf")

if __name__ == "__main__":
    sys.exit(main())
