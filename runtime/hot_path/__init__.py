"""The C++ hot path's Python side: its state (`state.py`: what the mode reads on
every op, a leaf) apart from its policy (`policy.py`: which ops it takes, bound
to the extension when the C++ backend is chosen). The C++ half is
`csrc/dualgen/hot_path*.cpp`."""
