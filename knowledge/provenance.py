"""Hidden provenance: strip source paths, URLs and project names from snippet text.

Under the hidden-provenance contract a prompt may carry what a kernel does but not where it came
from. Names match case-insensitively with letters and digits as the only word characters, so
`vllm`, `vllm.model_executor` and `vllm_ops` are all caught while `avllmx` is not.
"""
from __future__ import annotations

import re
from typing import Iterable

# Projects whose code or names could reach a prompt through the reference layer, plus our own.
PROJECT_NAMES = (
    "vLLM", "SGLang", "Liger-Kernel", "liger_kernel", "Liger", "FlashInfer", "TensorRT-LLM", "TRT-LLM",
    "xFormers", "flash_attn", "FlashAttention", "Unsloth", "LightLLM", "lmdeploy", "DeepSpeed",
    "Megatron", "torch._inductor", "Inductor", "aka",
)

PATH_MARK = "[path]"
URL_MARK = "[url]"
NAME_MARK = "[project]"
FILE_MARK = "[file]"

_URL = re.compile(r"\b(?:https?|file)://\S+")
# Absolute paths (two or more segments, not preceded by a word char, so `M/BLOCK_M/2` is safe)
# and relative paths that end in a source-like suffix.
_ABS_PATH = re.compile(r"(?<![\w)\]}])(?:~)?/(?:[\w.+-]+/)+[\w.+-]+")
_SUFFIXES = r"(?:py|pyi|md|jinja|cu|cuh|cpp|cc|h|hpp|yaml|yml|json|txt|toml)"
_REL_PATH = re.compile(rf"\b(?:[\w.+-]+/)+[\w.+-]+\.{_SUFFIXES}\b")
_FILE_NAME = re.compile(rf"\b[\w+-]+(?:\.[\w+-]+)*\.{_SUFFIXES}\b")


def _name_pattern(names: Iterable[str]) -> re.Pattern[str]:
    # Longest first so "Liger-Kernel" wins over "Liger".
    alts = sorted({n for n in names if n}, key=len, reverse=True)
    body = "|".join(re.escape(n) for n in alts)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)


def strip_provenance(text: str, extra_names: Iterable[str] = ()) -> str:
    """`text` with URLs, paths, file names and project names replaced by neutral marks."""
    text = _URL.sub(URL_MARK, text)
    text = _ABS_PATH.sub(PATH_MARK, text)
    text = _REL_PATH.sub(PATH_MARK, text)
    text = _FILE_NAME.sub(FILE_MARK, text)
    return _name_pattern((*PROJECT_NAMES, *extra_names)).sub(NAME_MARK, text)


def leaks(text: str, extra_names: Iterable[str] = ()) -> list[str]:
    """What in `text` would reveal provenance (for tests and for checking a prompt)."""
    found = _URL.findall(text) + _ABS_PATH.findall(text) + _REL_PATH.findall(text)
    found += _name_pattern((*PROJECT_NAMES, *extra_names)).findall(text)
    return found
