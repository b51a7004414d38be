"""Triton compile cache shared by the evaluations of one run, one directory per candidate source.

Without it every fresh worker either recompiles every kernel specialization (a private cache) or shares
one cache with every other candidate (triton's default ~/.triton/cache): a candidate that found a way
to write files could then plant a cubin under a key another candidate's kernel will look up.

Here the key of a directory is the sha256 of the candidate's source text, and triton's own key inside
it covers the specialization (signature, constexprs, divisibility, num_warps, num_stages, target). So a
candidate can only ever reach compiled code of the very same source. After the first evaluation of a
source the parent seals its directory: it records a manifest (sha256 of every file, kept outside the
directory) and makes the files read-only. Before each later worker gets the directory the parent checks
it against the manifest: a changed or missing file wipes the directory (the worker recompiles, and the
result's environment says so); files added since the seal are removed, so only what the first
evaluation compiled is ever reused. (Read-only bits do not stop root; the manifest check does.)

A new source's directory may start as a copy of another source's sealed one (`checkout(seed_from=)`: the
run's incumbent, which passed every gate). Triton's key covers the @triton.jit function's own text, not
the module's, so a candidate that changed only its launch table (CONFIGS) finds the incumbent's kernels
for every specialization it did not change, and compiles only the rest: fused_moe's candidates compiled
all of their ~16 specializations again (23 s of a 42 s timing-only evaluation on the H200). The copy is
verified file by file against the incumbent's manifest while it is made, and it is the candidate's own:
nothing it does reaches the incumbent's directory. The fresh-process confirmation of a winner compiles
from its own source in a private cache (sandbox.evaluation.EvalRequest.private_compile), so an accepted
kernel's time never rests on binaries compiled for another source. An A/B worker holds two kernels; each
runs with its own source's directory (sandbox/ab.py sets TRITON_CACHE_DIR around each kernel's calls).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

MANIFEST_SUFFIX = ".manifest.json"


def source_key(source: str) -> str:
    """The cache key of a candidate: sha256 of its exact text (first 24 hex digits)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:24]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink())


class CompileCache:
    """Owns `root` (a temporary folder removed by close() when none is given)."""

    def __init__(self, root: str | Path | None = None):
        self._owned = root is None
        self.root = Path(tempfile.mkdtemp(prefix="aka-compile-cache-") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _paths(self, source: str) -> tuple[Path, Path]:
        key = source_key(source)
        return self.root / key, self.root / (key + MANIFEST_SUFFIX)

    def sealed(self, source: str) -> bool:
        return self._paths(source)[1].exists()

    def checkout(self, source: str, seed_from: str | None = None) -> tuple[Path, str]:
        """The directory for `source`'s worker, verified; (path, note for the result's environment). A first
        checkout with `seed_from` starts from a verified copy of that source's sealed directory."""
        folder, manifest = self._paths(source)
        if not manifest.exists():
            fresh = not folder.exists() or not any(folder.iterdir())
            folder.mkdir(exist_ok=True)
            note = "first evaluation of this source: compiles land in its own cache directory"
            if fresh and seed_from is not None and seed_from != source:
                note += "; " + self._seed(folder, seed_from)
            return folder, note
        recorded = json.loads(manifest.read_text())
        present = {str(p.relative_to(folder)): p for p in _files(folder)} if folder.is_dir() else {}
        changed = [rel for rel, digest in recorded.items()
                   if rel not in present or present[rel].is_symlink() or _digest(present[rel]) != digest]
        if changed:
            self._wipe(folder, manifest)
            folder.mkdir()
            return folder, (f"cache of this source was altered since it was sealed ({len(changed)} file(s), e.g. "
                            f"{changed[0]}): wiped, recompiling")
        for rel, p in present.items():
            if rel not in recorded:
                p.unlink()
        return folder, f"sealed cache of this source reused ({len(recorded)} files verified)"

    def _seed(self, folder: Path, seed_from: str) -> str:
        """Copy seed_from's sealed files into `folder`, each checked against its manifest; a note."""
        src, manifest = self._paths(seed_from)
        if not manifest.exists():
            return "the incumbent's cache is not sealed: nothing copied"
        recorded = json.loads(manifest.read_text())
        copied = 0
        for rel, digest in recorded.items():
            origin = src / rel
            if origin.is_symlink() or not origin.is_file():
                continue
            data = origin.read_bytes()
            if hashlib.sha256(data).hexdigest() != digest:
                continue       # altered since its seal: not copied (the incumbent's next checkout wipes it)
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            copied += 1
        return f"started from a verified copy of the incumbent's sealed cache ({copied} of {len(recorded)} files)"

    def seal(self, source: str) -> None:
        """After the first evaluation of `source`: record the manifest, make the files read-only."""
        folder, manifest = self._paths(source)
        if manifest.exists() or not folder.is_dir():
            return
        recorded = {}
        for p in _files(folder):
            if p.is_symlink():
                p.unlink()
                continue
            recorded[str(p.relative_to(folder))] = _digest(p)
            p.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        tmp = manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps(recorded, sort_keys=True))
        os.replace(tmp, manifest)

    def _wipe(self, folder: Path, manifest: Path) -> None:
        manifest.unlink(missing_ok=True)
        if folder.exists():
            for p in folder.rglob("*"):
                try:
                    p.chmod(0o700 if p.is_dir() else 0o600)
                except OSError:
                    pass
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        if self._owned:
            for p in self.root.rglob("*"):
                try:
                    p.chmod(0o700 if p.is_dir() else 0o600)
                except OSError:
                    pass
            shutil.rmtree(self.root, ignore_errors=True)
