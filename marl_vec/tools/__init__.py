"""What a user runs on top of a batch: YAML configs, the ``marl-vec`` command, rollouts,
the episode runner, frames and GIFs, plots, progress display and the tuner."""
