"""sendrecv_perf: nccl-tests' sendrecv_perf on a fabric-lab fabric (docs/nccl-tests.md).

    python -m ncclperf.sendrecv_perf [FABRIC] [nccl-tests flags] [--engine sim ...]
"""

import sys

from ncclperf.nccl_sweeps import command

main = command("sendrecv_perf")

if __name__ == "__main__":
    sys.exit(main())
