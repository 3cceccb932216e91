"""The batch itself: its spec and spaces, the preallocated buffers, the one stepping loop
(`EnvGroup`), episode bookkeeping, the state option and the errors.

The data modules (spaces, spec, episode, errors, buffers) import nothing of marl_vec above
them; the stepping loop (group, state) also uses the adapter contract of ``marl_vec.envs``.
"""
