"""GPU ceilings: datasheet profiles from configs/hardware/*.yaml and calibrated ones from `aka calibrate`."""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs" / "hardware"


@dataclass(frozen=True)
class Hardware:
    """Ceilings of one GPU. `source` says whether they are datasheet or calibrated numbers."""

    name: str                               # short key, e.g. "h200"
    gpu_name: str                           # as the driver names it, e.g. "NVIDIA H200"
    peaks_tflops: dict[str, float]          # dense peak per dtype, TFLOP/s
    bandwidth_tbs: float                    # HBM bandwidth, TB/s
    sm_count: int
    l2_mb: float
    source: str = "datasheet"               # "datasheet" | "calibrated"
    notes: dict = field(default_factory=dict, compare=False)

    def peak_flops(self, dtype: str) -> float:
        if dtype not in self.peaks_tflops:
            raise KeyError(f"{self.name} ({self.source}) has no {dtype} peak; it lists "
                           f"{sorted(self.peaks_tflops)}. Add it to configs/hardware/{self.name}.yaml.")
        return self.peaks_tflops[dtype] * 1e12

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_tbs * 1e12

    def with_calibration(self, measured: dict) -> "Hardware":
        """Datasheet profile with the measured ceilings replacing the datasheet ones.

        `measured` holds bandwidth_tbs and peaks_tflops for the dtypes that were measured;
        dtypes that were not measured keep their datasheet value, and `notes` says which.
        """
        peaks = dict(self.peaks_tflops)
        peaks.update({k: float(v) for k, v in measured.get("peaks_tflops", {}).items()})
        notes = {"measured": measured, "datasheet_kept": sorted(set(peaks) - set(measured.get("peaks_tflops", {})))}
        return dataclasses.replace(self, peaks_tflops=peaks, source="calibrated",
                                   bandwidth_tbs=float(measured.get("bandwidth_tbs", self.bandwidth_tbs)),
                                   notes=notes)


def list_hardware() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def load_hardware(name: str) -> Hardware:
    path = CONFIG_DIR / f"{name.lower()}.yaml"
    if not path.is_file():
        raise KeyError(f"unknown hardware {name!r}; known: {', '.join(list_hardware())} "
                       f"(add configs/hardware/{name.lower()}.yaml)")
    d = yaml.safe_load(path.read_text())
    return Hardware(name=path.stem, gpu_name=d["gpu_name"], peaks_tflops={k: float(v) for k, v in d["peaks_tflops"].items()},
                    bandwidth_tbs=float(d["bandwidth_tbs"]), sm_count=int(d["sm_count"]), l2_mb=float(d["l2_mb"]))


def hardware_for_gpu(gpu_name: str) -> str | None:
    """Map a driver GPU name ("NVIDIA H200") to a profile key, or None."""
    # Longest match first and a word boundary after it: "NVIDIA H20" must not claim "NVIDIA H200".
    profiles = sorted(((load_hardware(k).gpu_name, k) for k in list_hardware()), key=lambda p: -len(p[0]))
    for name, key in profiles:
        if re.search(re.escape(name) + r"(?![0-9A-Za-z])", gpu_name, flags=re.IGNORECASE):
            return key
    return None


def profile_key(gpu_name: str | None) -> str:
    """The ceilings profile of the GPU named by its driver (`gpu_name`; None: no GPU, a CPU run, which scores on
    h200, the project's reference card). A GPU with no profile raises KeyError, naming it and the fix: a silent
    fallback would score it on another card's ceilings (session 22 scored an H100 with the H200's 4.8 TB/s for its
    3.35, understating every memory-bound attainment by 1.43x)."""
    if gpu_name is None:
        return "h200"
    key = hardware_for_gpu(gpu_name)
    if key is None:
        raise KeyError(f"no ceilings profile for the GPU {gpu_name!r}; known: "
                       f"{', '.join(load_hardware(k).gpu_name for k in list_hardware())}. Add "
                       f"configs/hardware/<name>.yaml with its datasheet peaks, or pass --hardware NAME")
    return key


def study_hardware(name: str | None = None, gpu_name: str | None = None) -> Hardware:
    """The datasheet profile a study scores with: `name` when given (and not "auto"), else the profile of the
    GPU the study runs on (`gpu_name`, or torch's name for device 0; profile_key's rule)."""
    if name and name != "auto":
        return load_hardware(name)
    if gpu_name is None:
        import torch
        gpu_name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return load_hardware(profile_key(gpu_name))


def calibration_path(cache_dir: Path, name: str) -> Path:
    return Path(cache_dir) / "calibration" / f"{name}.json"


def save_calibration(cache_dir: Path, name: str, measured: dict) -> Path:
    path = calibration_path(cache_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(measured, indent=2, sort_keys=True))
    return path


def load_calibrated(cache_dir: Path, name: str) -> Hardware | None:
    """The calibrated profile for `name`, or None when `aka calibrate` has not run on this machine."""
    path = calibration_path(cache_dir, name)
    if not path.is_file():
        return None
    return load_hardware(name).with_calibration(json.loads(path.read_text()))
