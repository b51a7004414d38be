"""Bad input gets a clear error, never a traceback: exit 2 with the value, the limit and a fix, before any
evaluation (each case here stops before the sandbox runs, so the file is fast)."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.config import ConfigError, load_config


def cli(tmp_path, *args):
    from agent.cli import app
    out = CliRunner().invoke(app, [str(a) for a in args] + ["-c", f"home={tmp_path / 'home'}"])
    out.flat = " ".join(out.output.split())
    return out


@pytest.fixture
def files(tmp_path):
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "binary.py").write_bytes(b"import x\0\x01\x02")
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\n".encode("latin-1"))
    (tmp_path / "folder").mkdir()
    (tmp_path / "bad.yaml").write_text("shapes: [\n  - {id: a, dims: {T: 1\n")
    (tmp_path / "a_file").write_text("x")
    return tmp_path


@pytest.mark.parametrize("command", ["bench", "optimize"])
@pytest.mark.parametrize("name, message", [
    ("empty.py", "is empty; it must define the operator's function"),
    ("binary.py", "is a binary file (a NUL byte at offset 8)"),
    ("latin1.py", "is not UTF-8 text (byte 5)"),
    ("folder", "is a directory; give the kernel's .py file inside it"),
    ("missing.py", "does not exist; give the path of a kernel .py file"),
])
def test_an_unusable_kernel_file_is_a_usage_error(files, command, name, message):
    option = "--kernel" if command == "bench" else "--seed-kernel"
    out = cli(files, command, "--op", "rms_norm", option, files / name)
    assert out.exit_code == 2, out.output
    assert f"{option} {files / name} {message}" in out.flat
    assert "Traceback" not in out.output


def test_invalid_shapes_yaml_names_the_line(files):
    out = cli(files, "optimize", "--op", "rms_norm", "--shapes", files / "bad.yaml")
    assert out.exit_code == 2 and "is not valid YAML (line 2, column 3: expected the node content" in out.flat


def test_bench_checks_the_json_path_before_evaluating(files):
    out = cli(files, "bench", "--op", "rms_norm", "--json", files / "a_file" / "out.json")
    assert out.exit_code == 2 and f"--json {files / 'a_file' / 'out.json'} cannot be written" in out.flat
    out = cli(files, "bench", "--op", "rms_norm", "--json", files / "folder")
    assert out.exit_code == 2 and "is a directory; give a file path" in out.flat


@pytest.mark.parametrize("args, message", [
    (["--target", "-3"], "--target -3 is out of range (0, 1]"),
    (["--target", "1.5"], "--target 1.5 is out of range (0, 1]"),
    (["--usd", "nan"], "--usd nan: not a finite number"),
    (["--minutes", "inf"], "--minutes inf: not a finite number"),
    (["--gpu-minutes", "-1"], "--gpu-minutes -1 is out of range [0, inf)"),
])
def test_out_of_range_options_name_value_and_limit(tmp_path, args, message):
    out = cli(tmp_path, "optimize", "--op", "rms_norm", *args)
    assert out.exit_code == 2 and message in out.flat


@pytest.mark.parametrize("command", ["bench", "optimize"])
@pytest.mark.parametrize("override, message", [
    ("sandbox.trials=0", "sandbox.trials=0 is out of range: it must be >= 1"),
    ("sandbox.timeout_s=-5", "sandbox.timeout_s=-5.0 is out of range: it must be > 0"),
])
def test_settings_out_of_range_stop_both_commands(tmp_path, command, override, message):
    out = cli(tmp_path, command, "--op", "rms_norm", "-c", override)
    assert out.exit_code == 2 and message in out.flat and f"(-c {override.split('=')[0]}=VALUE)" in out.flat


@pytest.mark.parametrize("override, message", [
    ("sandbox.trials=0", "must be >= 1"), ("sandbox.timeout_s=0", "must be > 0"), ("llm.timeout_s=-1", "must be > 0"),
    ("acceptance.repeats=0", "must be >= 1"), ("llm.usd_per_mtok_in=.nan", "not a finite number"),
    ("sandbox.gpu_memory_fraction=1.5", "must be > 0 and <= 1"), ("dropout.p=1.0", "in [0, 1)"),
    ("llm.max_retries=-1", "must be >= 0"),
])
def test_config_ranges_are_checked_at_load_time(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert str(e.value).startswith(override.split("=")[0]) and message in str(e.value)


def test_defaults_pass_the_range_check():
    load_config(None, [])


def test_export_to_an_existing_file_is_a_usage_error(files):
    from test_run_records import SearchProposer, make_loop
    loop, audit = make_loop(files / "home", SearchProposer(seed=3), iterations=1)
    loop.run()
    audit.close()
    out = cli(files, "audit", "export", "run-1", "--to", files / "a_file")
    assert out.exit_code == 2 and f"--to {files / 'a_file'} is an existing file" in out.flat
    assert Path(files / "a_file").read_text() == "x"
