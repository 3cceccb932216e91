"""Checks of the fuzzer held back while issue 23's known bugs are open (fixed on branch bugs23).

Each flag is True while its bug is open: the machine then avoids the sequence that
meets it (or skips that one check), and tests/fuzz/test_fuzz_known_bugs.py holds a
strict xfail test of it. Once bugs23 is merged, set the flag to False and remove the
xfail mark of its test (both fail loudly until then: an xfail that passes is an error).
"""

# Bug 2: reset() (and step(), call(), get_attr(), ...) re-raises the error of an env
# that raised in a pool step that was sent but never received, instead of dropping it.
STALE_POOL_ERROR = True

# Bug 3: after a partial first reset the pool hands out and steps a never-reset env
# (a fake restart), where step() raises ResetNeeded; and a partial reset that leaves
# out an env that raised in the pool puts it back into the pool.
POOL_NEVER_RESET = True

# Bug 4: with copy=True, final_* rows are stale (not zeros) where done is False, once
# an env finished; recv() too.
STALE_FINAL_ROWS = True

# Bug 6: send(env_ids=...) reads ids with int(): a boolean mask is read as ids 0/1 and
# floats are truncated, where reset()/call() take masks and refuse floats.
SEND_IDS_INT = True
