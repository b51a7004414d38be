"""The audit trail: append-only, hash-chained, content-addressed; verify names the first bad record."""
import json
import sqlite3

import pytest

from agent.audit import Audit, canonical_json, sha256_text


def filled(tmp_path, n=6):
    a = Audit(tmp_path / "audit.db")
    sha = a.put_source("def k():\n    pass\n")
    a.append("run-1", "run_start", {"op": "rms_norm", "seed_source_sha256": sha})
    for i in range(n - 1):   # iterations 0, 1, ...: verify checks the numbering
        a.append("run-1", "iteration", {"record": {"iteration": i, "lesson": f"l{i}"}, "score": 0.1 * i})
    return a


def raw(path):
    db = sqlite3.connect(str(path), isolation_level=None)
    for t in ("records_no_update", "records_no_delete", "blobs_no_update", "blobs_no_delete"):
        db.execute(f"DROP TRIGGER IF EXISTS {t}")
    return db


def tampered(tmp_path, edit):
    """Fill a trail, close it, let edit(db) change the file behind the triggers' back, then verify it afresh."""
    filled(tmp_path).close()
    db = raw(tmp_path / "audit.db")
    edit(db)
    db.close()
    return Audit(tmp_path / "audit.db").verify()


def test_fresh_trail_verifies_and_uses_wal(tmp_path):
    a = filled(tmp_path)
    rep = a.verify()
    assert rep.ok and rep.records == 6 and rep.blobs == 1, rep
    assert a.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_records_link_to_their_predecessor(tmp_path):
    a = filled(tmp_path)
    recs = a.records()
    assert [r.seq for r in recs] == list(range(1, 7))
    rows = a.db.execute("SELECT prev_hash, hash FROM records ORDER BY seq").fetchall()
    assert rows[0][0] == "0" * 64
    for (_, prev_h), (link, _) in zip(rows, rows[1:]):
        assert link == prev_h


