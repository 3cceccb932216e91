"""Checks of the fuzzer held back while a known bug is open, one flag per bug.

While a flag is True the machine avoids the sequence that meets its bug (or skips that
one check), and tests/fuzz/test_fuzz_known_bugs.py (or test_fuzz_ray.py) holds a strict
xfail test of it. When the fix lands, that test passes and so fails the run: remove its
xfail mark and set the flag to False. Issue 23's bugs 2, 3, 4 and 6 are fixed (bugs23), and
SECOND_POOL_ERROR_DROPPED (fix-pool-errors).
"""

# Bug 2: reset() (and step(), call(), get_attr(), ...) re-raises the error of an env
# that raised in a pool step that was sent but never received, instead of dropping it.
STALE_POOL_ERROR = False  # fixed on bugs23, merged

# Bug 3: after a partial first reset the pool hands out and steps a never-reset env
# (a fake restart), where step() raises ResetNeeded; and a partial reset that leaves
# out an env that raised in the pool puts it back into the pool.
# Fixed: a never-reset env (and a failed one a partial reset left out) stays out of the
# pool: recv() never returns it, so it is never sent.
POOL_NEVER_RESET = False  # fixed on bugs23, merged

# Bug 4: with copy=True, final_* rows are stale (not zeros) where done is False, once
# an env finished; recv() too.
STALE_FINAL_ROWS = False  # fixed on bugs23, merged

# Bug 6: send(env_ids=...) reads ids with int(): a boolean mask is read as ids 0/1 and
# floats are truncated, where reset()/call() take masks and refuse floats.
SEND_IDS_INT = False  # fixed on bugs23, merged

# Found by this fuzzer (not in issue 23's list; reported, not fixed here: group.py and
# ray.py are being changed on other branches). A Ray actor answering Ray calls
# (transport="ray") steps its whole block in a pool step with EnvGroup.step(); when one
# env raises, the envs stepped before it in the block lose that step's bookkeeping
# (episode return/length, autoreset of an episode that ended) and the whole block
# leaves the pool, where README says only the failed env does ("the other envs go on").
RAY_WHOLE_BLOCK_POOL_ERROR = False  # fixed on fix-step-error: only the failed env leaves the pool

# Found by this fuzzer, as above: in a synchronous step() (every backend) an env that
# raises without a restart budget leaves the envs its EnvGroup stepped before it
# without bookkeeping: one that finished its episode in that step is not reset, and the
# next step() reports a phantom episode (done again, return 0, length 1) for it. The
# fuzzer asks for a seeded reset after any failed synchronous step, so it does not
# meet this; tests/fuzz/test_fuzz_known_bugs.py shows it.
SYNC_ERROR_SKIPS_BOOKKEEPING = False  # fixed on fix-step-error: envs stepped before it keep their step

# Found by this fuzzer's long run. When one recv() read the errors of two envs (two
# workers' answers read in one wait, or two answers of one worker in one read), it raised
# the first and dropped the second: that env left the pool silently. Fixed: the pool
# keeps the errors it read, and each following recv() raises the next one, before any
# batch (docs/backends/async_pool.md); a reset()/step() drops them with the results.
SECOND_POOL_ERROR_DROPPED = False  # fixed on fix-pool-errors
