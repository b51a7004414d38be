"""agent/studies/corpus_draws.py: the corpus test's rule per draw, the summary of files not as expected, and a real
run of one red-team file through the sandbox on two fixed seeds, resumed without running them again."""
import json

import pytest

from agent.studies import corpus_draws as cd


def test_the_rule_is_the_corpus_tests():
    cheat = {"expect": "reject", "stage": "correctness|lint"}
    assert cd.as_expected(cheat, "rejected", "lint") and cd.as_expected(cheat, "rejected", "correctness")
    assert not cd.as_expected(cheat, "rejected", "compile")      # caught, but by a gate the header does not name
    assert not cd.as_expected(cheat, "accepted", None)
    honest = {"expect": "accept"}
    assert cd.as_expected(honest, "accepted", None) and not cd.as_expected(honest, "rejected", "correctness")


def test_the_summary_names_a_file_that_slipped_through_on_one_draw():
    rows = [{"file": "redteam/rt_a", "seed": s, "expect": "reject", "verdict": v, "stage": st, "ok": ok,
             "reason": r} for s, v, st, ok, r in [(0, "rejected", "correctness", True, "off by 1"),
                                                    (1, "accepted", None, False, ""),
                                                    (2, "rejected", "correctness", True, "off by 2")]]
    rows += [{"file": "redteam/rt_b", "seed": s, "expect": "reject", "verdict": "rejected", "stage": st, "ok": True,
              "reason": "x"} for s, st in [(0, "lint"), (1, "correctness")]]
    text, n_bad = cd.summary(rows)
    assert n_bad == 1
    assert "| redteam/rt_a | reject | 1 of 3 (1: accepted at None) |" in text
    assert "rt_b (correctness, lint)" in text            # caught every time, by two different gates


@pytest.mark.interpreter
def test_a_real_run_of_one_file_and_its_resume(tmp_path, capsys):
    out = tmp_path / "d.jsonl"
    args = ["--only", "redteam/rt_causal_conv1d_centered", "--draws", "2", "--first-seed", "7", "--out", str(out)]
    assert cd.main(args) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["seed"], r["verdict"], r["stage"], r["ok"]) for r in rows] == [
        (7, "rejected", "correctness", True), (8, "rejected", "correctness", True)]
    assert cd.main(args + ["--resume"]) == 0
    assert len(out.read_text().splitlines()) == 2         # nothing ran again
    assert "0 evaluations to run (2 already in" in capsys.readouterr().out


def test_bad_arguments_say_what_is_wrong(capsys):
    for args, words in [(["--shard", "2/2"], "0 <= i < n"), (["--draws", "0"], "at least 1"),
                        (["--resume"], "--resume needs --out"), (["--only", "no_such_file_anywhere"], "no CPU corpus")]:
        with pytest.raises(SystemExit):
            cd.main(args)
        assert words in capsys.readouterr().err, args
