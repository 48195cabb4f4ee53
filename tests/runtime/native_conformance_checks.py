"""Shared by the test_native_conformance_*.py modules (conformance with PyTorch's
own forward-AD tests), and used by test_batched_tangents.py and
test_inplace_comparisons.py: running one program under native PyTorch and under
dualgen and comparing the results.

The tests are written from reading what `test/test_autograd.py` in
pytorch/pytorch checks in `TestAutogradForwardMode`,
`TestAutogradForwardModeBatchedGrad` and the forward-AD tests of `TestAutograd`
(one test per behaviour, in our own words). Each program takes an `Api` (the
forward-AD module and the gradcheck to use) and runs once against native PyTorch
(`torch.autograd.forward_ad`, `torch.autograd.gradcheck`) and once against dualgen
(`dualgen.forward_ad`, `dualgen.gradcheck`); `conform` asserts the same result:
values, dtypes, tangent presence (None against None), identities returned as
booleans, or the same error type with the key phrase PyTorch's test looks for.

Every behaviour matches native. Where dualgen differs on purpose (nested levels,
JVPs derived from `backward`, zero tangents where native keeps a stale one, its
own gradcheck messages), the test asserts dualgen's documented behaviour
(docs/differences.md), pins native's, and says so in its docstring.

The modules: `test_native_conformance_make_dual.py` make_dual;
`_levels` forward grad mode and levels; `_unpack_dual` unpack_dual, printing,
memory sharing and detach; `_views` views, in-place ops, out= and vmap;
`_functions` custom Functions; `_gradcheck` gradcheck(check_forward_ad=True).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, NamedTuple

import pytest
import torch
import torch.autograd.forward_ad as native_fwAD
from forward_ad_checks import assert_same
from leaks import release_levels

import dualgen
import dualgen.forward_ad as dual_fwAD

F64, C128 = torch.float64, torch.complex128


class Api(NamedTuple):
    name: str
    fwAD: Any
    gradcheck: Any

    @contextlib.contextmanager
    def level_with_rand_dual(self, *shape):
        """A new level with a dual in it of a random primal and tangent (`rand`'s, in
        that order): yields (dual, primal, tangent), the two for identity checks."""
        primal, tangent = rand(*shape), rand(*shape)
        with self.fwAD.dual_level():
            yield self.fwAD.make_dual(primal, tangent), primal, tangent


NATIVE = Api("native", native_fwAD, torch.autograd.gradcheck)
DUALGEN = Api("dualgen", dual_fwAD, dualgen.gradcheck)


def level_active(api: Api) -> bool:
    """Whether a forward-AD level of `api` is active (PyTorch's tests read
    `fwAD._current_level`)."""
    return api.fwAD._current_level >= 0


# --------------------------------------------------------------------------------------
# running one program under both


def _outcome(program, api, seed):
    torch.manual_seed(seed)
    try:
        return True, program(api)
    except Exception as exc:  # noqa: BLE001 - the error is the result here
        return False, exc


def outcomes(program, seed=0):
    """program(api) under native and under dualgen (same seed), for a test that
    compares them itself: (ok, result or error) of each, native's first."""
    return _outcome(program, NATIVE, seed), _outcome(program, DUALGEN, seed)


def conform(program, *, error=None, match=None, seed=0):
    """program(api) under native and under dualgen (same seed): the same result, or,
    where `error` is given, both raise it (dualgen: the type native raises, or a
    subclass) with a message matching `match`, a regex or a list of them that must
    all match (native is checked too, so a change in PyTorch shows up here).
    Returns dualgen's result or error."""
    (native_ok, native), (dual_ok, dual) = outcomes(program, seed)
    if error is not None:
        assert not native_ok and isinstance(
            native, error
        ), f"native no longer raises {error.__name__}: {native!r}"
        phrases = [match] if isinstance(match, str) else list(match)
        for phrase in phrases:
            assert re.search(
                phrase, str(native), re.DOTALL
            ), f"native's message changed: {native}"
        if dual_ok:
            pytest.fail(f"native raises {native!r}; dualgen returns {dual!r}")
        if not (
            isinstance(dual, type(native))
            and all(re.search(phrase, str(dual), re.DOTALL) for phrase in phrases)
        ):
            raise AssertionError(
                f"native raises {type(native).__name__} matching {match!r}; "
                f"dualgen raises {type(dual).__name__}: {dual}"
            ) from dual
        return dual
    if not native_ok:
        pytest.fail(f"native raises {native!r} (the program is wrong)")
    if not dual_ok:
        raise dual
    assert_same(dual, native)
    return dual


@pytest.fixture(autouse=True)
def no_level_left_behind():
    """Every test leaves no level (native or dualgen), no mode pushed, and forward
    grad mode enabled."""
    yield
    leaked = release_levels()
    assert not leaked, f"left behind: {leaked}"


def rand(*shape, dtype=F64):
    return torch.rand(*shape, dtype=dtype)


FAST = [pytest.param(False, id="slow"), pytest.param(True, id="fast")]
# gradcheck's failure messages start with native's words (dualgen's detail
# follows; tests/harness/test_native_messages.py):
FORWARD_MISMATCH = [
    r"Jacobian computed with forward mode mismatch for output 0 with respect to input "
    + r"{}\b",
]


def forward_mismatch(input_index):
    return [phrase.format(input_index) for phrase in FORWARD_MISMATCH]
