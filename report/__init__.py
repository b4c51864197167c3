"""Results as people read them: nccl-tests tables, the fabric table, CSV, the
console lines of a run, and PNG figures. Pure functions of a run record."""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m report...` outside .venv runs in .venv
