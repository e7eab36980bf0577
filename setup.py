"""Package discovery for the layout in DESIGN.md: ``backends/``, ``server/`` and
``prompts/`` install as ``autocomp.backends``, ``autocomp.server`` and ``autocomp.prompts``.
Everything else is in pyproject.toml; this file only finds subpackages so adding one never
needs a packaging edit."""

from setuptools import find_packages, setup

ROOTS = {
    "autocomp": "autocomp",
    "autocomp.backends": "backends",
    "autocomp.server": "server",
    "autocomp.prompts": "prompts",
}

packages = []
for package, folder in ROOTS.items():
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=ROOTS)
