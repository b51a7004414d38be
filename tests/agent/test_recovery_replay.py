"""The recovery replay (agent/studies/recovery_replay.py): bucketed fused_moe configs scored from the H200's
flat-config table, and the search replayed on it."""
import json

from agent.proposers.search_space import read_configs
from agent.studies.recovery import start_source, worst_valid_config
from agent.studies.recovery_replay import TABLE, TableScorer, replay
from benchmarks.registry import load_operator


def _scorer():
    spec = load_operator("fused_moe")
    return spec, TableScorer(json.loads(TABLE.read_text()), spec.select("hot"))


def test_a_flat_config_scores_as_the_table_measured_it():
    spec, scorer = _scorer()
    table = json.loads(TABLE.read_text())
    config, score = worst_valid_config(table)
    start, _ = start_source("fused_moe", open(spec.seed_path).read(), None)
    # the worst flat config in every bucket and both GEMMs: each shape reads exactly that table row
    assert abs(scorer.score(read_configs(start).value) - score) < 1e-6 * score


def test_the_tuned_seed_scores_well_above_the_worst_start_and_a_tma_bucket_has_no_measurement():
    spec, scorer = _scorer()
    seed = read_configs(open(spec.seed_path).read()).value
    tuned = scorer.score(seed)
    assert tuned is not None and tuned > 0.5
    seed["buckets"][0][1]["W_TMA"] = 1
    assert scorer.score(seed) is None


def test_a_short_replay_climbs_from_the_worst_start():
    spec, scorer = _scorer()
    start, _ = start_source("fused_moe", open(spec.seed_path).read(), None)
    before = scorer.score(read_configs(start).value)
    out = replay(start, scorer, target=0.99, budget=8, samples=2, seed=0, margin=0.01)
    assert out["acceptances"] >= 1 and out["final"] > before * 1.5, out
    assert "tied in" in out["accepted"][0]          # a flat bad config is fixed everywhere at once
