"""This folder is the package `lab`: every subpackage found under it (tests/ has no
__init__.py and stays out), with the results the documents cite. `lab` itself is a namespace
package (no __init__.py: pytest would import a regular one under the checkout folder's name).
It imports the product and the tests' kit (`tests.kit`) from the checkout."""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    """The package's modules without this file."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if (m[0], m[1]) != ("lab", "setup")]


setup(
    package_dir={"lab": "."},
    packages=["lab", *(f"lab.{p}" for p in find_packages(".", exclude=["build*"]))],
    package_data={"lab": ["README.md", "results/**/*"]},
    cmdclass={"build_py": BuildPy},
)
