"""The kept lab (`scripts/lab up`): a lab that stays up between commands.
Its keeper (keeper.py) owns the lab and answers on a unix socket, using
the lab only through its protocol (lab/protocol.py RunningLab); the record
and the JSON-lines requests both sides share (kept.py); the client that
`scripts/lab inspect|exec|down` and `run --lab` use (kept_client.py)."""
