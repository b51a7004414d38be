"""The launch record: per scored (visible) shape, which kernels ran with which constexpr values and grid,
and which entries of the candidate's CONFIGS the launcher read to choose them.

Why. A kernel with size buckets (rms_norm's `by_block_h`, gemm's `buckets`) uses one bucket per shape;
a search that moves every tunable spends most of its GPU time on buckets no scored shape reaches. The
worker records, in one extra call per visible shape after its correctness trials:
- `kernels`: each distinct launch (kernel, constexprs, num_warps, num_stages, grid), through the compile
  gate's LaunchRecorder;
- `configs_read`: the paths of the CONFIGS leaves the call read (["by_block_h", 1024, "ROWS"]). The
  module's CONFIGS is swapped, for that call only, for a copy whose dicts, lists and tuples note every
  item read (dict(bucket), {**bucket}, bucket["ROWS"], .get, .items, .values all count). The mapping
  from shape to bucket is then exact for any CONFIGS layout, with no knowledge of the seed. A
  launcher that copied CONFIGS at import time reads nothing traced: configs_read is empty and the
  search falls back to moving every tunable.

The record is advisory (the proposer's map of the kernel), never part of the verdict; a call that fails
only under tracing is repeated untraced and the record says so. Hold-out shapes are never recorded:
the parent asks only for the visible shapes, before any hold-out is sent.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

CONFIGS_NAME = "CONFIGS"
MAX_READS = 4096          # paths kept per shape (a launcher that walks a huge table)


@dataclass(frozen=True)
class KernelLaunch:
    kernel: str
    constexprs: tuple[tuple[str, Any], ...]     # (name, JSON-able value), in signature order
    num_warps: int
    num_stages: int
    grid: tuple[int, ...] = ()                   # () when the grid could not be resolved

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "constexprs": {k: v for k, v in self.constexprs},
                "num_warps": self.num_warps, "num_stages": self.num_stages, "grid": list(self.grid)}


@dataclass(frozen=True)
class ShapeLaunches:
    kernels: tuple[KernelLaunch, ...] = ()
    configs_read: tuple[tuple, ...] | None = None   # None: not traced (see note)
    note: str = ""
    # sandbox/call_trace.py: every launch and torch op of the call, in order ("": not traced); equal digests of
    # two kernels at a shape mean the same work there (agent/no_op.py)
    trace_digest: str = ""
    trace_events: int = 0

    def to_json(self) -> dict:
        return {"kernels": [k.to_json() for k in self.kernels],
                "configs_read": None if self.configs_read is None else [list(p) for p in self.configs_read],
                "note": self.note, "trace_digest": self.trace_digest, "trace_events": self.trace_events}

    @staticmethod
    def from_json(d: dict) -> "ShapeLaunches":
        kernels = tuple(KernelLaunch(str(k["kernel"]), tuple((str(a), v) for a, v in dict(k["constexprs"]).items()),
                                     int(k["num_warps"]), int(k["num_stages"]), tuple(int(g) for g in k["grid"]))
                        for k in d.get("kernels") or [])
        reads = d.get("configs_read")
        return ShapeLaunches(kernels, None if reads is None else tuple(tuple(p) for p in reads), str(d.get("note", "")),
                             str(d.get("trace_digest") or ""), int(d.get("trace_events") or 0))


# ---- tracing CONFIGS -----------------------------------------------------------------------------

def _wrap(value: Any, path: tuple, reads: set) -> Any:
    if isinstance(value, dict):
        return _TracedDict(path, reads, value)
    if isinstance(value, list):
        return _TracedList(path, reads, value)
    if isinstance(value, tuple) and type(value) is tuple:
        return _TracedTuple(path, reads, value)
    return value


def _note(reads: set, path: tuple, key: Any, value: Any) -> None:
    if not isinstance(value, (dict, list, tuple)) and len(reads) < MAX_READS:
        reads.add(path + (key,))


class _TracedDict(dict):
    def __init__(self, path: tuple, reads: set, value: dict):
        super().__init__({k: _wrap(v, path + (k,), reads) for k, v in value.items()})
        self._path, self._reads = path, reads

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        _note(self._reads, self._path, key, value)
        return value

    def __iter__(self):            # overriding it sends dict(d) and {**d} through __getitem__
        return dict.__iter__(self)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def items(self):
        return [(k, self[k]) for k in dict.keys(self)]

    def values(self):
        return [self[k] for k in dict.keys(self)]

    def copy(self):
        return {k: self[k] for k in dict.keys(self)}


class _TracedList(list):
    def __init__(self, path: tuple, reads: set, value: list):
        super().__init__(_wrap(v, path + (i,), reads) for i, v in enumerate(value))
        self._path, self._reads = path, reads

    def __getitem__(self, index):
        value = list.__getitem__(self, index)
        if isinstance(index, int):
            _note(self._reads, self._path, index % max(len(self), 1), value)
        return value


class _TracedTuple(tuple):
    def __new__(cls, path: tuple, reads: set, value: tuple):
        out = super().__new__(cls, (_wrap(v, path + (i,), reads) for i, v in enumerate(value)))
        out._path, out._reads = path, reads
        return out

    def __getitem__(self, index):
        value = tuple.__getitem__(self, index)
        if isinstance(index, int):
            _note(self._reads, self._path, index % max(len(self), 1), value)
        return value


@contextmanager
def traced_configs(module: Any) -> Iterator[set | None]:
    """While active, module.CONFIGS is a tracing copy; yields the set of leaf paths read (None when the
    module has no dict or list CONFIGS to trace). The original object is restored on exit."""
    original = getattr(module, CONFIGS_NAME, None) if module is not None else None
    if not isinstance(original, (dict, list)):
        yield None
        return
    reads: set = set()
    setattr(module, CONFIGS_NAME, _wrap(original, (), reads))
    try:
        yield reads
    finally:
        setattr(module, CONFIGS_NAME, original)


# ---- one record ----------------------------------------------------------------------------------

def _path_key(path: tuple) -> tuple:
    return tuple((0, p) if isinstance(p, int) else (1, str(p)) for p in path)


def encoded_constexprs(constexprs: dict) -> dict:
    """Constexpr values as JSON (sandbox.compile's encoding), a value it cannot encode by its repr."""
    from sandbox.compile import _encode
    out = {}
    for name, value in constexprs.items():
        try:
            out[name] = _encode(value)
        except TypeError:
            out[name] = repr(value)[:80]
    return out


def _launches(recorder) -> tuple[KernelLaunch, ...]:
    return tuple(KernelLaunch(rec.kernel_name, tuple(encoded_constexprs(rec.constexprs).items()), rec.num_warps,
                              rec.num_stages, rec.grid) for rec in recorder.records)


def record_launches(call: Callable[[], Any], module: Any, is_fatal: Callable[[BaseException], bool],
                    keep: Callable[[Any], None] | None = None) -> ShapeLaunches:
    """Run `call()` once under the LaunchRecorder with CONFIGS traced. A failure that only tracing could
    cause is retried untraced; a fatal one (CUDA error, OOM: `is_fatal`) propagates. `keep(recorder)`
    receives the recorder (its records and, on a GPU, the compiled kernels: sandbox/feature_gate.py). The traced
    call also gives the call trace's digest (sandbox/call_trace.py); an untraced one, none."""
    from contextlib import nullcontext

    from sandbox import call_trace
    from sandbox.compile import LaunchRecorder
    note, trace, events = "", "", 0
    try:
        ops = call_trace.aten_ops()
        with LaunchRecorder(trace=True) as recorder, traced_configs(module) as reads, ops or nullcontext():
            call()
        paths = None if reads is None else tuple(sorted(reads, key=_path_key))
        if reads is None:
            note = "the candidate has no module-level CONFIGS dict or list to trace"
        if ops is not None and not recorder.errors:     # a launch it could not describe leaves the trace partial
            trace = call_trace.digest(recorder.sequence, ops.events)
            events = len(recorder.sequence) + len(ops.events)
    except Exception as exc:   # noqa: BLE001 - the candidate passed this shape untraced
        if is_fatal(exc):
            raise
        note = f"the call failed with CONFIGS traced ({str(exc)[:200]}); recorded untraced"
        with LaunchRecorder() as recorder:
            call()
        paths = None    # trace and events are still "" and 0: the digest is the last step of the try
    if recorder.errors:
        note = "; ".join([note] * bool(note) + recorder.errors[:3])[:500]
    if keep is not None:
        keep(recorder)
    return ShapeLaunches(_launches(recorder), paths, note, trace, events)


def collect(evaluation, w, pairs) -> None:
    """Parent side: one `launches` request per visible (shape, row); the record lands in row.launches.
    Called after the visible correctness trials and before any hold-out shape is sent."""
    from sandbox import correctness as cx
    for shape, row in pairs:
        if row.holdout:
            continue
        evaluation.activity = f"the launch record of shape {shape.id}"
        w.send({"kind": "launches", "dims": evaluation._dims(shape), "dtype": evaluation._dtype(shape),
                "seed": cx.derive_seed(evaluation.base_seed, "launches", shape.id)})
        reply, _ = evaluation._expect(w, "launches")
        row.launches = ShapeLaunches.from_json(reply["record"])
