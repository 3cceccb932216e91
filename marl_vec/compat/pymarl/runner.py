"""MarlVecRunner: marl_vec's runner face for the PyMARL school (``runners.REGISTRY``).

PyMARL's ``run.py`` drives a runner through ``setup(scheme, groups, preprocess, mac,
explorer)``, ``run(test_mode) -> (EpisodeBatch, episode returns)``, ``get_env_info``,
``save_replay``, ``close_env``, ``t_env``, ``log_train_stats_t`` and ``batch_size``.
This runner serves that surface over one marl_vec VecEnv of ``batch_size_run`` envs in
the ``one_episode`` autoreset mode (every env plays exactly one episode per ``run``; env
i is seeded ``seed + i`` at its first reset, as the ``parallel`` runner seeds its
workers), and writes the trainer's own ``EpisodeBatch`` directly from the step arrays.

It calls the trainer's controller exactly as the ``parallel`` runner does (the same
``select_actions`` batches, ``bs``, hidden states and ``EpisodeBatch.update`` calls), so
a run with it learns the parameters a native run learns on the same envs; with
``batch_size_run=1`` that is also what the ``episode`` runner does. Its env workers (the
VecEnv's backend: ``env_args.backend``, default the config's) are its own: ``close_env``
closes them, and so does a failed constructor.

Registered by [`marl_vec.compat.pymarl.register`][marl_vec.compat.pymarl.register]; it needs ``env=<the key register()
gave the env face>`` and the same ``env_args`` as that face.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from marl_vec.compat.pymarl.env import INSTALL, check_env_args, end_info, make_vec_from_env_args, team_reward

try:
    import torch as th
except ImportError as exc:  # pragma: no cover - exercised without torch
    raise ImportError(f"MarlVecRunner needs torch (a PyMARL trainer's): {INSTALL}") from exc


class MarlVecRunner:
    """PyMARL's runner interface over a marl_vec VecEnv (see the module docstring).

    Args:
        args: the trainer's config namespace (``env``, ``env_args``, ``batch_size_run``,
            ``device``, ``test_nepisode``, ``runner_log_interval``, ``explorer``, ...).
        logger: the trainer's logger (``log_stat``, ``console_logger``).
        env_key: the name the env face is registered under; ``args.env`` must be it.
        episode_batch: the trainer's ``EpisodeBatch`` class; default pymarlzooplus's.
    """

    def __init__(self, args: Any, logger: Any, env_key: str = "marl_vec", episode_batch: Any = None):
        self._batch_class = episode_batch
        if args.env != env_key:
            raise ValueError(
                f"the marl_vec runner steps marl_vec configs: set env={env_key!r} with env_args.key=<a marl_vec "
                f"config>, got env={args.env!r} (for the trainer's own envs use runner=episode or parallel)"
            )
        check_env_args(args.env_args, "MarlVecRunner")
        B = args.batch_size_run
        if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 1:
            raise ValueError(f"MarlVecRunner: batch_size_run must be an int >= 1 (the number of envs), got {B!r}")
        self.args, self.logger, self.batch_size = args, logger, int(B)
        self.team_reward = args.env_args.get("team_reward", "sum")
        self.venv = make_vec_from_env_args(args.env_args, self.batch_size, "one_episode")
        self.env_info = self.venv.env_info()
        self.episode_limit = int(self.env_info["episode_limit"])
        self._start = self.venv.spec.action.start  # type: ignore[union-attr]
        self._actions = np.zeros((self.batch_size, self.venv.spec.n_agents), self.venv.spec.action.dtype)
        self.new_batch: Any = None
        self.batch: Any = None
        self.mac: Any = None
        self.explorer: Any = None
        self.noise: Any = None
        self.scheme: Any = None
        self.t = 0
        self.t_env = 0
        self.env_steps_this_run = 0
        self.train_returns: list[float] = []
        self.test_returns: list[float] = []
        self.train_stats: dict[str, Any] = {}
        self.test_stats: dict[str, Any] = {}
        self.log_train_stats_t = -100000

    # -- run.py's surface ---------------------------------------------------------

    def setup(self, scheme: dict, groups: dict, preprocess: dict, mac: Any, explorer: Any = None) -> None:
        """The trainer's batch layout and controller (as the ``parallel`` runner's ``setup``)."""
        self.new_batch = functools.partial(self._episode_batch, scheme, groups, self.batch_size,
                                           self.episode_limit + 1, preprocess=preprocess, device=self.args.device)
        self.mac, self.explorer, self.scheme = mac, explorer, scheme

    def get_env_info(self) -> dict[str, Any]:
        return dict(self.env_info)

    def save_replay(self) -> None:
        self.logger.console_logger.info("marl_vec runner: the envs keep no replays (marl-vec render draws GIFs)")

    def close_env(self) -> None:
        """Close the VecEnv and its workers (PyMARL calls this at the end of a run)."""
        self.venv.close()

    def __del__(self) -> None:
        venv = getattr(self, "venv", None)
        if venv is not None:
            venv.close()

    def reset(self) -> dict[str, Any]:
        """A new batch, every env reset, hidden states cleared; the first observations written at t=0."""
        if self.new_batch is None:
            raise RuntimeError("MarlVecRunner: call setup(scheme, groups, preprocess, mac, explorer) before run()")
        self.batch = self.new_batch()
        r = self.venv.reset()
        self.mac.init_hidden(batch_size=self.batch_size)
        pre = self._pre(r, list(range(self.batch_size)))
        extra = self.args.extra_in_buffer
        if "hidden_states" in extra or "hidden_states_critic" in extra:
            hidden = self.mac.get_hidden_states()
            for name in ("hidden_states", "hidden_states_critic"):
                if name in extra:
                    pre[name] = hidden[name]
        self.batch.update(pre, ts=0)
        if self.args.explorer == "maven":  # MAVEN samples its noise at an episode's start
            self.noise = self.explorer.sample(self.batch["state"][:, 0])
            self.batch.update({"noise": self.noise}, ts=0)
        self.t = 0
        self.env_steps_this_run = 0
        return pre

    def run(self, test_mode: bool = False) -> tuple[Any, list[float]]:
        """One episode in every env: ``(EpisodeBatch, episode returns)``, as the ``parallel`` runner."""
        pre = self.reset()
        B, args = self.batch_size, self.args
        returns, lengths = [0.0] * B, [0] * B
        terminated = [False] * B
        selected = list(range(B))  # the envs actions are chosen for: running ones and those that just ended
        final_infos: list[dict[str, Any]] = []
        r: Any = None  # the last step's result
        while True:
            actions, extra = self.mac.select_actions(self.batch, t_ep=self.t, t_env=self.t_env, bs=selected,
                                                     test_mode=test_mode)
            if args.explorer == "eoi":
                actions = self.explorer.select_actions(actions, self.t, test_mode, pre)
            chosen = {"actions": actions.unsqueeze(1)}
            for name in ("log_probs", "values"):
                if name in args.extra_in_buffer:
                    chosen[name] = extra[name].unsqueeze(1)
            self.batch.update(chosen, bs=selected, ts=self.t, mark_filled=False)
            cpu = actions.to("cpu").numpy()
            running = [i for i in selected if not terminated[i]]
            rows = [k for k, i in enumerate(selected) if not terminated[i]]
            selected = [i for i in range(B) if not terminated[i]]
            if not selected:
                break
            # Envs that ended are not stepped (one_episode), but their rows are still checked
            # against their last avail_actions: an action that was legal may not be any more
            # (SC2: an attack on the last enemy, once it died), so they get an available one.
            self._actions[running] = cpu[rows] + self._start
            if r is not None and r.avail_actions is not None:
                for i in range(B):
                    if terminated[i]:
                        self._actions[i] = r.avail_actions[i].argmax(-1) + self._start
            r = self.venv.step(self._actions)
            post: dict[str, list] = {"reward": [], "terminated": []}
            # The parallel runner's rows of the hidden states: masked by the envs not ended before this step.
            hidden = {name: extra[name][~th.tensor(terminated).to(extra[name].device)]
                      for name in ("hidden_states", "hidden_states_critic") if name in args.extra_in_buffer}
            for i in running:
                reward = team_reward(r.reward[i], self.team_reward)
                returns[i] += reward
                lengths[i] += 1
                if not test_mode:
                    self.env_steps_this_run += 1
                ended = bool(r.done[i])
                info = end_info(r, i)
                if ended:
                    final_infos.append(info)
                terminated[i] = ended
                post["reward"].append((reward,))
                post["terminated"].append((ended and not info.get("episode_limit", False),))
            pre = {**self._pre(r, running), **hidden}
            self.batch.update(post, bs=running, ts=self.t, mark_filled=False)
            self.t += 1
            self.batch.update(pre, bs=running, ts=self.t, mark_filled=True)
        if not test_mode:
            self.t_env += self.env_steps_this_run
        self._record(test_mode, returns, lengths, final_infos)
        return self.batch, returns

    # -- helpers ------------------------------------------------------------------

    @property
    def _episode_batch(self) -> Any:
        if self._batch_class is None:
            try:
                from pymarlzooplus.components.episode_buffer import EpisodeBatch
            except ImportError as exc:
                raise ImportError(
                    "MarlVecRunner fills the trainer's EpisodeBatch: pymarlzooplus's by default "
                    f"({exc}; {INSTALL}); EPyMARL/PyMARL users pass theirs: "
                    "register(envs.REGISTRY, runners.REGISTRY, episode_batch=EpisodeBatch)"
                ) from exc
            self._batch_class = EpisodeBatch
        return self._batch_class

    def _pre(self, r: Any, envs: list[int]) -> dict[str, Any]:
        """state, avail_actions and obs of ``envs`` as tensors of the scheme's dtypes."""
        avail = r.avail_actions
        if avail is None:
            avail = np.ones((self.batch_size, self.venv.spec.n_agents, self.env_info["n_actions"]), bool)
        if r.state is None:
            raise ValueError("MarlVecRunner: the config has state='none'; PyMARL's batch stores the state")
        data = {"state": r.state[envs].reshape(len(envs), -1), "avail_actions": avail[envs],
                "obs": r.obs[envs].reshape(len(envs), self.venv.spec.n_agents, -1)}
        return {k: th.tensor(v, dtype=self.scheme[k].get("dtype", th.float32), device=self.args.device)
                for k, v in data.items()}

    def _record(self, test_mode: bool, returns: list[float], lengths: list[int],
                final_infos: list[dict[str, Any]]) -> None:
        """The ``parallel`` runner's stats and logging."""
        stats = self.test_stats if test_mode else self.train_stats
        cur_returns = self.test_returns if test_mode else self.train_returns
        prefix = "test_" if test_mode else ""
        infos = [stats] + final_infos
        stats.update({k: sum(d.get(k, 0) for d in infos) for k in set.union(*[set(d) for d in infos])})
        stats["n_episodes"] = self.batch_size + stats.get("n_episodes", 0)
        stats["ep_length"] = sum(lengths) + stats.get("ep_length", 0)
        cur_returns.extend(returns)
        n_test_runs = max(1, self.args.test_nepisode // self.batch_size) * self.batch_size
        if test_mode and len(self.test_returns) >= n_test_runs:
            self._log(cur_returns, stats, prefix)
        elif self.t_env - self.log_train_stats_t >= self.args.runner_log_interval:
            self._log(cur_returns, stats, prefix)
            if hasattr(self.mac.action_selector, "epsilon"):
                self.logger.log_stat("epsilon", self.mac.action_selector.epsilon, self.t_env)
            self.log_train_stats_t = self.t_env

    def _log(self, returns: list[float], stats: dict[str, Any], prefix: str) -> None:
        self.logger.log_stat(prefix + "return_mean", np.mean(returns), self.t_env)
        self.logger.log_stat(prefix + "return_std", np.std(returns), self.t_env)
        returns.clear()
        for k, v in stats.items():
            if k != "n_episodes":
                self.logger.log_stat(prefix + k + "_mean", v / stats["n_episodes"], self.t_env)
        stats.clear()
