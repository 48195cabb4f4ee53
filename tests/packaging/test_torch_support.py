"""The tested torch releases: what pyproject promises, what `import dualgen` warns
about, and that the package's files are found by discovery."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import tomllib

from dualgen import torch_support

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_promises_exactly_the_tested_releases():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (torch_requirement,) = [d for d in project["dependencies"] if d.startswith("torch")]
    low = re.search(r">=(\d+)\.(\d+)", torch_requirement)
    high = re.search(r"<(\d+)\.(\d+)", torch_requirement)
    assert low and high, torch_requirement
    promised = {(2, minor) for minor in range(int(low[2]), int(high[2]))}
    assert promised == set(torch_support.TESTED)


@pytest.mark.parametrize("version", ["2.15.0+cu130", "3.0.0", "2.11.0", "2.4.0"])
def test_an_untested_release_gets_one_warning_naming_the_range(version):
    with pytest.warns(UserWarning, match=r"tested with torch 2\.12 to 2\.14") as caught:
        torch_support.warn_if_untested(version)
    assert len(caught) == 1 and version in str(caught[0].message)


@pytest.mark.parametrize(
    "version", ["2.12.1", "2.13.0", "2.13.0+cpu", "2.14.1+cu130", "2.14.0+cu128"]
)
def test_a_tested_release_gets_none(version):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch_support.warn_if_untested(version)


def test_every_package_folder_is_discovered():
    """setup.py finds every package below runtime/, generated/ and tools/ (a
    hand-kept list once left dualgen.collectives out of the wheel)."""
    import runpy

    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="setup")
    found = set(setup["discovered"]())
    for folder, package in (("runtime", "dualgen"), ("tools", "dualgen.tools")):
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            assert ".".join((package, *relative)) in found
    assert "dualgen.generated" in found and "dualgen.collectives" in found
