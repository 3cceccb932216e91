"""Moved to `marl_vec.tools.episode_runner`; this path stays so that code importing it keeps working.

The module replaces itself with the one it names: both names are one module object, so
monkeypatching either reaches the same attributes.
"""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("marl_vec.tools.episode_runner")
