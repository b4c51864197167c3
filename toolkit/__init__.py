"""What every input of the project is read with, apart from the model: the
one-sentence error naming file and key and how values are quoted
(errors.py), rates, sizes and counts with their units (units.py), the YAML
and file reader (yaml_loader.py), the validators and `normalise`
(validators.py), and the hand-over of a command to the project's .venv
(handover.py). The bottom layer: nothing here imports the model."""
