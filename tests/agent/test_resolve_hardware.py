"""The CLI scores with the ceilings of the GPU it runs on, like the studies (benchmarks.hardware.profile_key): a GPU
with no profile is a usage error that names it and the fix, never another card's ceilings in silence. The GPU's
name is the one input replaced here (this machine has none); the profile lookup and the error are the real ones."""
import pytest
import typer

from agent import cli
from agent.cli_errors import EXIT_USAGE
from agent.config import load_config
from benchmarks.hardware import profile_key


def test_profile_key_maps_driver_names_and_no_gpu_to_the_reference_card():
    assert profile_key("NVIDIA H100 80GB HBM3") == "h100"
    assert profile_key("NVIDIA H200") == "h200"
    assert profile_key(None) == "h200"
    with pytest.raises(KeyError, match=r"'Quadro P400'.*known: .*NVIDIA H200.*configs/hardware/<name>.yaml"):
        profile_key("Quadro P400")


def _resolve_on(monkeypatch, gpu_name, name=None):
    monkeypatch.setattr(cli, "gpu_name_or_none", lambda: gpu_name)
    return cli.resolve_hardware(load_config(), name)


def test_auto_takes_the_profile_of_the_gpu(monkeypatch):
    primary, _ = _resolve_on(monkeypatch, "NVIDIA H100 80GB HBM3")
    assert primary.name == "h100"
    primary, _ = _resolve_on(monkeypatch, None)                     # no driver: the reference card
    assert primary.name == "h200"


def test_a_gpu_without_a_profile_is_a_usage_error(monkeypatch, capsys):
    with pytest.raises(typer.Exit) as exc:
        _resolve_on(monkeypatch, "Quadro P400")
    assert exc.value.exit_code == EXIT_USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "no ceilings profile for the GPU 'Quadro P400'" in err and "--hardware NAME" in err


def test_a_named_profile_needs_no_gpu_lookup(monkeypatch):
    primary, _ = _resolve_on(monkeypatch, "Quadro P400", name="h100")
    assert primary.name == "h100"


def test_this_machines_lookup_returns_a_name_or_none():
    name = cli.gpu_name_or_none()
    assert name is None or (isinstance(name, str) and name)
