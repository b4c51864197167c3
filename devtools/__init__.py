"""Developer tools, not part of a run: the test bed (testbed.py, machines
for cluster mode as containers on this host, `scripts/lab testbed`) and the
VM test (vmtest.py, a Debian VM that runs set-up and a short run,
`scripts/lab vm-test`), each booted from a root file system debootstrap
builds (rootfs.py). On the top layer: they may use any package, and no
product package uses them."""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m devtools...` outside .venv runs in .venv
