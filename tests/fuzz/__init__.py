"""A stateful fuzzer of the VecEnv API on every backend (issue 23).

``envs`` holds the fuzzed PettingZoo env, ``oracle`` the plain loop per env that
says what each row must hold, ``model`` the bookkeeping of what each call must do
(pool, pending step, known failures), ``machine`` the Hypothesis rules, and the
``test_fuzz_*`` files run the machine on each backend; ``test_fuzz_regressions``
holds, as plain tests, the sequences of the bugs it (and issue 23) found, all fixed.
"""
