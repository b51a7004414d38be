"""The studies score with the ceilings of the GPU they run on (session 22 scored an H100 with the H200's)."""
import re
from pathlib import Path

import pytest
import torch

from benchmarks.hardware import study_hardware

STUDIES = Path(__file__).resolve().parents[2] / "agent" / "studies"


def test_the_gpu_it_runs_on_picks_the_profile():
    hw = study_hardware(gpu_name="NVIDIA H100 80GB HBM3")
    assert hw.name == "h100" and hw.bandwidth_tbs == 3.35
    assert study_hardware("auto", gpu_name="NVIDIA H200").name == "h200"


def test_a_named_profile_wins_over_the_gpu():
    assert study_hardware("h200", gpu_name="NVIDIA H100 80GB HBM3").name == "h200"


def test_a_gpu_without_a_profile_is_an_error_that_names_it_and_the_fix():
    with pytest.raises(KeyError, match=r"Quadro P400.*configs/hardware.*--hardware"):
        study_hardware(gpu_name="Quadro P400")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback: no GPU visible")
def test_no_gpu_falls_back_to_the_reference_card():
    assert study_hardware().name == "h200"


def test_no_study_fixes_a_card_in_its_code():
    fixed = [f"{p.name}:{n}" for p in sorted(STUDIES.glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"load_hardware\(\s*[\"']", line) or re.search(r"--hardware\", default=\"(?!auto)", line)]
    assert not fixed, f"studies that fix a card instead of asking study_hardware: {fixed}"
