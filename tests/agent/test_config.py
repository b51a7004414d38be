import pytest

from agent.config import ConfigError, load_config, parse_override


def test_defaults_load_and_home_comes_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AKA_HOME", str(tmp_path / "h"))
    cfg = load_config()
    assert cfg.home_dir == tmp_path / "h"
    assert cfg.audit_db == tmp_path / "h" / "audit.db"
    assert cfg.sandbox.trials >= 3 and cfg.dropout.enabled


def test_overrides_are_typed():
    cfg = load_config(overrides=["dropout.p=0.25", "sandbox.trials=5", "dropout.enabled=false",
                                 "sandbox.require_features=wgmma,tma"])
    assert cfg.dropout.p == 0.25 and cfg.sandbox.trials == 5 and cfg.dropout.enabled is False
    assert cfg.sandbox.require_features == ("wgmma", "tma")


def test_file_then_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("dropout:\n  patience: 7\nknowledge:\n  hide_provenance: true\n")
    cfg = load_config(f, ["dropout.patience=9"])
    assert cfg.dropout.patience == 9 and cfg.knowledge.hide_provenance is True


@pytest.mark.parametrize("override, message", [
    ("dropout.q=1", "unknown config key"),
    ("sandbox.trials=three", "not a valid int"),
    ("dropout.p=1.5", "dropout.p"),
    ("ceilings=guess", "calibrated or datasheet"),
    ("nonsense", "key.path=value"),
])
def test_bad_config_says_what_and_how(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


def test_parse_override_nests():
    assert parse_override("a.b.c=3") == {"a": {"b": {"c": 3}}}


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
