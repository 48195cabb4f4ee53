"""dualgen: forward-mode AD for PyTorch, generated from a derivatives spec."""

__version__ = "0.1.0"
