"""The fabric, as data: example fabrics (*.yaml), the schema that checks a
fabric file (schema.py; the bounded file reader and YAML 1.2 loader in
yaml_loader.py, the one error type in errors.py, checks of the whole fabric
and its warnings in sanity.py, the JSON Schema editors read in jsonschema.py),
the kinds of fabric, a class each (kinds/: what each takes, lays out, prints
and tells cluster mode, the planner and the Clos model), and the model
derived from it (fabric.py: switches, endpoints, links, names,
DPIDs, ports and addresses; placement.py: which machine each node runs on
when a fabric is spread over several). Nothing here touches the system or
imports another package of the project but those below it (registries/,
policies/, networks/); the lab, the controller, the simulator and the
planner all read the fabric from here.
Besides, handover.py: every command's hand-over to the project's .venv
(standard library only, so that any layer may call it first).
"""

from topologies.handover import hand_over_module

hand_over_module(__name__)  # `python -m topologies...` outside .venv runs in .venv
