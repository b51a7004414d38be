"""The output slot (sandbox/output_slot.py): a trial's bytes from the worker's side to the parent's, the pipe
fallback when they do not fit, and the parent's checks on what it reads. Real files, real tensors."""
from __future__ import annotations

import os

import pytest
import torch

from sandbox.output_slot import OutputSlot, SlotWriter


@pytest.fixture
def slot():
    s = OutputSlot()
    yield s
    s.close()


def test_tensors_written_back_to_back_come_back_byte_for_byte(slot):
    a = torch.randn(37, 5)
    b = torch.arange(11, dtype=torch.int32)
    c = torch.randn(4, 6)[:, ::2]                      # not contiguous: written as its contiguous values
    total = sum(t.numel() * t.element_size() for t in (a, b, c))
    slot.reserve(total)
    writer = SlotWriter(slot.path)
    assert writer.write([a, b, c]) == total
    got = slot.read(total, "cpu")
    expected = torch.cat([t.contiguous().reshape(-1).view(torch.uint8) for t in (a, b, c)])
    assert torch.equal(got, expected)
    # the parent's copy is its own: a later write into the slot does not change it
    writer.write([torch.zeros(total, dtype=torch.uint8)])
    assert torch.equal(got, expected)


def test_a_grown_slot_is_mapped_again_and_what_does_not_fit_goes_by_the_pipe(slot):
    writer = SlotWriter(slot.path)
    big = torch.randn(1000)
    assert writer.write([big]) is None                 # nothing reserved yet: the pipe carries it
    slot.reserve(400)
    assert writer.write([big]) is None                 # 4000 bytes do not fit in 400
    assert writer.write([torch.randn(10)]) == 40
    slot.reserve(4000)
    assert writer.write([big]) == 4000
    assert torch.equal(slot.read(4000, "cpu").view(torch.float32), big)
    assert writer.write([torch.empty(0)]) == 0


def test_the_parent_refuses_a_length_beyond_the_slot_and_a_file_shrunk_behind_its_back(slot):
    slot.reserve(64)
    assert "holds 64" in slot.read(65, "cpu")
    assert "holds 64" in slot.read(-1, "cpu")
    os.truncate(slot.path, 16)                         # as a worker might try: the parent reads, never maps
    assert slot.read(64, "cpu") == "the output slot held 16 bytes, expected 64"


def test_close_removes_the_file():
    s = OutputSlot()
    path = s.path
    assert os.path.exists(path) and (os.stat(path).st_mode & 0o777) == 0o600
    s.close()
    s.close()
    assert not os.path.exists(path)


def test_without_room_for_the_pages_the_slot_stays_small_and_outputs_take_the_pipe(slot, monkeypatch):
    """A full tmpfs: posix_fallocate fails (ENOSPC), the slot does not grow, the writer falls back."""
    import errno

    def no_room(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    slot.reserve(64)
    monkeypatch.setattr(os, "posix_fallocate", no_room)
    slot.reserve(1 << 20)
    assert slot.size == 64 and os.fstat(slot.fd).st_size == 64
    assert SlotWriter(slot.path).write([torch.zeros(1 << 18)]) is None
