"""The fabric, as data: example fabrics (*.yaml), the schema that checks a
fabric file (schema.py; the bounded file reader and YAML 1.2 loader in
yaml_loader.py, the one error type in errors.py, checks of the whole fabric
and its warnings in sanity.py, the JSON Schema editors read in jsonschema.py)
and the model derived from it (fabric.py: switches, endpoints, links, names,
DPIDs, ports and addresses; placement.py: which machine each node runs on
when a fabric is spread over several). Nothing here touches the system or imports from
traffic/: the lab, the controller, the engines and the planner all read the
fabric from here.

(planner.py is only an alias, kept so that `python -m topologies.planner`
still works: the planner is the package `planner`.)
"""
