"""A stateful fuzzer of the VecEnv API on every backend (issue 23), and of the turn-based,
opponent-seat, block-engine and ``backend: auto`` paths (issue 40).

``envs`` holds the fuzzed PettingZoo parallel env, ``oracle`` the plain loop per env that
says what each row must hold, ``model`` the bookkeeping of what each call must do
(pool, pending step, known failures), ``machine`` the Hypothesis rules, and the
``test_fuzz_*`` files run the machine on each backend. ``turn_game``/``turn_oracle``/
``turn_machine`` do the same for a scripted AEC game (an ``agent_iter()`` loop as the
oracle), ``seat_oracle``/``seat_machine`` for the opponent seat and the SB3 and gymnasium
faces over it, ``block_env``/``block_machine`` for a numpy block engine, ``auto_backend``
for ``backend: auto`` over each tune choice. ``known_bugs`` holds back what meets an open
bug; ``test_fuzz_regressions`` holds, as plain tests, the sequences of the bugs found
(fixed ones, and the open ones as strict xfails).
"""
