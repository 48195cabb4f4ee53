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


def error(line: int, label: str, message: str) -> str:
    return f"spec.yaml:{line}: error: {label}: {message}"


CASES = [
    (
        "collective_unknown_packing",
        entry(BROADCAST, "collective: linear", "sends: [tensors]"),
        [
            error(
                2,
                "c10d::broadcast_",
                "collective: 'linear' is not one of element_wise, rows, passes_through, no_data",
            )
        ],
    ),
    (
        "collective_sends_a_non_argument",
        entry(BROADCAST, "collective: element_wise", "sends: [tensor]"),
        [error(3, "c10d::broadcast_", "sends: 'tensor' is not an argument")],
    ),
    (
        "collective_receives_a_non_tensor",
        entry(BROADCAST, "collective: element_wise", "receives: [root_rank]"),
        [
            error(
                3,
                "c10d::broadcast_",
                "receives: 'root_rank' is a int, not a tensor or a list of them",
            )
        ],
    ),
    (
        "collective_reduce_of_the_wrong_type",
        entry(
            ALL_REDUCE,
            "collective: element_wise",
            "sends: [input]",
            "reduce: group_name",
            "returns: new",
        ),
        [
            error(
                4,
                "_c10d_functional::all_reduce",
                "reduce: 'group_name' is a Any, not a "
                "__torch__.torch.classes.c10d.ReduceOp or str",
            )
        ],
    ),
    (
        "collective_unknown_key",
        entry(
            BROADCAST,
            "collective: element_wise",
            "sends: [tensors]",
            "tensors: tensors_t",
        ),
        [
            error(
                4,
                "c10d::broadcast_",
                "unknown key 'tensors' in a collective's entry; allowed: name, "
                "collective, sends, receives, reduce, root, scatters, returns",
            )
        ],
    ),
    (
        "collective_passes_through_takes_nothing_else",
        entry(WAIT, "collective: passes_through", "sends: [tensor]"),
        [
            error(
                3,
                "_c10d_functional::wait_tensor",
                "a 'passes_through' collective takes no 'sends'",
            )
        ],
    ),
    (
        "collective_nothing_sent_or_received",
        entry(BROADCAST, "collective: element_wise", "root: root_rank"),
        [error(1, "c10d::broadcast_", "a collective sends or receives something")],
    ),
    (
        "collective_schema_mismatch",
        entry(WAIT.replace("tensor)", "t)"), "collective: passes_through"),
        [
            error(
                1,
                "_c10d_functional::wait_tensor",
                "schema does not match torch: argument 1 is 'Tensor t', torch has "
                "'Tensor tensor' (torch: _c10d_functional::wait_tensor(Tensor tensor) -> Tensor)",
            )
        ],
    ),
]

test_collective_entry_error_is_reported_exactly = make_error_test(CASES)
