"""What the user did wrong comes out of ``marl-vec`` as one line with status 2, on every backend.

A missing extra, an unknown env id, an option the env does not take, a game
that is not installed: each is a :class:`marl_vec.core.errors.SetupError`, shown as
``marl-vec: <message>`` with no traceback, also when a worker process raised it.
A real failure of an env in a worker keeps its traceback. Pages:
docs/troubleshooting.md.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from marl_vec.tools.cli import main, setup_error
from marl_vec.tools.config import ConfigError
from marl_vec.envs.extras import MissingExtraError, UnknownEnvError, import_env_module
from marl_vec.envs.registry import EnvOptionsError, make_env
from marl_vec.core.errors import SetupError, WorkerError

BACKENDS = ["dummy", "subproc"]
ROOT = Path(__file__).resolve().parents[2]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("marl-vec: "), err
    return lines[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_misspelt_pettingzoo_id_names_the_close_matches(backend, capsys):
    assert main(["run", "--no-progress", "-o", "env.id=mpe2.simple_sprd_v3", "-o", f"vec.backend={backend}"]) == 2
    line = _one_line(capsys)
    assert line.startswith("marl-vec: no env 'mpe2.simple_sprd_v3' in mpe2; close matches: mpe2.simple_spread_v3")
    assert "install" not in line  # the package is there: installing would not help


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_missing_package_names_the_extra(backend, capsys):
    assert main(["run", "--no-progress", "-o", "env.id=no_such_package_here.game_v1", "-o", f"vec.backend={backend}"]) == 2
    assert _one_line(capsys) == (
        "marl-vec: no_such_package_here.game_v1 is needed for the PettingZoo env 'no_such_package_here.game_v1' "
        "but cannot be imported (No module named 'no_such_package_here'); "
        "install it with: pip install 'marl_vec[pettingzoo]'")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_option_the_env_does_not_take(backend, capsys):
    assert main(["run", "--no-progress", "-o", "env.kwargs.NN=4", "-o", f"vec.backend={backend}"]) == 2
    assert _one_line(capsys) == ("marl-vec: pettingzoo env 'mpe2.simple_spread_v3' does not take env.kwargs NN: "
                                 "raw_env.__init__() got an unexpected keyword argument 'NN'")


def test_a_misspelt_gymnasium_id(capsys):
    assert main(["run", "gym/cartpole", "--no-progress", "-o", "env.id=CartPol-v1"]) == 2
    assert _one_line(capsys) == ("marl-vec: no env 'CartPol-v1' in gymnasium's registry: "
                                 "Environment `CartPol` doesn't exist. Did you mean: `CartPole`?")


@pytest.mark.parametrize("command", [["run", "sc2/3m", "--no-progress"], ["info", "sc2/3m"],
                                     ["run", "sc2/3m", "--no-progress", "-o", "vec.backend=dummy"]])
def test_starcraft2_without_the_game(command, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "no_game"))
    assert main(command) == 2  # sc2/3m runs on subproc: the error comes from the workers
    assert _one_line(capsys).startswith(f"marl-vec: no StarCraft II game at {tmp_path / 'no_game'} (SC2PATH). ")


def test_an_env_that_fails_in_a_worker_keeps_its_traceback():
    """Only setup errors are shortened: an env's own failure is a WorkerError with the original traceback."""
    err = WorkerError("start", 0, 3, "RuntimeError('boom')", "Traceback ...\nRuntimeError: boom")
    assert setup_error(err) is None and err.cause is None
    missing = MissingExtraError("gfootball is needed; install it with: pip install 'marl_vec[football]'")
    wrapped = WorkerError("start", 1, 0, missing, "Traceback ...")
    assert setup_error(wrapped) is missing and setup_error(missing) is missing
    assert str(wrapped).startswith("env 0 (worker 1) failed in start: MissingExtraError(\"gfootball is needed;")
    again = pickle.loads(pickle.dumps(wrapped))
    assert type(again.cause) is MissingExtraError and str(again.cause) == str(missing) and again.error == wrapped.error


def test_setup_errors_stay_the_builtin_errors_they_were():
    for cls, builtin in ((MissingExtraError, ImportError), (UnknownEnvError, ValueError), (EnvOptionsError, TypeError),
                         (ConfigError, ValueError)):
        assert issubclass(cls, SetupError) and issubclass(cls, builtin)
        assert type(pickle.loads(pickle.dumps(cls("x")))) is cls


def test_import_env_module_tells_a_typo_from_a_missing_package():
    with pytest.raises(UnknownEnvError, match=r"^no env 'pettingzoo.sisll.multiwalker_v9' in pettingzoo; "
                                              r"close matches: pettingzoo.sisl$"):
        import_env_module("pettingzoo.sisll.multiwalker_v9", "pettingzoo")
    with pytest.raises(UnknownEnvError, match=r"^no env 'mpe2.zzzz' in mpe2; no close match among: .*mpe2.simple_spread_v3"):
        import_env_module("mpe2.zzzz", "pettingzoo")
    with pytest.raises(MissingExtraError, match=r"No module named 'no_such_top'.*marl_vec\[pettingzoo\]"):
        import_env_module("no_such_top.env_v0", "pettingzoo")
    assert import_env_module("mpe2.simple_spread_v3", "pettingzoo").__name__ == "mpe2.simple_spread_v3"


