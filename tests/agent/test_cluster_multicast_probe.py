"""The cluster probe counts multicast TMA loads, not mentions of the word, and reports each compile as a row."""
import json
import os
import subprocess
import sys
from pathlib import Path

from agent.studies.cluster_multicast_probe import multicast_loads

ROOT = Path(__file__).resolve().parents[2]


def test_multicast_loads_counts_the_qualifier_not_comments():
    ptx = "\n".join([
        "\t.loc\t1 39 23    // cluster_multicast_probe.py:39:23",
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%r9], [%rd1, {%r1, %r2}], [%r5];",
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%r9], [%rd1, {%r1, %r2}], [%r5], %rs1;",
    ])
    assert multicast_loads(ptx) == 1


def test_the_probe_compiles_a_one_cta_tile_for_hopper_and_writes_its_rows(tmp_path):
    """A child process: triton.compile cannot run under the interpreter this test process imported."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "probe.json"
    done = subprocess.run([sys.executable, str(ROOT / "agent/studies/cluster_multicast_probe.py"),
                           "--configs", "64x64x1", "--json", str(out)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    outcomes = [(r["epilogue"], r["compiled"], r["multicast_lines"]) for r in rows]
    assert outcomes == [("pointer", True, 0), ("tma", True, 0)]
    assert all(r["shared"] > 0 for r in rows)
    assert "| 64 x 64 | 1 | tma | yes |" in done.stdout


def test_a_malformed_config_list_is_refused_with_the_value():
    probe = str(ROOT / "agent/studies/cluster_multicast_probe.py")
    done = subprocess.run([sys.executable, probe, "--configs", "128x128"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "'128x128'" in done.stderr
