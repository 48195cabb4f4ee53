"""The op -> JVP rule registry: the `Rule` record (`rule.py`, a leaf) and the
table of generated kernels and user rules (`table.py`), whose public names are
these."""

from .rule import Rule, output_names
from .table import (
    generated_kernels,
    load_kernels,
    loaded_packages,
    register_jvp,
    rule_for,
    rule_for_tracing,
    unload_kernels,
    unregister_jvp,
    using_kernels,
)

__all__ = [
    "Rule",
    "generated_kernels",
    "load_kernels",
    "loaded_packages",
    "output_names",
    "register_jvp",
    "rule_for",
    "rule_for_tracing",
    "unload_kernels",
    "unregister_jvp",
    "using_kernels",
]
