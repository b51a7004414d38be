"""The one usage-error helper of the command line, and the checks every command shares.

Every user mistake ends in `error: ...` on stderr and exit code 2, with the value, the limit and a
fix, never a traceback. Exit codes of `aka optimize` (README "Exit codes"): 0 done, 2 usage or
set-up error, 3 stopped by a fatal provider error, 4 a --from-reference run ended with no kernel that
passed every gate, 130/143 interrupted by SIGINT/SIGTERM.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import typer

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_PROVIDER = 0, 1, 2, 3


def usage_error(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg="red")
    return typer.Exit(EXIT_USAGE)


def read_kernel(path: Path, option: str) -> str:
    """A kernel file's text, or a usage error that says what is wrong with it."""
    path = Path(path)
    if path.is_dir():
        raise usage_error(f"{option} {path} is a directory; give the kernel's .py file inside it")
    if not path.exists():
        raise usage_error(f"{option} {path} does not exist; give the path of a kernel .py file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise usage_error(f"{option} {path} cannot be read ({e.strerror}); check its permissions")
    nul = data.find(b"\0")
    if nul >= 0:
        raise usage_error(f"{option} {path} is a binary file (a NUL byte at offset {nul}); give a Python source file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise usage_error(f"{option} {path} is not UTF-8 text (byte {e.start}); save it as UTF-8 Python source")
    if not text.strip():
        raise usage_error(f"{option} {path} is empty; it must define the operator's function and a "
                          f"@triton.jit kernel")
    return text


def check_writable(path: Path, option: str) -> None:
    """Fail now, before any evaluation, if `path` cannot be written later: its folder is created and a
    scratch file written and removed there (permission bits alone say nothing when running as root)."""
    path = Path(path)
    if path.is_dir():
        raise usage_error(f"{option} {path} is a directory; give a file path, e.g. {path / 'result.json'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.check")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        os.unlink(scratch)
    except OSError as e:
        raise usage_error(f"{option} {path} cannot be written ({e.strerror}: {e.filename}); choose a path "
                          f"in a folder you can write") from None


def check_number(value: float | None, option: str, low: float, high: float | None = None,
                 low_ok: bool = True, example: str = "") -> None:
    """A finite number in range, or a usage error naming the value and the limit."""
    if value is None:
        return
    limit = ("[" if low_ok else "(") + f"{low:g}, " + (f"{high:g}]" if high is not None else "inf)")
    hint = f", e.g. {option} {example}" if example else ""
    if not math.isfinite(value):
        raise usage_error(f"{option} {value}: not a finite number; give a value in {limit}{hint}")
    if value < low or (value == low and not low_ok) or (high is not None and value > high):
        raise usage_error(f"{option} {value:g} is out of range {limit}; give a value in it{hint}")
