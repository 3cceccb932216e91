"""Run RLlib's own env-runner tests against marl_vec's RLlib face.

The ray wheel ships no tests, and marl_vec does not ship RLlib's: copy them from RLlib's
public repository (``rllib/env/tests/test_multi_agent_env_runner.py``,
``rllib/env/tests/test_env_runner.py``, ``rllib/callbacks/tests/test_callbacks_on_env_runner.py``)
into a folder, then::

    PYTHONPATH=$PWD python scripts/ci/run_rllib_runner_tests.py /tmp/rllib_tests --runner sync -k multi_agent

``--runner`` picks the class RLlib's multi-agent code builds (``MultiAgentEnvRunner``: tests
that construct it by name, and algorithms whose config names no ``env_runner_cls``):
``native`` (RLlib's own), ``sync`` (``MarlVecEnvRunner``) or ``async``
(``MarlVecAsyncEnvRunner``). The tests run unchanged: their envs are RLlib's env specs
(``MultiAgentCartPole``, registered names), which the face takes as they are. Only this
process is patched: an algorithm that Tune runs in an actor of its own uses RLlib's runner.
Single-agent tests are RLlib's own in every mode (select ``-k multi_agent`` for
``test_env_runner.py``). Other arguments go to pytest.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

RUNNERS = ("native", "sync", "async")


class SwapRunner:
    """A pytest plugin: before the tests are imported, RLlib's ``MultiAgentEnvRunner`` is the chosen class."""

    def __init__(self, runner: str):
        self.runner = runner

    def pytest_configure(self, config: Any) -> None:
        if self.runner == "native":
            return
        import ray.rllib.env.multi_agent_env_runner as module

        from marl_vec.compat.rllib import MarlVecAsyncEnvRunner, MarlVecEnvRunner

        module.MultiAgentEnvRunner = MarlVecEnvRunner if self.runner == "sync" else MarlVecAsyncEnvRunner

    def pytest_report_header(self, config: Any) -> str:
        return f"RLlib's MultiAgentEnvRunner is: {self.runner}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="a folder (or file) of RLlib's tests")
    parser.add_argument("--runner", choices=RUNNERS, default="sync")
    args, rest = parser.parse_known_args(argv)
    import pytest

    return int(pytest.main([args.path, "-p", "no:cacheprovider", *rest], plugins=[SwapRunner(args.runner)]))


if __name__ == "__main__":
    sys.exit(main())
