"""The parent's frame parser: frames split anywhere, payloads read into place, garbage refused."""
import os
import random

import pytest

from sandbox import protocol


def _frames(n_frames: int, rng: random.Random) -> tuple[bytes, list[tuple[dict, bytes]]]:
    sent, stream = [], bytearray()
    for i in range(n_frames):
        header = {"kind": "trial", "index": i}
        payload = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 4096, 70_000])))
        stream += protocol.encode(header, len(payload)) + payload
        sent.append((header, payload))
    return bytes(stream), sent


@pytest.mark.parametrize("use_sink", [False, True])
def test_frames_survive_any_split(use_sink):
    rng = random.Random(7)
    stream, sent = _frames(12, rng)
    fb, got, pos = protocol.FrameBuffer(), [], 0
    while pos < len(stream):
        step = rng.choice([1, 3, 17, 999, 65536])
        sink = fb.sink() if use_sink else None
        if sink is not None:           # the reader's fast path: straight into the payload's buffer
            n = min(step, len(sink), len(stream) - pos)
            sink[:n] = stream[pos:pos + n]
            fb.advance(n)
        else:
            n = min(step, len(stream) - pos)
            fb.feed(stream[pos:pos + n])
        pos += n
        while (frame := fb.take(1 << 20)) is not None:
            got.append((frame[0], bytes(frame[1])))
    assert got == sent
    assert fb.pending == 0 and fb.sink() is None


def test_payload_is_writable_and_its_own_buffer():
    fb = protocol.FrameBuffer()
    fb.feed(protocol.encode({"kind": "a"}, 4) + b"abcd" + protocol.encode({"kind": "b"}, 0))
    header, payload = fb.take()
    payload[0] = ord("z")              # torch.frombuffer needs a writable buffer
    assert header["kind"] == "a" and bytes(payload) == b"zbcd"
    assert fb.take()[0]["kind"] == "b"


def test_garbage_and_oversized_payloads_are_refused():
    fb = protocol.FrameBuffer()
    fb.feed(b"XXXX" + bytes(12))
    with pytest.raises(protocol.ProtocolError, match="bad frame magic"):
        fb.take()
    fb = protocol.FrameBuffer()
    fb.feed(protocol.encode({"kind": "a"}, 10))
    with pytest.raises(protocol.ProtocolError, match="exceeds the 5 bytes"):
        fb.take(max_payload=5)
    fb = protocol.FrameBuffer()
    fb.feed(protocol.encode({"kind": 3}))
    with pytest.raises(protocol.ProtocolError, match="string 'kind'"):
        fb.take()


def test_a_large_payload_crosses_a_real_pipe():
    r, w = os.pipe()
    payload = os.urandom(3 << 20)       # larger than a pipe's buffer: the writer blocks until read
    pid = os.fork()
    if pid == 0:
        os.close(r)
        protocol.send(w, {"kind": "trial"}, payload)
        os._exit(0)
    os.close(w)
    fb, frame = protocol.FrameBuffer(), None
    while frame is None:
        sink = fb.sink()
        if sink is not None:
            fb.advance(os.readv(r, [sink]))
        else:
            fb.feed(os.read(r, 1 << 16))
        frame = fb.take(max_payload=4 << 20)
    os.waitpid(pid, 0)
    os.close(r)
    assert frame[0]["kind"] == "trial" and bytes(frame[1]) == payload
