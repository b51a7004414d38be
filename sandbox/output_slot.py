"""The output slot: a file in shared memory that carries a trial's output bytes from the worker to the parent.

Sending gemm's outputs (up to 235 MB a trial) through the result pipe cost 5.8 s of a 20 s evaluation on the
H200: 64 KiB pipe writes, and a copy into freshly faulted pageable memory on each side. Through the slot the
worker copies its (already snapshotted) outputs into one mapping and the parent reads them in one call into
a reused staging buffer, then onto its own GPU. The trial's header, with every decision-relevant field,
still comes over the private pipe; only the bytes take the slot.

Trust is that of the pipe: both are the worker process's, and the worker's harness writes them. Three rules
keep it so. (1) The parent creates the file (0600, a fresh name) and only ever grows it, allocating its pages
(a full tmpfs then means the pipe, never a worker killed by SIGBUS); the worker maps it.
(2) After writing a trial the worker waits for the parent's `slot_read` before it does anything else, so no
candidate code runs while the parent copies, and the next trial cannot overwrite bytes not yet read.
(3) The parent reads with pread into its own buffer (never a mapping: a file shrunk behind its back cannot
fault the parent) and checks the length: a short read is a protocol violation, not a result.
A payload larger than the slot falls back to the pipe.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from pathlib import Path

SLOT_READ = "slot_read"        # the parent's acknowledgement: the worker may go on


def _shared_memory_dir() -> str | None:
    """/dev/shm when it is a writable directory (tmpfs: no write-back to disk), else the temp dir."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


class OutputSlot:
    """Parent side: owns the file; grows it, reads a trial's bytes from it, removes it on close()."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="aka-output-slot-", dir=_shared_memory_dir())
        self.fd, self.size = fd, 0
        self._staging = None

    def reserve(self, nbytes: int) -> None:
        """Make the slot hold at least `nbytes` (it never shrinks while a worker may have it mapped). The pages
        are allocated now: a worker writing into a sparse file on a full tmpfs (Docker's /dev/shm is 64 MiB)
        would die of SIGBUS, which would read as the candidate's crash. Without the room, the slot stays as
        it is and larger outputs take the pipe."""
        if nbytes <= self.size:
            return
        try:
            os.posix_fallocate(self.fd, 0, int(nbytes))
        except OSError:
            return
        self.size = int(nbytes)

    def read(self, nbytes: int, device: str):
        """The first `nbytes` of the slot as a uint8 tensor of the parent's own on `device`, or a string saying
        why they cannot be read."""
        import torch
        if nbytes < 0 or nbytes > self.size:
            return f"the worker announced {nbytes} bytes in the output slot, which holds {self.size}"
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=device)
        pinned = device == "cuda"
        if self._staging is None or self._staging.numel() < nbytes:
            self._staging = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
        stage = self._staging[:nbytes]
        view, got = memoryview(stage.numpy()), 0
        while got < nbytes:       # one read returns at most ~2 GiB on Linux
            n = os.preadv(self.fd, [view[got:]], got)
            if n <= 0:
                return f"the output slot held {got} bytes, expected {nbytes}"
            got += n
        return stage.to(device, copy=True) if pinned else stage.clone()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._staging = None


class SlotWriter:
    """Worker side: maps the parent's file and copies tensors' bytes into it, back to back."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR)
        self._map, self._mapped = None, 0

    def write(self, tensors: list) -> int | None:
        """Copy the tensors' bytes into the slot; their total, or None when they do not fit (use the pipe)."""
        import torch
        flats = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in tensors]
        total = sum(f.numel() for f in flats)
        size = os.fstat(self.fd).st_size      # the parent may have grown it since the last trial
        if total == 0 or total > size:
            return None if total else 0
        if size > self._mapped:
            if self._map is not None:
                self._map.close()
            self._map, self._mapped = mmap.mmap(self.fd, size), size
        view = torch.frombuffer(self._map, dtype=torch.uint8, count=total)
        at = 0
        for f in flats:
            view[at:at + f.numel()].copy_(f)
            at += f.numel()
        del view
        return total