def test_a_type_error_that_is_not_about_the_options_is_not_renamed(monkeypatch):
    """A bug in an env's constructor keeps its own TypeError (and traceback); one naming an option is renamed."""
    import marl_vec.envs.gym as gym_family

    def broken(env_id, **kwargs):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")

    monkeypatch.setattr(gym_family, "make_gym", broken)
    with pytest.raises(TypeError) as info:
        make_env("gym", "CartPole-v1", size=3)
    assert type(info.value) is TypeError
    monkeypatch.setattr(gym_family, "make_gym", lambda env_id, **kw: (_ for _ in ()).throw(TypeError("bad 'size'")))
    with pytest.raises(EnvOptionsError, match=r"^gym env 'CartPole-v1' does not take env.kwargs size: bad 'size'$"):
        make_env("gym", "CartPole-v1", size=3)


def test_unknown_ids_of_the_other_families():
    with pytest.raises(UnknownEnvError, match=r"no env 'ALE/Pongg-v5' in gymnasium's registry: .*Did you mean: `Pong`"):
        make_env("atari", "ALE/Pongg-v5", engine="python")
    with pytest.raises(UnknownEnvError, match=r"unknown PettingZoo Atari game 'pongg_v3'; allowed: .*pong_v3"):
        make_env("atari", "pettingzoo.atari.pongg_v3")


def test_an_unknown_starcraft2_map(capsys):
    assert main(["info", "sc2/3m", "-o", "env.id=3mm"]) == 2
    assert _one_line(capsys).startswith("marl-vec: unknown StarCraft II map '3mm'; known: 3m, 8m, ")


def test_an_unknown_football_scenario(capsys):
    # find_spec, not importorskip: importing gfootball prints gym's notice into capsys.
    if importlib.util.find_spec("gfootball") is None:
        pytest.skip("gfootball is not installed (bash scripts/install/install_football.sh)")
    assert main(["info", "football/academy_3_vs_1_with_keeper", "-o", "env.id=academy_no_such_drill"]) == 2
    assert _one_line(capsys).startswith("marl-vec: unknown football scenario 'academy_no_such_drill'; allowed: ")


@pytest.mark.slow
def test_a_setup_error_in_a_ray_actor_is_the_same_line():
    """On Ray the error comes from an actor; Ray's own start-up lines may come before it, no traceback."""
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "marl_vec.tools.cli", "run", "--no-progress", "-o", "env.id=mpe2.simple_sprd_v3",
                          "-o", "vec.backend=ray", "-o", "vec.num_envs=2", "-o", "vec.ray.num_workers=2"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "creation task" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(
        "marl-vec: no env 'mpe2.simple_sprd_v3' in mpe2; close matches: mpe2.simple_spread_v3"), out.stderr


def test_setup_error_is_public():
    import marl_vec as mv

    assert mv.SetupError is SetupError and issubclass(mv.ConfigError, mv.SetupError)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("override", ["env.id=mpe2.simple_sprd_v3", "env.kwargs.NN=4"])
def test_run_prints_no_header_before_failing_on_a_bad_env(backend, override, capsys):
    """The ``marl-vec run: ...`` line announces a run that starts, not one that fails at once."""
    assert main(["run", "--no-progress", "-o", override, "-o", f"vec.backend={backend}"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("marl-vec: "), (out, err)


def test_a_bad_override_names_itself_not_the_shipped_file(capsys):
    assert main(["run", "--no-progress", "-o", "vec.num_envs=0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "marl-vec: invalid override vec.num_envs=0 (applied to the shipped config mpe/simple_spread):",
        "  vec.num_envs: 0 is not allowed: Input should be greater than or equal to 1",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_value_the_env_refuses_is_one_line(backend, capsys):
    """``-o env.kwargs.N=x``: mpe2 raises its own TypeError deep inside (not naming N); it becomes one
    line naming the env, the option and what was given, as every other config mistake does."""
    assert main(["run", "--no-progress", "-o", "env.kwargs.N=x", "-o", f"vec.backend={backend}"]) == 2
    assert _one_line(capsys) == ("marl-vec: pettingzoo env 'mpe2.simple_spread_v3' refused env.kwargs N='x' (a str): "
                                 "TypeError: 'str' object cannot be interpreted as an integer")


def test_of_several_options_the_refused_one_is_named():
    """The option without which the env builds is named; the others given with it are not."""
    with pytest.raises(EnvOptionsError) as info:
        make_env("pettingzoo", "mpe2.simple_spread_v3", max_cycles=10, N=2.5, local_ratio=0.5)
    assert str(info.value) == ("pettingzoo env 'mpe2.simple_spread_v3' refused env.kwargs N=2.5 (a float): "
                               "TypeError: 'float' object cannot be interpreted as an integer")


def test_a_failure_with_the_defaults_too_keeps_its_traceback(monkeypatch):
    """When the env fails without the given options too, they are not to blame: the error stays as raised."""
    import marl_vec.envs.gym as gym_family

    def broken(env_id, **kwargs):
        raise ValueError("the engine's table is corrupt")

    monkeypatch.setattr(gym_family, "make_gym", broken)
    with pytest.raises(ValueError) as info:
        make_env("gym", "CartPole-v1", max_episode_steps="x")
    assert type(info.value) is ValueError


def test_a_refused_value_stays_a_value_error():
    """An env's own ValueError on a given value is renamed and stays a ValueError (code catching it keeps working)."""
    with pytest.raises(ValueError, match=r"^meltingpot env 'coins' refused env.kwargs max_episode_steps=0 \(an int\): "
                                         r"ValueError: meltingpot max_episode_steps must be an int >= 1, not 0$") as info:
        make_env("meltingpot", "coins", max_episode_steps=0)
    assert isinstance(info.value, EnvOptionsError) and isinstance(info.value, SetupError)