def test_triggers_refuse_update_and_delete(tmp_path):
    a = filled(tmp_path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        a.db.execute("UPDATE records SET body = '{}' WHERE seq = 2")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        a.db.execute("DELETE FROM records WHERE seq = 2")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        a.db.execute("DELETE FROM blobs")
    assert a.verify().ok


def test_edited_record_is_named(tmp_path):
    def edit(db):
        body = json.loads(db.execute("SELECT body FROM records WHERE seq = 4").fetchone()[0])
        body["score"] = 0.99                         # a better-looking score, written canonically
        db.execute("UPDATE records SET body = ? WHERE seq = 4", (canonical_json(body),))

    rep = tampered(tmp_path, edit)
    assert not rep.ok and rep.first_bad_seq == 4
    assert "record #4" in rep.problem and "edited" in rep.problem


def test_non_canonical_edit_is_named(tmp_path):
    def edit(db):
        body = db.execute("SELECT body FROM records WHERE seq = 3").fetchone()[0]
        db.execute("UPDATE records SET body = ? WHERE seq = 3", (json.dumps(json.loads(body), indent=1),))

    rep = tampered(tmp_path, edit)
    assert rep.first_bad_seq == 3 and "canonical" in rep.problem


def test_deleted_record_is_named(tmp_path):
    def edit(db):
        db.execute("DELETE FROM records WHERE seq = 3")

    rep = tampered(tmp_path, edit)
    assert not rep.ok and rep.first_bad_seq == 3 and "missing" in rep.problem


def test_deleted_and_renumbered_record_is_named(tmp_path):
    """Deleting #3 and shifting the later rows down to close the gap still breaks the link at #3."""
    def edit(db):
        db.execute("DELETE FROM records WHERE seq = 3")
        for s in (4, 5, 6):
            db.execute("UPDATE records SET seq = ? WHERE seq = ?", (s - 1, s))

    rep = tampered(tmp_path, edit)
    assert not rep.ok and rep.first_bad_seq == 3


def test_swapped_records_are_named(tmp_path):
    def edit(db):
        cols = "run_id, kind, ts, body, prev_hash, hash"
        r4 = db.execute(f"SELECT {cols} FROM records WHERE seq = 4").fetchone()
        r5 = db.execute(f"SELECT {cols} FROM records WHERE seq = 5").fetchone()
        db.execute("UPDATE records SET hash = 'tmp' WHERE seq = 4")    # keep the UNIQUE(hash) constraint happy
        for seq, row in ((5, r4), (4, r5)):
            db.execute("UPDATE records SET run_id=?, kind=?, ts=?, body=?, prev_hash=?, hash=? WHERE seq=?",
                       (*row, seq))

    rep = tampered(tmp_path, edit)
    assert not rep.ok and rep.first_bad_seq == 4 and "reordered" in rep.problem


def test_truncated_tail_is_caught_by_the_head_file(tmp_path):
    def edit(db):
        db.execute("DELETE FROM records WHERE seq = 6")

    rep = tampered(tmp_path, edit)
    assert not rep.ok and rep.first_bad_seq == 6 and "deleted from the end" in rep.problem


def test_rewritten_chain_is_caught_by_the_head_file(tmp_path):
    """Someone who edits a record and recomputes every later hash still disagrees with the head file."""
    from agent.audit import record_hash

    def edit(db):
        rows = db.execute("SELECT seq, run_id, kind, ts, body FROM records ORDER BY seq").fetchall()
        prev = "0" * 64
        db.execute("UPDATE records SET hash = 'x' || seq")
        for seq, run_id, kind, ts, body in rows:
            b = json.loads(body)
            if seq == 2:
                b["score"] = 0.99
            h = record_hash(seq, run_id, kind, ts, prev, b)
            db.execute("UPDATE records SET body=?, prev_hash=?, hash=? WHERE seq=?", (canonical_json(b), prev, h, seq))
            prev = h

    rep = tampered(tmp_path, edit)
    assert not rep.ok and rep.first_bad_seq == 6 and "rewritten" in rep.problem


def test_edited_source_is_caught(tmp_path):
    def edit(db):
        db.execute("UPDATE blobs SET content = 'def k():\n    return 1\n'")

    rep = tampered(tmp_path, edit)
    assert not rep.ok and "does not match its sha256" in rep.problem


def test_deleted_source_is_caught(tmp_path):
    def edit(db):
        db.execute("DELETE FROM blobs")

    rep = tampered(tmp_path, edit)
    assert not rep.ok and "missing from blobs" in rep.problem


def test_sources_are_content_addressed_and_stored_once(tmp_path):
    a = Audit(tmp_path / "audit.db")
    s1 = a.put_source("x = 1\n")
    s2 = a.put_source("x = 1\n")
    assert s1 == s2 == sha256_text("x = 1\n")
    assert a.db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1
    assert a.source(s1) == "x = 1\n"


def test_append_many_is_atomic(tmp_path):
    a = filled(tmp_path)
    before = len(a.records())
    with pytest.raises(Exception):
        a.append_many([("run-1", "iteration", {"ok": 1}), ("run-1", "iteration", {"bad": object()}),
                       ("run-1", "no-such-kind", {})])
    assert len(a.records()) == before
    assert a.verify().ok


def test_the_code_never_updates_or_deletes():
    """Append-only by construction: no module that writes the trail holds an UPDATE or DELETE statement."""
    import re
    from pathlib import Path
    import agent
    folder = Path(agent.__file__).parent
    hits = []
    for name in ("audit.py", "audit_export.py", "loop.py", "memory.py", "cli_audit.py", "cli_optimize.py"):
        src = (folder / name).read_text()
        hits += [(name, m) for m in re.findall(r"(?i)\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|\bREPLACE\s+INTO\b", src)]
    assert hits == []


def test_resolve_run_by_prefix_and_last(tmp_path):
    a = Audit(tmp_path / "audit.db")
    a.append("rms_norm-1-aa", "run_start", {"op": "rms_norm"})
    a.append("rms_norm-2-bb", "run_start", {"op": "rms_norm"})
    assert a.resolve_run("last") == "rms_norm-2-bb"
    assert a.resolve_run("rms_norm-1") == "rms_norm-1-aa"
    with pytest.raises(Exception, match="ambiguous"):
        a.resolve_run("rms_norm")


def test_standalone_reference_inlines_tolerance_and_refuses_other_aka_imports():
    from agent.audit_export import ExportError, standalone_reference
    src = "from __future__ import annotations\nimport torch\nfrom benchmarks.spec import Tolerance\nT = Tolerance(1, 2, 3)\n"
    out = standalone_reference(src)
    assert "benchmarks" not in out.replace("(inlined from aka", "")
    import sys
    import types
    mod = types.ModuleType("standalone_probe")
    sys.modules["standalone_probe"] = mod
    try:
        exec(compile(out, "standalone_probe.py", "exec"), mod.__dict__)
    finally:
        del sys.modules["standalone_probe"]
    assert (mod.T.atol, mod.T.rtol, mod.T.rel_l2) == (1, 2, 3)
    with pytest.raises(ExportError, match="line 2"):
        standalone_reference("import torch\nfrom benchmarks.registry import load_operator\n")
    with pytest.raises(ExportError, match="line 1"):
        standalone_reference("import sandbox.lint\n")


def test_tuned_configs_are_read_without_running_the_file():
    from agent.audit_export import tuned_configs
    assert tuned_configs("import os\nCONFIGS = {'BLOCK': 128, 'by': {64: [1, 2]}}\nos.system('x')\n") == \
        {"BLOCK": 128, "by": {64: [1, 2]}}
    assert tuned_configs("CONFIGS = make()\n") == {"unparsed": "make()"}
    assert tuned_configs("X = 1\n") is None
