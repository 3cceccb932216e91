#!/usr/bin/env bash
# Runs Stable-Baselines3's own tests on marl_vec's SB3 face (marl_vec.compat.SB3VecEnv),
# the way gymnasium's tests/vector suite is run against another vector env:
#   1. SB3's sdist, for the SB3 version installed in the active Python, comes from the package
#      index as a package download (pip's cache makes a second run cheap); its tests/ folder is
#      extracted into $SB3_SUITE_DIR (default .sb3-suite, in the repo root).
#   2. pytest runs them with scripts/ci/sb3_suite/sb3_face_plugin.py: SB3's DummyVecEnv and
#      SubprocVecEnv become SB3VecEnv over marl_vec's backends, and only SB3's vec-env tests and
#      the tests that build a DummyVecEnv, SubprocVecEnv or make_vec_env are selected.
#   3. Tests listed in scripts/ci/sb3_suite/expected_failures.txt (each with its reason) may fail;
#      any other failure, or a listed test that passes, fails the run.
# Backends (SB3_SUITE_BACKENDS, default "dummy subproc"): "dummy" puts marl_vec's DummyVecEnv in
# place of SB3's DummyVecEnv and marl_vec's SubprocVecEnv in place of SB3's SubprocVecEnv, over
# the whole selection; "subproc" puts marl_vec's SubprocVecEnv in place of both, over SB3's
# vec-env test files (tests/test_vec_*.py; the training tests would only repeat them slower).
# SB3_SUITE_SCOPE=vec runs only SB3's vec-env test files on every backend (what .ci/run does, to
# bound CI's time); the default, all, runs the whole selection on dummy.
# Extra arguments go to pytest (e.g. -k vec_envs). Exit status: non-zero if any backend's run failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
dir="${SB3_SUITE_DIR:-.sb3-suite}"
version="$(python -c 'import stable_baselines3; print(stable_baselines3.__version__)')"
mkdir -p "$dir"
if [ ! -d "$dir/stable_baselines3-$version/tests" ]; then
    python -m pip download -q --no-deps --no-binary :all: "stable-baselines3==$version" -d "$dir"
    tar -xzf "$dir/stable_baselines3-$version.tar.gz" -C "$dir" "stable_baselines3-$version/tests" \
        "stable_baselines3-$version/pyproject.toml"
fi
# SB3's tests import pandas (tests/test_vec_monitor.py, from SB3's "extra"), which neither SB3
# nor marl_vec's test extra installs.
python -m pip install -q pandas
status=0
for backend in ${SB3_SUITE_BACKENDS:-dummy subproc}; do
    start=$SECONDS
    echo "run_sb3_suite.sh: SB3 $version's tests on SB3VecEnv, backend $backend"
    backend_status=0
    # From the sdist's folder: its pyproject.toml holds SB3's pytest settings (markers, warnings).
    (cd "$dir/stable_baselines3-$version" \
        && if [ "$backend" = subproc ] || [ "${SB3_SUITE_SCOPE:-all}" = vec ]; then set -- tests/test_vec_*.py "$@"; else set -- tests "$@"; fi \
        && MARL_VEC_SB3_BACKEND="$backend" PYTHONPATH="$repo:$repo/scripts/ci/sb3_suite${PYTHONPATH:+:$PYTHONPATH}" \
           python -m pytest -p sb3_face_plugin -p no:cacheprovider -p no:warnings -q -rfEX --timeout=900 "$@") \
        || backend_status=$?
    echo "run_sb3_suite.sh: backend $backend: exit $backend_status in $((SECONDS - start)) s"
    if [ "$backend_status" -ne 0 ] && [ "$status" -eq 0 ]; then status=$backend_status; fi
done
exit "$status"
