"""Packaging metadata lives in setup.cfg. This file only maps the repo's top-level
configs/ into the package as ``marl_vec.configs`` (one subpackage per family
folder), so installed copies ship them."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
CONFIG_FAMILIES = sorted(p.name for p in (HERE / "configs").iterdir() if p.is_dir())

setup(
    packages=find_packages(include=["marl_vec", "marl_vec.*"])
    + ["marl_vec.configs"]
    + [f"marl_vec.configs.{family}" for family in CONFIG_FAMILIES],
    package_dir={"marl_vec.configs": "configs"},
    package_data={f"marl_vec.configs.{family}": ["*.yaml"] for family in CONFIG_FAMILIES},
)
