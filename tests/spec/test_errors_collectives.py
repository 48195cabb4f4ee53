"""Errors in a collective's entry (`collective:`): every name checked against
the collective's schema, one line each, nothing written."""

from __future__ import annotations

from spec_error_cases import entry, make_error_test

BROADCAST = (
    "c10d::broadcast_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup "
    "process_group, int root_rank, int root_tensor, bool async_op=True, int timeout=-1) "
    "-> (Tensor[], __torch__.torch.classes.c10d.Work)"
)
WAIT = "_c10d_functional::wait_tensor(Tensor tensor) -> Tensor"
ALL_REDUCE = "_c10d_functional::all_reduce(Tensor input, str reduce_op, Any group_name) -> Tensor"

# (id, spec, the line of its one error; the message), the error naming the entry's
# op: a case is two lines (black would give each field one).
ONE_ERROR = [
    ("collective_unknown_packing", entry(BROADCAST, "collective: linear", "sends: [tensors]"), 2,
     "collective: 'linear' is not one of element_wise, rows, passes_through, no_data"),
    ("collective_sends_a_non_argument", entry(BROADCAST, "collective: element_wise", "sends: [tensor]"), 3,
     "sends: 'tensor' is not an argument"),
    ("collective_receives_a_non_tensor", entry(BROADCAST, "collective: element_wise", "receives: [root_rank]"), 3,
     "receives: 'root_rank' is a int, not a tensor or a list of them"),
    ("collective_reduce_of_the_wrong_type", entry(ALL_REDUCE, "collective: element_wise", "sends: [input]", "reduce: group_name", "returns: new"), 4,
     "reduce: 'group_name' is a Any, not a __torch__.torch.classes.c10d.ReduceOp or str"),
    ("collective_unknown_key", entry(BROADCAST, "collective: element_wise", "sends: [tensors]", "tensors: tensors_t"), 4,
     "unknown key 'tensors' in a collective's entry; allowed: name, collective, sends, receives, reduce, root, scatters, returns"),
    ("collective_passes_through_takes_nothing_else", entry(WAIT, "collective: passes_through", "sends: [tensor]"), 3,
     "a 'passes_through' collective takes no 'sends'"),
    ("collective_nothing_sent_or_received", entry(BROADCAST, "collective: element_wise", "root: root_rank"), 1,
     "a collective sends or receives something"),
    ("collective_schema_mismatch", entry(WAIT.replace("tensor)", "t)"), "collective: passes_through"), 1,
     "schema does not match torch: argument 1 is 'Tensor t', torch has 'Tensor tensor' (torch: _c10d_functional::wait_tensor(Tensor tensor) -> Tensor)"),
]  # fmt: skip


def error(line: int, spec: str, message: str) -> str:
    """The error line for `spec`'s entry (its op named as the spec names it)."""
    op = spec.removeprefix("- name: ").split("(")[0]
    return f"spec.yaml:{line}: error: {op}: {message}"


CASES = [(id, spec, [error(line, spec, why)]) for id, spec, line, why in ONE_ERROR]

test_collective_entry_error_is_reported_exactly = make_error_test(CASES)
