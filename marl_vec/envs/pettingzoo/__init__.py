"""The PettingZoo family: parallel envs (``parallel``), turn-based AEC games (``aec``), and
their parts: the family's entry (``family``), AEC envs served as parallel ones
(``aec_parallel``), tuple-agent envs (``tuple_agents``) and the fast paths of butterfly
(``butterfly_screen``) and MAgent2 (``magent_engine``)."""

from marl_vec.envs.pettingzoo.aec import AECAdapter
from marl_vec.envs.pettingzoo.family import make_pettingzoo, pettingzoo_adapter
from marl_vec.envs.pettingzoo.parallel import PettingZooAdapter, StateUnavailableError

__all__ = ["PettingZooAdapter", "AECAdapter", "StateUnavailableError", "make_pettingzoo", "pettingzoo_adapter"]
