"""`aka report`: a real run (the loop, the real sandbox under the interpreter, a timing model on top so the
charts have numbers), rendered to HTML, then opened in headless Chromium: the DOM must hold the charts and
tables, and the screenshot must show them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.audit import Audit

sys.path.insert(0, str(Path(__file__).parent))
pytestmark = pytest.mark.interpreter


class TimedSandbox:
    """The real sandbox for every verdict; then, as a GPU would, a time per shape: T_ref / attainment from
    test_loop's timing model (rows per program / 16), S_i, and a counter the report must show."""

    def __init__(self):
        from test_loop import ScoredSandbox
        self.scored = ScoredSandbox()

    def __call__(self, req):
        from benchmarks.scoring import operator_score, score_shape
        result = self.scored(req)
        result.interpreter = False          # what the report shows is what a GPU run records
        if not result.accepted:
            return result
        scores = []
        for row in result.visible_shapes():
            t_ref = max(row.t_roof_us, 1.3)
            row.t_floor_us, row.t_us = 1.3, t_ref / row.attainment
            scores.append(score_shape(row.id, row.weight, row.t_us * 1e-6, row.t_roof_us * 1e-6, 1.3e-6))
        result.s_i = operator_score(scores)
        result.counters = {"dram_throughput_pct": 61.5, "diagnoses": ["memory-bound: DRAM at 62% of peak"]}
        return result


def make_trail(tmp_path):
    from test_loop import RecordingProposer, config, make_candidates, make_loop
    c = make_candidates(tmp_path / "cands")
    proposer = RecordingProposer([str(c["faster.py"]), str(c["wrong.py"])])
    cfg = config(tmp_path, "dropout.patience=1", "dropout.p=0.5")
    # no baselines: torch.compile of the reference on the CPU costs a minute and its times are not shown here
    loop, audit = make_loop(tmp_path, proposer, cfg=cfg, evaluate=TimedSandbox(), run_id="rms_norm-20261201-0001",
                            baselines=())
    loop.run()
    audit.close()
    return cfg.audit_db, c


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    db, cands = make_trail(tmp)
    from agent.cli import app
    r = CliRunner().invoke(app, ["report", "last", "--out", str(tmp / "out"), "--db", str(db)])
    assert r.exit_code == 0, r.output
    return tmp / "out", db, cands


def test_pages_hold_charts_tables_diff_and_evidence(report_dir):
    out, db, cands = report_dir
    index, page = (out / "index.html").read_text(), (out / "rms_norm.html").read_text()
    assert "rms_norm.html#rms_norm-20261201-0001" in index and 'id="audit-status" class="ok"' in index
    assert page.count("<svg") == 3                                  # roofline, before/after, history
    for needle in ("shapes against the roofline", "before vs after", "score over iterations", "memory-bound",
                   "dropout", "class=\"ab\"", "dram_throughput_pct", "rule <b>", "Hold-out shapes"):
        assert needle in page, needle
    # the diff is the faster kernel against the seed: its changed ROWS lines, marked added and removed
    assert '<span class="add">+' in page and '<span class="del">-' in page and "ROWS" in page


def test_tampered_trail_is_reported_and_exits_1(report_dir, tmp_path):
    out, db, _ = report_dir
    copy = tmp_path / "audit.db"
    shutil.copy(db, copy)
    shutil.copy(str(db) + ".head", str(copy) + ".head")
    import sqlite3
    con = sqlite3.connect(copy)
    con.execute("DROP TRIGGER records_no_update")
    con.execute("UPDATE records SET body = replace(body, 'faster', 'fastest') WHERE kind = 'iteration'")
    con.commit()
    con.close()
    from agent.cli import app
    r = CliRunner().invoke(app, ["report", "--out", str(tmp_path / "o"), "--db", str(copy)])
    assert r.exit_code == 1 and "TAMPERED" in r.output
    assert 'class="bad">audit trail: TAMPERED' in (tmp_path / "o" / "index.html").read_text()


def test_usage_errors(tmp_path, report_dir):
    from agent.cli import app
    _, db, _ = report_dir
    runner = CliRunner()
    r = runner.invoke(app, ["report", "nope", "--out", str(tmp_path), "--db", str(db)])
    assert r.exit_code == 2 and "no run 'nope'" in r.output
    r = runner.invoke(app, ["report", "--since", "yesterday", "--out", str(tmp_path), "--db", str(db)])
    assert r.exit_code == 2 and "not a date" in r.output
    r = runner.invoke(app, ["report", "--since", "2999-01-01", "--out", str(tmp_path), "--db", str(db)])
    assert r.exit_code == 2 and "no runs selected" in r.output
    r = runner.invoke(app, ["report", "--out", str(tmp_path), "--db", str(tmp_path / "none.db")])
    assert r.exit_code == 2 and "no audit database" in r.output


def test_weights_file_reweighs_the_shapes_and_the_scores(report_dir, tmp_path):
    """All weight on one shape: every iteration's score becomes that shape's recorded attainment."""
    from weights_files import entry, write_weights
    from agent.cli import app
    from agent.report_html.data import run_report
    from benchmarks.weights_file import load_weights_file
    from test_loop import SHAPES
    _, db, _ = report_dir
    w = write_weights(tmp_path / "w.json", [entry("rms_norm", SHAPES[1], 0.25)])
    with Audit(db) as audit:
        plain = run_report(audit, "rms_norm-20261201-0001")
        traced = run_report(audit, "rms_norm-20261201-0001", load_weights_file(w))
        per_shape = [r.body["record"]["per_shape"] for r in audit.records("rms_norm-20261201-0001", "iteration")]
    assert [s.weight for s in traced.shapes] == [0.0, 0.25]
    scored = [(p, t, ps) for p, t, ps in zip(plain.iterations, traced.iterations, per_shape) if p.score is not None]
    assert scored and all(t.score == pytest.approx(ps.get(SHAPES[1].id, 0.0)) for _, t, ps in scored)
    assert any(p.score != pytest.approx(t.score) for p, t, _ in scored)
    r = CliRunner().invoke(app, ["report", "last", "--out", str(tmp_path / "o"), "--db", str(db), "--weights", str(w)])
    assert r.exit_code == 0, r.output
    assert f"re-weighed with the weights file {w}" in (tmp_path / "o" / "index.html").read_text()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def headless(browser: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(tmp))           # its profile and crash dumps stay in the test's folder
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_rendered_in_headless_chromium(report_dir, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium); "
                    "the HTML was checked as text above")
    out, _, _ = report_dir
    url = (out / "rms_norm.html").as_uri()
    dom = headless(browser, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    for cls in ("roofline", "attainment", "history"):
        assert f'class="chart {cls}"' in html
    assert html.count("<svg") == 3 and html.count("<table") >= 3
    shot = tmp_path / "page.png"
    res = headless(browser, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", "--hide-scrollbars", url)
    assert shot.is_file(), res.stderr[-2000:]
    import matplotlib.image
    import numpy as np
    img = matplotlib.image.imread(str(shot))[..., :3]
    assert img.shape[0] >= 2000 and img.shape[1] >= 1200
    # the charts' blue (final kernel, #1f77b4) and red (rejected, #d62728) must be painted, not just text
    blue = np.all(np.abs(img - np.array([0x1f, 0x77, 0xb4]) / 255) < 0.06, axis=-1).sum()
    red = np.all(np.abs(img - np.array([0xd6, 0x27, 0x28]) / 255) < 0.06, axis=-1).sum()
    assert blue > 500 and red > 20, (blue, red)
    non_white = (img.min(axis=-1) < 0.9).mean()
    assert 0.02 < non_white < 0.6, non_white
