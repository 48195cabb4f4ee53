import pytest


@pytest.fixture(scope="session")
def cpp_extension():
    """The built extension (`make test` builds it first; a missing or stale build
    fails here, with what to run)."""
    from dualgen import cpp

    return cpp.extension()


@pytest.fixture(scope="session")
def cpp_formulas(cpp_extension):
    """The extension's `formulas` submodule: every C++ twin, bound for tests
    (the bindings are generated from the twins' declarations)."""
    return cpp_extension.formulas
