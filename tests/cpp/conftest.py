import cpp_dev_build as dev_build
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
    (DUALGEN_TWINS_DEV=mod1,mod2: a build of those modules alone)."""
    modules = dev_build.dev_modules()
    if modules:
        return dev_build.build(modules)
    return cpp_extension.formulas
