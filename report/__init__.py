"""Results as people read them: nccl-tests tables, the fabric table, CSV, the
console lines of a run, and PNG figures. Pure functions of a run record."""
