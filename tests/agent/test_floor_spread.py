"""agent/studies/floor_spread.py: the driver's collection and summary, with real child processes standing in for
the GPU's (a child that prints the floor parts it was given, and one that fails)."""
from __future__ import annotations

import sys

import pytest

from agent.studies import floor_spread


def test_summary_separates_the_spread_between_processes_from_the_spread_within_one():
    rows = [{"process": 0, "plain": [1.50, 1.52, 1.49], "pdl": [1.66, 1.70, 1.64]},
            {"process": 1, "plain": [1.45, 1.46, 1.47], "pdl": [1.01, 0.99, 1.02]},
            {"process": 2, "error": "no answer in 120 s"}]
    s = floor_spread.summary(rows)
    assert s["pdl"]["process_medians_min"] == pytest.approx(1.01)
    assert s["pdl"]["process_medians_max"] == pytest.approx(1.66)
    assert s["pdl"]["widest_within_one_process"] == pytest.approx(0.06)
    assert s["plain"]["min"] == pytest.approx(1.45) and s["plain"]["max"] == pytest.approx(1.52)


def test_measure_collects_each_child_processes_line_and_its_failure(tmp_path, monkeypatch):
    child = tmp_path / "child.py"
    child.write_text("import json, sys\n"
                     "if sys.argv[1] == '2':\n"
                     "    print(json.dumps({'parts': [{'plain': 1.5, 'pdl': None}, {'plain': 1.4, 'pdl': None}],\n"
                     "                      'hold': {'batches': 4, 'unheld': int(sys.argv[2] == '0') * 4}}))\n"
                     "else:\n"
                     "    sys.exit('no GPU here')\n")
    monkeypatch.setattr(floor_spread, "CHILD", f"exec(open({str(child)!r}).read())")
    rows = floor_spread.measure(2, 2, python=sys.executable)
    assert rows == [{"process": k, "plain": [1.5, 1.4], "pdl": [None, None], "sm_mhz": [None, None],
                     "hold": {"batches": 4, "unheld": 0}} for k in (0, 1)]
    rows = floor_spread.measure(1, 2, python=sys.executable, hold=False)
    assert rows[0]["hold"] == {"batches": 4, "unheld": 4}
    rows = floor_spread.measure(1, 3, python=sys.executable)
    assert rows == [{"process": 0, "error": "no GPU here"}]
    assert "pdl" not in floor_spread.summary([{"process": 0, "plain": [1.5], "pdl": [None]}])


def test_load_runs_busy_processes_beside_each_child_and_stops_them(tmp_path, monkeypatch):
    """The child counts the processes running floor_spread.BUSY (from /proc) while it measures."""
    child = tmp_path / "child.py"
    child.write_text("import json, os\n"
                     "busy = 0\n"
                     "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
                     "    try:\n"
                     "        busy += open(f'/proc/{pid}/cmdline', 'rb').read().endswith(b'while True: pass\\0')\n"
                     "    except OSError:\n"
                     "        pass\n"
                     "print(json.dumps({'parts': [{'plain': float(busy), 'pdl': None}], 'hold': {}}))\n")
    monkeypatch.setattr(floor_spread, "CHILD", f"exec(open({str(child)!r}).read())")
    assert floor_spread.measure(1, 1, python=sys.executable, load=3)[0]["plain"] == [3.0]
    assert floor_spread.measure(1, 1, python=sys.executable)[0]["plain"] == [0.0]     # the three were stopped


def test_spares_loop_worker_start_ups_beside_each_child_and_stop_with_it(tmp_path, monkeypatch):
    """Each spare loop starts SPARE again and again while the child measures; the loops and their current
    start-up are gone when measure returns; every child gets AKA_GPU_LOCK=off, or on with lock=True."""
    starts = tmp_path / "starts"
    monkeypatch.setattr(floor_spread, "SPARE", f"open({str(starts)!r}, 'a').write('x'); import time; time.sleep(0.05)")
    child = tmp_path / "child.py"
    child.write_text("import json, os, time\n"
                     "time.sleep(1.0)\n"
                     "lock = os.environ.get('AKA_GPU_LOCK', '')\n"
                     "print(json.dumps({'parts': [{'plain': float(lock == 'on'), 'pdl': None}], 'hold': {}}))\n")
    monkeypatch.setattr(floor_spread, "CHILD", f"exec(open({str(child)!r}).read())")
    assert floor_spread.measure(1, 1, python=sys.executable, spares=2)[0]["plain"] == [0.0]
    n = len(starts.read_text())
    assert n >= 2                                        # both loops started at least one
    import time
    time.sleep(0.5)
    assert len(starts.read_text()) == n                  # and none runs after measure returned
    assert floor_spread.measure(1, 1, python=sys.executable, lock=True)[0]["plain"] == [1.0]


