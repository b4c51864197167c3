"""The fabric, as data: example fabrics (*.yaml), the schema that checks a
fabric file (schema.py, on the project's validators, file reader and error
type in toolkit/; checks of the whole fabric and its warnings in sanity.py,
the JSON Schema editors read in jsonschema.py),
the kinds of fabric, a class each (kinds/: what each takes, lays out, prints
and tells cluster mode, the planner and the Clos model), and the model
derived from it (fabric.py: switches, endpoints, links, names,
DPIDs, ports and addresses; placement.py: which machine each node runs on
when a fabric is spread over several). Nothing here touches the system or
imports another package of the project but those below it (registries/,
toolkit/, policies/, networks/); the lab, the controller, the simulator and
the planner all read the fabric from here.
"""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m topologies...` outside .venv runs in .venv
