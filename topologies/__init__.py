"""Example fabrics (*.yaml), the fabric model, and the Mininet lab built from it."""
