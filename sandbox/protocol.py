"""Frames between the parent and its worker over two private pipes (never stdout/stderr).

A frame is a fixed prefix (magic b"AKA1", header length u32, payload length u64, little-endian),
the header as UTF-8 JSON, then the payload's raw bytes (an output tensor, or nothing).
The worker writes blocking; the parent reads with a deadline (`FrameBuffer` + select in
sandbox/isolation.py) and bounds every length it is told, because the worker runs untrusted
code that could write garbage into the pipe.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any

MAGIC = b"AKA1"
PREFIX = struct.Struct("<4sIQ")
MAX_HEADER_BYTES = 4 << 20          # headers are small JSON records; 4 MiB is generous
DEFAULT_MAX_PAYLOAD = 1 << 20       # most replies carry no payload; outputs pass an explicit bound


class ProtocolError(Exception):
    """The byte stream on the result pipe is not a well-formed frame (or breaks a bound)."""


def encode(header: dict[str, Any], payload_len: int = 0) -> bytes:
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {len(body)} bytes exceeds {MAX_HEADER_BYTES}; send bulk data as payload")
    return PREFIX.pack(MAGIC, len(body), payload_len) + body


def write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, header: dict[str, Any], payload=b"") -> None:
    """Write one frame (blocking). `payload` is anything exposing the buffer protocol."""
    size = memoryview(payload).nbytes
    write_all(fd, encode(header, size))
    if size:
        write_all(fd, payload)


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError(f"pipe closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_blocking(fd: int) -> tuple[dict[str, Any], bytes]:
    """The worker's side: read one frame from the request pipe (the parent is trusted)."""
    magic, hlen, plen = PREFIX.unpack(_read_exact(fd, PREFIX.size))
    if magic != MAGIC:
        raise ProtocolError(f"bad magic {magic!r} on the request pipe")
    header = json.loads(_read_exact(fd, hlen))
    return header, _read_exact(fd, plen) if plen else b""


class FrameBuffer:
    """Incremental frame parser for the parent: feed bytes, take complete frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def pending(self) -> int:
        return len(self._buf)

    def take(self, max_payload: int = DEFAULT_MAX_PAYLOAD) -> tuple[dict[str, Any], bytearray] | None:
        """The next complete frame, or None if more bytes are needed. Raises ProtocolError on garbage."""
        if len(self._buf) < PREFIX.size:
            return None
        magic, hlen, plen = PREFIX.unpack_from(self._buf, 0)
        if magic != MAGIC:
            raise ProtocolError(f"bad frame magic {bytes(magic)!r} (expected {MAGIC!r}): something other "
                                f"than the worker's reporter wrote into the private result pipe")
        if hlen > MAX_HEADER_BYTES:
            raise ProtocolError(f"frame header of {hlen} bytes exceeds the {MAX_HEADER_BYTES}-byte limit")
        if plen > max_payload:
            raise ProtocolError(f"frame payload of {plen} bytes exceeds the {max_payload} bytes expected here")
        end = PREFIX.size + hlen + plen
        if len(self._buf) < end:
            return None
        try:
            header = json.loads(bytes(self._buf[PREFIX.size:PREFIX.size + hlen]))
        except ValueError as e:
            raise ProtocolError(f"frame header is not JSON: {e}") from None
        if not isinstance(header, dict) or not isinstance(header.get("kind"), str):
            raise ProtocolError(f"frame header must be an object with a string 'kind', got {str(header)[:200]}")
        # A writable bytearray: the parent wraps output bytes with torch.frombuffer without another copy
        # (an rms_norm hot set sends ~1.8 GB of outputs per evaluation).
        payload = self._buf[PREFIX.size + hlen:end]
        del self._buf[:end]
        return header, payload
