"""Hypothesis profiles: ``ci`` (the default: bounded, for every run of the suite) and
``long`` (10,000 examples per test: ``pytest --hypothesis-profile=long tests/fuzz``).

A test that sets its own ``max_examples`` keeps it under either profile.
"""

try:
    from hypothesis import HealthCheck, Phase, settings
except ImportError:
    # The faces' own venvs (.venv-xuance, .venv-agilerl, .venv-tianshou) run a few test files
    # that use no Hypothesis; only the main venv (the test extra) has it.
    settings = None

if settings is not None:
    # No explain phase: on a stateful test it reruns the failing case hundreds of times (minutes).
    PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
    SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile(
        "ci", max_examples=200, deadline=None, phases=PHASES, suppress_health_check=SUPPRESSED
    )
    settings.register_profile(
        "long", max_examples=10_000, deadline=None, phases=PHASES, suppress_health_check=SUPPRESSED
    )
    settings.load_profile("ci")
