"""The dualgen generator: derivatives.yaml -> checked model -> generated kernels.

Stages, each its own module, data flowing one way:
load (YAML -> raw entries) -> build (raw entries + torch schemas -> model)
-> analyse (derived formulas, zero-tangent branches) -> emit (templates)
-> write (black, atomic swap).
"""
