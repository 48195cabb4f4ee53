"""Building the extension: a failed build is one clear error, a stale build is
never loaded, and the build in use matches its sources."""

from __future__ import annotations

import pytest

from dualgen import cpp
from dualgen.tools.cli import main


def test_the_extension_in_use_is_built_from_the_current_sources(cpp_extension):
    assert cpp.state() == "built"
    assert len(cpp_extension.kernel_names()) > 500


@pytest.fixture
def broken_build(tmp_path, monkeypatch):
    """A build of one source with a compile error, in its own directory."""
    source = tmp_path / "broken.cpp"
    source.write_text("int main() { return undeclared_name; }\n")
    monkeypatch.setenv("DUALGEN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(cpp, "sources", lambda: [source])
    return source


def test_a_failed_build_says_the_compilers_first_error(broken_build):
    with pytest.raises(cpp.BuildError) as info:
        cpp.build()
    message = str(info.value)
    assert message.startswith("building dualgen_cpp failed: ")
    assert "broken.cpp:1" in message and "undeclared_name" in message
    assert "\n" not in message
    assert cpp.state() == "missing"  # nothing half-built is taken for a build


def test_dualgen_build_reports_it_in_one_line(broken_build, capsys):
    assert main(["build"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dualgen: error: building dualgen_cpp failed: ")
    assert err.count("\n") == 1


def test_a_build_older_than_its_sources_is_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGEN_BUILD_DIR", str(tmp_path))
    assert cpp.state() == "missing"
    (tmp_path / f"{cpp.NAME}.so").write_bytes(b"")
    (tmp_path / "fingerprint").write_text("built from other sources")
    assert cpp.state() == "stale"
    (tmp_path / "fingerprint").write_text(cpp.fingerprint())
    assert cpp.state() == "built"


def test_a_build_with_progress_shows_the_compile_steps(tmp_path, monkeypatch, capsys):
    """`dualgen build` in a terminal: ninja's steps as a progress bar on stderr
    (a one-source library, in its own directory)."""
    source = tmp_path / "one.cpp"
    source.write_text("int dualgen_build_probe() { return 1; }\n")
    monkeypatch.setenv("DUALGEN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(cpp, "sources", lambda: [source])
    cpp.build(progress=True)
    err = capsys.readouterr().err
    assert "building dualgen_cpp" in err and "2/2" in err
    assert cpp.state() == "built"
