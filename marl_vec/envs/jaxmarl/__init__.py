"""JaxMARL (SMAX, MPE, Hanabi, Overcooked, ...) on a JAX engine: each group of envs is one jitted, vmapped block.

The family of ``jaxmarl.make`` envs (extra ``jax``). Its modules, one idea each:
``catalog`` (which ids are served, which are left out and why), ``views`` (how
one env's outputs become our fields, SMAC's view of SMAX), ``kernels`` (the
compiled step with autoreset inside and the compiled reset) and ``engine`` (the
adapter slots and the group stepper that own a block). See docs/families/jaxmarl.md.

SMAX is SMAC-style, not SMAC: its units, features (3m: obs 75, state 72 against
SMAC's 30 and 48), 8 actions without no-op (a dead unit may only "stop"), 100
steps, and a heuristic enemy instead of StarCraft II's AI.

Examples:
    >>> import marl_vec as mv
    >>> venv = mv.make({"env": {"family": "jaxmarl", "id": "smax/3m"}}, num_envs=64)
    >>> venv.env_info()["n_actions"]
    8
"""

from marl_vec.envs.jaxmarl.engine import JaxMarlAdapter, make_jaxmarl

__all__ = ["JaxMarlAdapter", "make_jaxmarl"]
