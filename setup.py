"""Package discovery for the `dualgen` distribution (the rest of the metadata is
in pyproject.toml).

The packages live in three folders (pyproject's `package-dir`): `runtime/` is
`dualgen`, `generated/` is `dualgen.generated`, `tools/` is `dualgen.tools`.
Every package below them is found here, so a new subpackage ships without a list
to keep in sync (a hand-kept list once left `dualgen.collectives` out of wheels).
"""

from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

FOLDERS = {
    "dualgen": "runtime",
    "dualgen.generated": "generated",
    "dualgen.tools": "tools",
}


def discovered() -> list[str]:
    packages = []
    for package, folder in FOLDERS.items():
        packages.append(package)
        packages += [f"{package}.{sub}" for sub in find_packages(folder)]
    return sorted(packages)


class BuildWithSpec(build_py):
    """The spec and the helpers' one source (helpers/) ride beside the kernels
    generated from them (dualgen.generated), so `dualgen validate` outside a
    checkout checks the installed kernels, and `dualgen generate` on a user's spec
    knows every helper and its C++ twin."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # (an editable install is a checkout: the spec is at its root)
        spec = Path(__file__).resolve().parent / "derivatives.yaml"
        target = Path(self.build_lib) / "dualgen" / "generated"
        self.mkpath(str(target))
        self.copy_file(str(spec), str(target))
        helpers = Path(__file__).resolve().parent / "helpers"
        self.mkpath(str(target / "helpers"))
        for source in sorted(helpers.glob("*.yaml")):
            self.copy_file(str(source), str(target / "helpers"))


if __name__ == "__main__":  # (as setuptools runs it; tests import discovered())
    setup(packages=discovered(), cmdclass={"build_py": BuildWithSpec})
