"""A training job's own recorded trace, read into one model (traces/trace_model.py):
per rank, one iteration's compute spans and communication operations with
their process groups, from the PyTorch profiler's trace JSON (Kineto) or
PyTorch's execution trace. What the replay does with it is sim/'s and runs/'."""
