"""`aka optimize` and `aka audit` through typer's CliRunner on a small app built here (agent/cli.py mounts
the same functions), with the real sandbox under the interpreter and a real SQLite file."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from agent.cli_audit import app as audit_app
from agent.cli_optimize import optimize

pytestmark = pytest.mark.interpreter


def make_app() -> typer.Typer:
    app = typer.Typer()
    app.command("optimize")(optimize)
    app.add_typer(audit_app, name="audit")
    return app


def tiny_shapes(folder: Path) -> Path:
    path = folder / "shapes.yaml"
    path.write_text(yaml.safe_dump({"shapes": [
        {"id": "tiny-decode", "dims": {"T": 2, "H": 64}, "dtype": "fp32", "phase": "decode", "weight": 2.0},
        {"id": "tiny-prefill", "dims": {"T": 4, "H": 96}, "dtype": "fp32", "phase": "prefill", "weight": 1.0},
    ]}))
    return path


@pytest.fixture
def cands(tmp_path):
    from test_loop import make_candidates
    return make_candidates(tmp_path / "cands")


def invoke(app, *args):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_usage_errors_exit_2_with_a_fix(tmp_path):
    app, home = make_app(), f"home={tmp_path / 'home'}"
    r = invoke(app, "optimize", "--op", "no_such_op", "-c", home)
    assert r.exit_code == 2 and "known operators" in r.output
    r = invoke(app, "optimize", "--op", "rms_norm", "--shapes", str(tiny_shapes(tmp_path)), "--proposer", "scripted",
               "-c", home)
    assert r.exit_code == 2 and "--script" in r.output
    r = invoke(app, "optimize", "--op", "rms_norm", "--shapes", str(tiny_shapes(tmp_path)), "--proposer", "llm",
               "-c", home)
    assert r.exit_code == 2 and "--model" in r.output
    r = invoke(app, "optimize", "--op", "rms_norm", "-c", "dropout.p=2", "-c", home)
    assert r.exit_code == 2 and "dropout.p" in r.output
    r = invoke(app, "optimize", "--op", "rms_norm", "--iterations", "-1", "-c", home)
    assert r.exit_code == 2 and "--iterations -1 is out of range [0, inf)" in r.output
    r = invoke(app, "optimize", "--resume", "nope", "-c", home)
    assert r.exit_code == 2 and "no run 'nope'" in r.output
    r = invoke(app, "optimize", "--op", "rms_norm", "--samples", "0", "-c", home)
    assert r.exit_code == 2 and "--samples 0" in r.output and "1 to 64" in r.output
    r = invoke(app, "optimize", "--op", "rms_norm", "--baselines", "eager,tensorrt", "-c", home)
    assert r.exit_code == 2 and "'eager,tensorrt'" in r.output and "liger" in r.output and "none" in r.output


def test_baselines_none_is_recorded_in_the_run_plan(tmp_path, cands):
    from agent.audit import Audit
    from agent.records import RunStart
    home = tmp_path / "home"
    c = ["-c", f"home={home}", "-c", "knowledge.enabled=false", "-c", "sandbox.trials=1", "-c", "sandbox.holdout=false"]
    r = invoke(make_app(), "optimize", "--op", "rms_norm", "--shapes", str(tiny_shapes(tmp_path)), "--proposer",
               "scripted", "--script", str(cands["wrong.py"]), "--baselines", "none", *c)
    assert r.exit_code == 0, r.output
    audit = Audit(home / "audit.db")
    (run_id,) = [row[0] for row in sqlite3.connect(home / "audit.db").execute("SELECT run_id FROM runs")]
    assert RunStart.from_json(audit.records(run_id, "run_start")[0].body).baselines == ()


def test_optimize_then_review_and_export(tmp_path, cands):
    app, home = make_app(), tmp_path / "home"
    # No hold-outs: this test is about the CLI and the trail; tests/sandbox checks hold-outs (as test_loop's config).
    c = ["-c", f"home={home}", "-c", "knowledge.enabled=false", "-c", "sandbox.trials=1", "-c", "sandbox.holdout=false"]
    # No timing here: accept-correct lets the run follow a changed correct kernel, so the review has one.
    r = invoke(app, "optimize", "--op", "rms_norm", "--shapes", str(tiny_shapes(tmp_path)), "--proposer",
               "scripted", "--script", str(cands["faster.py"]), "--script", str(cands["wrong.py"]), *c,
               "-c", "acceptance.untimed=accept-correct")
    assert r.exit_code == 0, r.output
    out = r.output
    assert "rms_norm #1" in out and "rms_norm #2" in out                # one plain line per iteration
    assert "rejected at correctness" in out
    assert "tiny-decode" in out and "attain" in out                     # the per-shape summary table
    assert "nothing more to propose" in out

    r = invoke(app, "audit", "list", *c)
    assert r.exit_code == 0 and "rms_norm-" in r.output
    run_id = sqlite3.connect(home / "audit.db").execute("SELECT run_id FROM runs").fetchone()[0]

    r = invoke(app, "audit", "show", run_id, *c)
    assert r.exit_code == 0 and "faster.py" in r.output and "rejected" in r.output

    r = invoke(app, "audit", "diff", run_id, *c)                         # seed vs final
    assert r.exit_code == 0
    assert '-        256: {"ROWS": 8' in r.output and '+        256: {"ROWS": 16' in r.output
    r = invoke(app, "audit", "diff", run_id, "2", *c)                    # wrong.py vs the incumbent it faced
    assert r.exit_code == 0 and re.search(r"^\+\s+y = x \* rstd\[:, None\]$", r.output, re.MULTILINE)
    assert "incumbent (iteration 1)" in r.output

    r = invoke(app, "audit", "verify", *c)
    assert r.exit_code == 0 and r.output.startswith("ok:")

    bundle = tmp_path / "bundle"
    r = invoke(app, "audit", "export", "last", "--to", str(bundle), *c)
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in bundle.iterdir())
    assert names == ["PERFORMANCE.md", "README.md", "configs.json", "reference_rms_norm.py", "rms_norm.py",
                     "test_rms_norm.py"]
    assert (bundle / "rms_norm.py").read_text() == cands["faster.py"].read_text()
    configs = json.loads((bundle / "configs.json").read_text())
    (gpu, by_triton), = configs.items()
    (triton_version, entry), = by_triton.items()
    assert entry["CONFIGS"]["by_block_h"]["256"]["ROWS"] == 16
    perf = (bundle / "PERFORMANCE.md").read_text()
    assert "| tiny-decode |" in perf and "Interpreter run" in perf

    # The exported test is self-contained: it passes with every aka package made unimportable ...
    assert_standalone_test(bundle, passes=True)
    # ... and it can fail: the same bundle with a wrong kernel does.
    (bundle / "rms_norm.py").write_text(cands["wrong.py"].read_text())
    assert_standalone_test(bundle, passes=False)


BLOCKER = """
import sys
class _NoAka:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('agent', 'benchmarks', 'sandbox', 'knowledge'):
            raise ImportError('the exported bundle imported ' + name)
        return None
