"""MarlVecAsyncEnvRunner: RLlib's multi-agent sampling on marl_vec's first-ready pool.

RLlib's own multi-agent runner steps every env of its vector env at once and waits
for the slowest; ``gym_env_vectorize_mode="ASYNC"`` is refused for multi-agent
envs. This runner samples a SubprocVecEnv or RayVecEnv through its async pool
(``send``/``recv``, ``backend_kwargs={"batch_size": B}``; DummyVecEnv has the same
pool, stepping each sent env at once, so nothing overlaps there): each ``recv()`` returns
the first B envs whose step is done, the module computes actions for those B
envs only (RLlib's env-to-module and module-to-env connectors over their
episodes), and ``send()`` starts them again while the others are still stepping.
Episodes are RLlib's ``MultiAgentEpisode``s, built as RLlib's runner builds them
(same callbacks, metrics, chunk cuts); only the order in which envs advance differs.

- The batch runs ``autoreset="same_step"`` (what the pool serves): at an episode's end
  the final step comes from ``final_*`` and the next episode's reset rides in the same
  row, so no env spends a step on a reset.
- Each ``sample()`` ends by collecting every env still in flight, so no action
  computed with old weights is sent after the weights change; every env starts the
  next ``sample()`` waiting for an action.
- As in RLlib's runner: a reset runs the env-to-module connectors over every env, and so
  does the end of a ``sample()`` over the last observations (each batch serves the next
  actions; each observation goes through the connectors once); ``sample(num_episodes=k)`` returns exactly k
  episodes and drops the others still going; the episode after an ended one starts
  (``on_episode_start``) when its env is stepped again, so ``num_episodes`` and
  ``batch_mode="complete_episodes"`` start no episode they do not step; with
  ``random_actions=True`` the env-to-module connectors still see every observation.

Examples:
    ```python
    config.environment(ENV_NAME, env_config={"env_fn": env_fn, "backend": "subproc",
                                             "backend_kwargs": {"batch_size": 16}})
    config.env_runners(env_runner_cls=MarlVecAsyncEnvRunner, num_envs_per_env_runner=32)
    ```
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.utils.metrics import (
    ENV_TO_MODULE_CONNECTOR,
    MODULE_TO_ENV_CONNECTOR,
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
    NUM_MODULE_STEPS_SAMPLED,
    NUM_MODULE_STEPS_SAMPLED_LIFETIME,
    RLMODULE_INFERENCE_TIMER,
    WEIGHTS_SEQ_NO,
)

from marl_vec.compat.rllib.env_runner import MarlVecEnvRunner

DRAIN_WAIT_S = 0.05  # recv() timeout while collecting the last envs in flight


class MarlVecAsyncEnvRunner(MarlVecEnvRunner):
    """RLlib's multi-agent env runner on marl_vec's async pool (first-ready batches)."""

    _autoreset = "same_step"

    def make_env(self) -> None:
        super().make_env()
        venv = self.env.venv
        if not hasattr(venv, "recv"):
            raise ValueError(f"MarlVecAsyncEnvRunner needs a batch with an async pool (send/recv); "
                             f"{type(venv).__name__} has none (env_config['backend'])")
        self._to_act: list[int] = []  # envs received and not sent since
        self._flying: set[int] = set()  # envs sent (or reset), whose result recv() has not given yet
        self._sent: dict[int, tuple[dict, dict]] = {}  # env -> (actions, extra model outputs) of its step
        # env -> (obs, infos) of the episode that follows one that ended: RLlib's runner starts it
        # (add_env_reset, on_episode_start) only when it steps that env again, so this one too.
        self._pending: dict[int, tuple[dict, dict]] = {}
        # (envs, connector batch) made at a reset or at the end of a sample(): their next actions' input.
        self._to_module: tuple[list[int], Any] | None = None

    def _sample(self, *, num_timesteps: int | None = None, num_episodes: int | None = None, explore: bool,
                random_actions: bool = False, force_reset: bool = False) -> list[MultiAgentEpisode]:
        venv = self.env.venv
        done_episodes: list[MultiAgentEpisode] = []
        env_ts = agent_ts = eps = 0
        if force_reset or num_episodes is not None or self._needs_initial_reset:
            self._reset_envs_and_episodes(explore)
        if num_episodes is not None:
            self._needs_initial_reset = True

        def enough() -> bool:
            if num_timesteps is None:
                return eps >= num_episodes
            return (env_ts if self.config.count_steps_by == "env_steps" else agent_ts) >= num_timesteps

        limit = num_episodes if num_timesteps is None else None
        while not enough():
            if self._to_act:
                self._act_on_received(explore, random_actions, env_ts)
            r = venv.recv()
            steps, agents, finished = self._take(r, done_episodes, explore, None if limit is None else limit - eps)
            env_ts += steps
            agent_ts += agents
            eps += finished
        # Collect the envs in flight: the next sample() starts with new weights. After
        # num_episodes, RLlib's runner drops the episodes still going (the next sample()
        # resets every env): their rows are taken and dropped too, with no callback.
        while self._flying:
            r = venv.recv(timeout=DRAIN_WAIT_S)
            if limit is None:
                steps, agents, finished = self._take(r, done_episodes, explore)
                env_ts += steps
                agent_ts += agents
                eps += finished
            else:
                self._flying.difference_update(int(i) for i in r.env_ids)
        if limit is None and self.module is not None and self._to_module is None:
            # As RLlib's runner, which runs them after its last step: the connectors over the
            # last observations, whose batch serves the next sample()'s first actions. Envs
            # whose next episode has not started yet (it starts when they are stepped) are
            # left to that step. A reset's batch not used yet (nothing stepped) stays.
            self._to_act.sort()
            ready = [i for i in self._to_act if i not in self._pending]
            if ready:
                self._to_module = (ready, self._connect(ready, explore))
        return self._finish_sample(done_episodes, num_timesteps)

    def _act_on_received(self, explore: bool, random_actions: bool, env_ts: int) -> None:
        """Start the pending episodes of the envs waiting for actions, then act for them: those
        the last connector batch covers with it, the others with a batch of their own (each
        observation goes through the connectors once)."""
        ids = self._to_act
        self._start_pending(ids)
        covered = self._to_module[0] if self._to_module is not None else []
        rest = [i for i in ids if i not in set(covered)]
        if covered and rest and set(covered) <= set(ids):
            self._act(list(covered), explore, random_actions, env_ts)
            self._act(rest, explore, random_actions, env_ts)
        else:
            self._act(ids, explore, random_actions, env_ts)

    def _reset_envs(self, episodes: list, shared_data: dict, explore: bool) -> None:
        """Reset every env as RLlib's runner does: every reset row (collected at once), the
        env-to-module connectors over them (their batch serves the first actions), then
        ``on_episode_start``."""
        for i in range(self.num_envs):
            self._new_episode(i, episodes)
        self._ongoing_episodes_for_metrics.clear()
        venv, translator = self.env.venv, self.env.translator
        venv.reset(seed=self._seed if self._needs_initial_reset else None)
        translator.expect_resets(range(self.num_envs))
        self._to_act, self._flying, self._sent, self._pending = [], set(range(self.num_envs)), {}, {}
        self._to_module = None
        while self._flying:
            r = venv.recv()
            ids = [int(i) for i in r.env_ids]
            self._flying.difference_update(ids)
            steps, _ = translator.step_rows_same_step(r, ids)
            for i, (obs, _, _, _, infos) in zip(ids, steps):
                episodes[i].add_env_reset(observations=obs, infos=infos)
            self._to_act.extend(ids)
        self._to_act.sort()  # in env order, as RLlib's runner batches them
        if self.module is not None:
            self._to_module = (list(self._to_act), self._connect(self._to_act, explore))
        for i in range(self.num_envs):
            self._make_on_episode_callback("on_episode_start", i, episodes)

    def _connect(self, ids: list[int], explore: bool) -> Any:
        """The env-to-module connectors over the episodes of envs ``ids``: run once per observation
        (stateful connectors, e.g. observation filters, change the episodes they read)."""
        self._shared_data["vector_env_episodes_map"] = {}
        return self._env_to_module(episodes=[self._ongoing_episodes[i] for i in ids], batch={}, explore=explore,
                                   rl_module=self.module, shared_data=self._shared_data, metrics=self.metrics,
                                   metrics_prefix_key=(ENV_TO_MODULE_CONNECTOR,))

    # -- one batch in, one batch out ----------------------------------------------------

    def _take(self, r: Any, done_episodes: list[MultiAgentEpisode], explore: bool,
              limit: int | None = None) -> tuple[int, int, int]:
        """Add the rows of ``r`` to their episodes; return env steps, agent steps and episodes finished.

        ``limit``: the episodes still wanted (``num_episodes`` sampling); as RLlib's runner, the
        rows after the one that finishes the last of them are dropped (every env resets at the
        next ``sample()``).
        """
        ids = [int(i) for i in r.env_ids]
        self._flying.difference_update(ids)
        steps, resets = self.env.translator.step_rows_same_step(r, ids)
        env_ts = agent_ts = finished = 0
        just_done = []
        agent_steps: Counter[str] = Counter()
        module_steps: Counter[str] = Counter()
        for i, (obs, rewards, terminateds, truncateds, infos), reset in zip(ids, steps, resets):
            if limit is not None and finished >= limit:
                break
            episode = self._ongoing_episodes[i]  # reset and started (by _reset_envs or _start_pending)
            actions, extra = self._sent.pop(i)
            episode.add_env_step(observations=obs, actions=actions, rewards=rewards, infos=infos,
                                 terminateds=terminateds, truncateds=truncateds, extra_model_outputs=extra)
            env_ts += 1
            agent_ts += len(obs)
            agent_steps.update(str(aid) for aid in obs)
            module_steps.update(episode.module_for(aid) for aid in obs)
            self._make_on_episode_callback("on_episode_step", i, self._ongoing_episodes)
            if episode.is_done:
                finished += 1
                self._make_on_episode_callback("on_episode_end", i, self._ongoing_episodes)
                self._prune_zero_len_sa_episodes(episode)
                done_episodes.append(episode)
                just_done.append(episode)
                self._new_episode(i, self._ongoing_episodes)
                self._pending[i] = reset
        self._to_act.extend(ids)
        self._log_sampled(env_ts, finished, agent_steps, module_steps)
        if just_done and self.module is not None:
            # As RLlib's runner: a last connector pass over finished episodes (e.g. one-hot obs).
            self._env_to_module(batch={}, episodes=just_done, explore=explore, rl_module=self.module,
                                shared_data=self._shared_data, metrics=None)
        return env_ts, agent_ts, finished

    def _log_sampled(self, env_steps: int, episodes: int, agent_steps: Counter, module_steps: Counter) -> None:
        """The counts RLlib's ``_increase_sampled_metrics`` logs for each env step, logged once
        per batch: the same sums (every one of them is a sum), a tenth of the calls; per env
        step they were a fifth of this runner's time."""
        if not env_steps:
            return
        log = self.metrics.log_value
        self._log_env_steps(metric=self._metrics_num_env_steps_sampled, num_steps=env_steps)
        log(NUM_ENV_STEPS_SAMPLED, env_steps, reduce="sum")
        log(NUM_ENV_STEPS_SAMPLED_LIFETIME, env_steps, reduce="lifetime_sum", with_throughput=True)
        if episodes:
            log(NUM_EPISODES, episodes, reduce="sum")
            log(NUM_EPISODES_LIFETIME, episodes, reduce="lifetime_sum")
        for aid, n in agent_steps.items():
            log((NUM_AGENT_STEPS_SAMPLED, aid), n, reduce="sum")
            log((NUM_AGENT_STEPS_SAMPLED_LIFETIME, aid), n, reduce="lifetime_sum")
        for module, n in module_steps.items():
            log((NUM_MODULE_STEPS_SAMPLED, module), n, reduce="sum")
            log((NUM_MODULE_STEPS_SAMPLED_LIFETIME, module), n, reduce="lifetime_sum")

    def _start_pending(self, ids: list[int]) -> None:
        """Start the episodes of ``ids`` that follow ended ones, as RLlib's runner does at the
        step after an end: the reset's observations, then ``on_episode_start``."""
        for i in ids:
            reset = self._pending.pop(i, None)
            if reset is not None:
                obs, infos = reset
                self._ongoing_episodes[i].add_env_reset(observations=obs, infos=infos)
                self._make_on_episode_callback("on_episode_start", i, self._ongoing_episodes)

    def _act(self, ids: list[int], explore: bool, random_actions: bool, env_ts: int) -> None:
        """Compute the actions of envs ``ids`` and send them."""
        episodes = [self._ongoing_episodes[i] for i in ids]
        # The connector batch made for exactly these envs (at a reset or a sample's end) serves them.
        cached, self._to_module = self._to_module, None
        ready = cached[1] if cached is not None and cached[0] == ids else None
        if random_actions:
            if self.module is not None and ready is None:
                # As RLlib's runner: the env-to-module connectors see every observation also
                # while acting at random (stateful ones, e.g. observation filters, learn from it).
                self._connect(ids, explore)
            spaces = self.env.single_action_spaces
            to_env: dict[str, Any] = {Columns.ACTIONS: [{a: spaces[a].sample() for a in ep.get_agents_to_act()}
                                                        for ep in episodes]}
        else:
            to_module = ready if ready is not None else self._connect(ids, explore)
            with self.metrics.log_time(RLMODULE_INFERENCE_TIMER):
                if explore:
                    runners = self.config.num_env_runners or 1
                    t = (self.num_env_steps_sampled_lifetime // runners + env_ts) * runners
                    to_env = self.module.forward_exploration(to_module, t=t)
                else:
                    to_env = self.module.forward_inference(to_module)
            to_env = self._module_to_env(rl_module=self.module, batch=to_env, episodes=episodes, explore=explore,
                                         shared_data=self._shared_data, metrics=self.metrics,
                                         metrics_prefix_key=(MODULE_TO_ENV_CONNECTOR,))
        actions = to_env.pop(Columns.ACTIONS)
        actions_for_env = to_env.pop(Columns.ACTIONS_FOR_ENV, actions)
        for k, i in enumerate(ids):
            extra: dict[str, dict] = defaultdict(dict)
            for column, per_env in to_env.items():
                for agent, value in per_env[k].items():
                    extra[agent][column] = value
                    extra[agent][WEIGHTS_SEQ_NO] = self._weights_seq_no
            self._sent[i] = (actions[k], dict(extra))
        rows = self.env.translator.write_actions(actions_for_env, ids)
        self.env.venv.send(rows, np.asarray(ids, dtype=np.int64))
        self._flying.update(ids)
        self._to_act = []

    def _finish_sample(self, done_episodes: list[MultiAgentEpisode],
                       num_timesteps: int | None) -> list[MultiAgentEpisode]:
        """As RLlib's runner ends a sample: numpy'd done episodes, and the cut chunks of ongoing ones."""
        if self.episodes_to_numpy:
            for episode in done_episodes:
                episode.to_numpy()
        self._done_episodes_for_metrics.extend(done_episodes)
        ongoing: list[MultiAgentEpisode] = []
        if num_timesteps is not None:
            continuations = [ep.cut(len_lookback_buffer=self.config.episode_lookback_horizon)
                             for ep in self._ongoing_episodes]
            for episode in self._ongoing_episodes:
                if episode.env_t == 0:
                    continue
                episode.validate()
                self._ongoing_episodes_for_metrics[episode.id_].append(episode)
                self._prune_zero_len_sa_episodes(episode)
                ongoing.append(episode.to_numpy() if self.episodes_to_numpy else episode)
            self._ongoing_episodes = continuations
        return done_episodes + ongoing