def test_spare_passes_its_stages_and_linger_to_the_start_up(tmp_path, monkeypatch):
    """SPARE gets the stages and the linger as its arguments (the real SPARE hands them to warm_gpu)."""
    seen = tmp_path / "seen"
    monkeypatch.setattr(floor_spread, "SPARE", f"import sys; open({str(seen)!r}, 'a').write(repr(sys.argv[1:]))")
    child = tmp_path / "child.py"
    child.write_text("import json, time\ntime.sleep(0.5)\n"
                     "print(json.dumps({'parts': [{'plain': 1.0, 'pdl': None}], 'hold': {}}))\n")
    monkeypatch.setattr(floor_spread, "CHILD", f"exec(open({str(child)!r}).read())")
    floor_spread.measure(1, 1, python=sys.executable, spares=1, spare_stages="profiler_init", spare_linger_s=0.25)
    assert "['profiler_init', '0.25']" in seen.read_text()
    with pytest.raises(SystemExit):
        floor_spread.main(["--out", str(tmp_path / "o.json"), "--spare-stages", "cuda_init,bogus"])


def test_gpu_ticks_run_beside_the_child_and_stop_with_it(tmp_path, monkeypatch):
    """--gpu-tick's processes run while the child measures and are gone after; a row keeps each floor's SM clock
    (None where the child had no NVML reading)."""
    ticks = tmp_path / "ticks"
    monkeypatch.setattr(floor_spread, "GPU_TICK", f"import time\nwhile True:\n    open({str(ticks)!r}, 'a').write('x'); "
                                                  f"time.sleep(0.01)")
    child = tmp_path / "child.py"
    child.write_text("import json, time\ntime.sleep(1.0)\n"
                     "print(json.dumps({'parts': [{'plain': 1.0, 'pdl': None, 'sm_mhz': 1980}, "
                     "{'plain': 1.1, 'pdl': None}], 'hold': {}}))\n")
    monkeypatch.setattr(floor_spread, "CHILD", f"exec(open({str(child)!r}).read())")
    row = floor_spread.measure(1, 2, python=sys.executable, gpu_tick=2)[0]
    assert row["sm_mhz"] == [1980, None]
    n = len(ticks.read_text())
    assert n >= 2
    import time
    time.sleep(0.3)
    assert len(ticks.read_text()) == n
    compile(floor_spread.CHILD, "child", "exec")          # the real child and tick loop are valid Python
    compile(floor_spread.GPU_TICK, "tick", "exec")


def test_floors_are_grouped_by_the_sm_clock_read_after_each(tmp_path, monkeypatch, capsys):
    rows = [{"process": 0, "plain": [1.0, 1.5, 1.4], "pdl": [None] * 3, "sm_mhz": [1980, 1755, 1755]},
            {"process": 1, "plain": [1.1, 1.6], "pdl": [None] * 2, "sm_mhz": [1980, None]},
            {"process": 2, "error": "no answer in 120 s"}]
    assert floor_spread.by_sm_clock(rows) == {1755: {"n": 2, "median": pytest.approx(1.45), "min": 1.4, "max": 1.5},
                                              1980: {"n": 2, "median": pytest.approx(1.05), "min": 1.0, "max": 1.1}}
    assert floor_spread.by_sm_clock([{"process": 0, "plain": [1.5], "pdl": [None]}]) == {}
    # main keeps the grouping beside the summary and prints it (a child standing in for the GPU's)
    child = tmp_path / "child.py"
    child.write_text("import json\nprint(json.dumps({'parts': [{'plain': 1.0, 'pdl': None, 'sm_mhz': 1980}, "
                     "{'plain': 1.5, 'pdl': None, 'sm_mhz': 1755}], 'hold': {}}))\n")
    monkeypatch.setattr(floor_spread, "CHILD", f"exec(open({str(child)!r}).read())")
    out = tmp_path / "floors.json"
    assert floor_spread.main(["--out", str(out), "--processes", "1", "--repeats", "2"]) == 0
    import json
    result = json.loads(out.read_text())
    assert list(result["plain_by_sm_mhz"]) == ["1755", "1980"] and set(result["summary"]) == {"plain"}
    assert "plain at 1755 MHz: 1 floors, 1.50 / 1.50 / 1.50 us" in capsys.readouterr().out