sys.meta_path.insert(0, _NoAka())
for m in [m for m in sys.modules if m.split('.')[0] in ('agent', 'benchmarks', 'sandbox', 'knowledge')]:
    del sys.modules[m]
import pytest
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-x', sys.argv[1]]))
"""


def assert_standalone_test(bundle: Path, passes: bool):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRITON_INTERPRET"] = "1"
    p = subprocess.run([sys.executable, "-c", BLOCKER, str(bundle / "test_rms_norm.py")], cwd=bundle, env=env,
                       capture_output=True, text=True, timeout=600)
    text = p.stdout + p.stderr
    assert "the exported bundle imported" not in text, text[-3000:]
    if passes:
        assert p.returncode == 0, text[-3000:]
        assert " passed" in text
    else:
        assert p.returncode == 1 and "failed" in text, text[-3000:]


def test_verify_exits_1_and_names_the_record(tmp_path):
    from agent.audit import Audit
    app, home = make_app(), tmp_path / "home"
    a = Audit(home / "audit.db")
    for i in range(4):
        a.append("r", "note", {"i": i})
    a.close()
    db = sqlite3.connect(home / "audit.db", isolation_level=None)
    db.execute("DROP TRIGGER records_no_update")
    db.execute("""UPDATE records SET body = '{"i":9}' WHERE seq = 3""")
    db.close()
    r = invoke(app, "audit", "verify", "-c", f"home={home}")
    assert r.exit_code == 1 and "record #3" in r.output
