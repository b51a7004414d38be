"""The device batches (agent/studies/batch/*.sh) name studies, scripts and test files that exist: a batch is run
on a fresh machine in a call of its own, where a renamed study costs the whole call."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BATCHES = sorted((ROOT / "agent" / "studies" / "batch").glob("*.sh"))


def _joined(path: Path) -> str:
    return path.read_text().replace("\\\n", " ")


def _modules(text: str) -> list[str]:
    return re.findall(r"python3? -m ((?:agent|benchmarks|sandbox)\.[\w.]+)", text)


def _paths(text: str) -> list[str]:
    return re.findall(r"(?<![\w/.])((?:agent|benchmarks|tests|sandbox)/[\w/.-]+\.(?:py|sh))", text)


@pytest.mark.parametrize("batch", BATCHES, ids=lambda p: p.name)
def test_every_module_script_and_test_file_a_batch_names_exists(batch):
    text = _joined(batch)
    missing = [m for m in _modules(text) if not (ROOT / (m.replace(".", "/") + ".py")).exists()
               and not (ROOT / m.replace(".", "/") / "__init__.py").exists()]
    missing += [p for p in _paths(text) if not (ROOT / p).exists()]
    assert missing == [], f"{batch.name} names what the repository does not have: {missing}"


def test_the_check_finds_modules_and_paths_in_continued_lines(tmp_path):
    fake = tmp_path / "b.sh"
    fake.write_text("step x 10 python3 -m agent.studies.no_such_study \\\n  tests/agent/no_such_test.py\n")
    text = _joined(fake)
    assert _modules(text) == ["agent.studies.no_such_study"]
    assert _paths(text) == ["tests/agent/no_such_test.py"]


def _dangling(text: str) -> list[int]:
    """Lines (1-based) that continue a command, an indented option or path, after a line without the backslash
    that would continue it (bash then runs them as a command of their own)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines[1:], start=1):
        first = line.split()[0] if line.strip() else ""
        continued = lines[i - 1].rstrip().endswith("\\")
        assignment = re.match(r"[A-Za-z_][A-Za-z0-9_]*=", first)     # VAR=value command: a command of its own
        if line.startswith(" ") and (first.startswith("-") or "/" in first) and not assignment and not continued:
            out.append(i + 1)
    return out


@pytest.mark.parametrize("batch", BATCHES, ids=lambda p: p.name)
def test_every_continued_line_follows_a_backslash(batch):
    assert _dangling(batch.read_text()) == [], batch.name


def test_a_continuation_without_its_backslash_is_found():
    assert _dangling("step a 1 python3 -m x \\\n  --ok\nstep b 1 python3 -m y\n  tests/z.py\n  -k q\n") == [4, 5]
    # an indented command that starts with an environment assignment (a function's body) is not a continuation
    assert _dangling("f() {\n  PYTHONPATH=/tmp/site:$PWD step a 1 python3 -m x\n}\n") == []


def test_batch_skip_leaves_the_named_steps_out_and_runs_the_rest(tmp_path):
    """BATCH_SKIP (a batch rerun on another card) skips exactly the steps it names, by whole name."""
    import subprocess
    steps = ROOT / "agent" / "studies" / "batch" / "steps.sh"
    script = f"source {steps}\nstep copies 10 echo ran\nstep conv 10 echo ran\nstep conv_more 10 echo ran\n"
    subprocess.run(["bash", "-c", script], check=True, cwd=tmp_path,
                   env={"PATH": "/usr/bin:/bin", "BATCH_RES": str(tmp_path / "res"), "BATCH_SKIP": "copies conv"})
    res = tmp_path / "res"
    assert sorted(p.name for p in res.glob("*.done")) == ["conv_more.done"]
    assert (res / "conv_more" / "log").read_text() == "ran\n"
    lines = (res / "steps.txt").read_text().splitlines()
    assert lines[:2] == ["copies skipped", "conv skipped"] and lines[2].startswith("conv_more rc=0 ")


def _latest_batch(batches=BATCHES) -> Path:
    """The batch the next device call runs: the highest session number (session33b.sh after session33.sh)."""
    numbered = [p for p in batches if re.fullmatch(r"session\d+[a-z]?\.sh", p.name)]
    return max(numbered, key=lambda p: (int(re.search(r"\d+", p.name).group()), p.name))


def _variants_named(text: str) -> list[tuple[str, str]]:
    """(ops, variant) of every `seed:NAME` in an --only list, with the --ops of its command."""
    found = []
    for command in text.splitlines():
        ops = re.search(r"--ops (\S+)", command)
        for only in re.findall(r"--only (\S+)", command):
            found += [(ops.group(1) if ops else "", v.split(":", 1)[1]) for v in only.split(",") if v.startswith("seed:")]
    return found


def test_the_latest_batch_names_seed_variants_its_operators_have():
    """A variant renamed or retired after a batch was written would fail that step on the GPU (older batches are
    records of what ran and may name retired variants)."""
    from agent.studies.seed_variants import VARIANTS
    batch = _latest_batch()
    named = _variants_named(_joined(batch))
    missing = [(ops, v) for ops, v in named
               if not any(v in dict(VARIANTS.get(op, [])) for op in ops.split(","))]
    assert missing == [], f"{batch.name} names seed variants its --ops do not have: {missing}"


def test_the_variant_check_reads_ops_and_only_lists():
    text = "step a 1 python3 x.py --ops softmax,gemm --only compile,seed:one,seed:two --rounds 5\nstep b 1 y --only seed:z"
    assert _variants_named(text) == [("softmax,gemm", "one"), ("softmax,gemm", "two"), ("", "z")]
    names = ["session9.sh", "session33.sh", "session33b.sh", "session100.sh", "steps.sh"]
    assert _latest_batch([Path(n) for n in names]).name == "session100.sh"
    assert _latest_batch([Path(n) for n in names[:3]]).name == "session33b.sh"
