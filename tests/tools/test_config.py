"""YAML configs: every shipped one loads and builds; mistakes fail at load time naming key and allowed values."""

from __future__ import annotations

import pytest

import marl_vec as mv
from marl_vec.tools.config import ConfigError, load_config, resolve_config_path, shipped_configs, shipped_configs_dir

CORE_CONFIGS = ["mpe/simple_spread", "mpe/simple_tag", "mpe/simple_adversary", "gym/cartpole",
                "pettingzoo/pistonball", "sisl/multiwalker", "magent2/battle"]


def test_the_foundation_configs_are_shipped():
    assert set(CORE_CONFIGS) <= set(shipped_configs())


@pytest.mark.parametrize("name", CORE_CONFIGS)
def test_shipped_config_builds_and_steps(name):
    from marl_vec.tools.rollout import RandomPolicy

    venv = mv.make(name, num_envs=2)
    r = venv.reset()
    r = venv.step(RandomPolicy(venv.spec, 2)(r))
    assert r.obs.shape[:2] == (2, venv.spec.n_agents)
    venv.close()


def test_defaults_and_overrides():
    cfg = load_config()
    assert cfg.env.id == "mpe2.simple_spread_v3" and cfg.vec.num_envs == 8 and cfg.vec.backend == "dummy"
    cfg = load_config("mpe/simple_spread", {"vec.num_envs": 32, "env.kwargs.N": 4})
    assert cfg.vec.num_envs == 32 and cfg.env.kwargs["N"] == 4
    venv = mv.make({"env": {"family": "gym", "id": "CartPole-v1"}}, num_envs=3, autoreset="next_step")
    assert venv.num_envs == 3 and venv.autoreset is mv.AutoresetMode.NEXT_STEP
    venv.close()


