"""``python -m marl_vec``: the ``marl-vec`` command."""

from marl_vec.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
