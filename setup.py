"""Packaging metadata lives in setup.cfg. This file only maps the repo's top-level
configs/ into the package as ``marl_vec.configs``, so installed copies ship them."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["marl_vec", "marl_vec.*"]) + ["marl_vec.configs"],
    package_dir={"marl_vec.configs": "configs"},
    package_data={"marl_vec.configs": ["*/*.yaml"]},
)
