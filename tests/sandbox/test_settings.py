"""The sandbox's settings: one object from the config file to the worker, validated with a fix in the message."""
import pytest

from sandbox.settings import SandboxSettings


def test_the_config_section_is_the_sandbox_settings_object():
    from agent.config import load_config
    cfg = load_config(overrides=["sandbox.trials=2", "sandbox.prestart=false", "sandbox.ab_rounds=12"])
    assert type(cfg.sandbox) is SandboxSettings
    assert (cfg.sandbox.trials, cfg.sandbox.prestart, cfg.sandbox.ab_rounds) == (2, False, 12)


@pytest.mark.parametrize("kw, message", [
    ({"trials": 0}, "at least 1 correctness trial"),
    ({"holdout_trials": 0}, "holdout_trials=0"),
    ({"gpu_memory_fraction": 1.5}, r"\(0, 1\]"),
    ({"timeout_s": 0}, "must be positive"),
    ({"dsl_threshold": 2}, r"\[0, 1\]"),
    ({"ab_rounds": 3}, "at least 4 rounds"),
    ({"gpu_warm_stages": ("cuda_init", "cupti")}, r"\['cupti'\] not among.*profiler_init"),
])
def test_bad_settings_name_the_value_and_the_limit(kw, message):
    with pytest.raises(ValueError, match=message):
        SandboxSettings(**kw).validate()
    SandboxSettings().validate()


def test_the_spares_warm_stages_come_from_the_config_file():
    from agent.config import load_config
    cfg = load_config(overrides=["sandbox.gpu_warm_stages=[digest_compile]"])
    assert cfg.sandbox.gpu_warm_stages == ("digest_compile",)
    assert load_config().sandbox.gpu_warm_stages == ("cuda_init", "profiler_init", "digest_compile")