def test_unknown_key_names_it_and_the_allowed_keys(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env: {family: gym, id: CartPole-v1}\nvec: {num_env: 4}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'vec.num_env'; allowed here: num_envs, backend, env_seed"):
        load_config(path)


def test_unknown_value_names_the_allowed_values():
    with pytest.raises(ConfigError, match=r"vec.backend: 'threads' is not allowed: Input should be 'dummy', 'subproc', 'ray' or 'auto'"):
        mv.make("gym/cartpole", backend="threads")
    with pytest.raises(ConfigError, match=r"env.family: 'unity' is not allowed: Input should be 'gym', 'atari'"):
        load_config({"env": {"family": "unity", "id": "x"}})
    with pytest.raises(ConfigError, match=r"vec.num_envs: 0 is not allowed"):
        load_config("gym/cartpole", {"vec.num_envs": 0})


def test_missing_keys_and_files():
    with pytest.raises(ConfigError, match=r"missing key 'env.id'"):
        load_config({"env": {"family": "gym"}})
    with pytest.raises(ConfigError, match=r"no config file 'mpe/simple_sprad'.*mpe/simple_spread"):
        load_config("mpe/simple_sprad")


def test_backend_options_on_the_wrong_backend_fail():
    with pytest.raises(ConfigError, match="vec.num_workers applies to the subproc and ray backends, not to backend 'dummy'"):
        mv.make("gym/cartpole", num_workers=2)


def test_vec_device_cpu_is_the_host_on_every_backend():
    # cpu is where the process backends keep their numpy results: they take it (issue 49 item 7).
    for backend in ("subproc", "dummy"):
        with mv.make("gym/cartpole", num_envs=2, backend=backend, num_workers=None if backend == "dummy" else 1,
                     device="cpu") as venv:
            assert venv.reset().obs.shape == (2, 1, 4)
    for device in ("cpu:0", None):
        with mv.make("gym/cartpole", num_envs=2, backend="subproc", num_workers=1, device=device) as venv:
            venv.reset()
    with pytest.raises(ConfigError, match=r"vec.array_backend='numpy' / vec.device='cuda:0' apply to the dummy backend"):
        mv.make("gym/cartpole", num_envs=2, backend="subproc", device="cuda:0")


def test_bad_env_id_fails_naming_it():
    """The package imports, the module does not: a typo, not a missing extra (the CLI's view: test_cli_errors.py)."""
    with pytest.raises(ValueError, match=r"^no env 'mpe2.simple_sprd_v3' in mpe2; close matches: mpe2.simple_spread_v3"):
        mv.make({"env": {"family": "pettingzoo", "id": "mpe2.simple_sprd_v3"}})
    with pytest.raises(ImportError, match=r"no_such_pkg.env_v1 is needed .*pip install 'marl_vec\[pettingzoo\]'"):
        mv.make({"env": {"family": "pettingzoo", "id": "no_such_pkg.env_v1"}})


def test_repo_relative_paths_name_the_shipped_config_from_any_directory(tmp_path, monkeypatch):
    """``configs/mpe/simple_spread.yaml`` (as older examples wrote it) works outside the repo too."""
    monkeypatch.chdir(tmp_path)
    for name in ("configs/mpe/simple_spread.yaml", "configs/mpe/simple_spread", "mpe/simple_spread.yaml",
                 "mpe/simple_spread"):
        assert resolve_config_path(name) == shipped_configs_dir() / "mpe" / "simple_spread.yaml", name
    assert load_config("configs/gym/cartpole.yaml").env.id == "CartPole-v1"
    # A file of that name in the working directory comes first.
    (tmp_path / "configs" / "gym").mkdir(parents=True)
    (tmp_path / "configs" / "gym" / "cartpole.yaml").write_text("env: {family: gym, id: Pendulum-v1}\n")
    assert load_config("configs/gym/cartpole.yaml").env.id == "Pendulum-v1"
    with pytest.raises(ConfigError, match=r"^no config file 'configs/mpe/no_such\.yaml'; give a YAML path or one of "
                                          r"the shipped configs of mpe: mpe/simple_adversary, mpe/simple_spread, "
                                          r"mpe/simple_tag$"):
        resolve_config_path("configs/mpe/no_such.yaml")


def test_a_bad_value_names_the_override_or_argument_that_set_it_not_the_shipped_file():
    rest = r" \(applied to the shipped config mpe/simple_spread\):\n  vec.num_envs: 0 is not allowed: "
    with pytest.raises(ConfigError, match=r"^invalid make\(num_envs=0\)" + rest):
        mv.make("mpe/simple_spread", num_envs=0)
    with pytest.raises(ConfigError, match=r"^invalid override vec.num_envs=0" + rest):
        load_config("mpe/simple_spread", {"vec.num_envs": 0})
    with pytest.raises(ConfigError, match=r"^invalid override vec.num_env=3 \(applied to the config dict\):\n"
                                          r"  unknown key 'vec.num_env'; allowed here: num_envs, "):
        load_config({"env": {"family": "gym", "id": "CartPole-v1"}}, {"vec.num_env": 3})


def test_errors_in_the_file_and_in_an_override_name_each_source(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env: {family: gym, id: CartPole-v1}\nvec: {num_envs: -1}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, {"vec.backend": "threads"})
    assert str(info.value).splitlines() == [
        f"invalid config {path}:",
        "  vec.num_envs: -1 is not allowed: Input should be greater than or equal to 1",
        "  vec.backend: 'threads' is not allowed: Input should be 'dummy', 'subproc', 'ray' or 'auto' "
        "(set by override vec.backend='threads')",
    ]


@pytest.mark.parametrize("typo, close", [
    ("mpe/simple_sprad", "mpe/simple_spread, jax_mpe/simple_spread, mpe/simple_tag"),
    ("simple_spread", "mpe/simple_spread, jax_mpe/simple_spread"),
    ("gym/cartpol.yaml", "gym/cartpole"),
])
def test_a_typo_in_a_config_name_gives_close_matches_not_every_name(typo, close):
    every = len(shipped_configs())
    with pytest.raises(ConfigError, match=rf"^no config file '{typo}'; close matches: {close}; give a YAML path or "
                                          rf"a shipped config name \(`marl-vec list` shows all {every}\)$"):
        load_config(typo)


def test_a_name_with_no_close_match_lists_the_families():
    families = sorted({name.partition("/")[0] for name in shipped_configs()})
    with pytest.raises(ConfigError) as info:
        load_config("no/such_config")
    assert str(info.value) == (
        "no config file 'no/such_config'; give a YAML path or one of the shipped configs: FAMILY/NAME, FAMILY "
        f"one of {', '.join(families)} (`marl-vec list` shows all {len(shipped_configs())})")
