"""The parent's runtime checks around the correctness trials that need evidence, not a guess.

A mixin of sandbox.evaluation._Evaluation (like sandbox.gpu_gates.GpuGates):
- the read-only-input call (input-write rule): after a shape's trials, one more call on read-only copies
  of the first trial's values (sandbox/input_guard.py); a fault there is a write into an input;
- why a later trial failed (the stale-cache hint only with evidence): the failing output is compared
  with the earlier trials' references, and the failing values are re-run in freshly allocated buffers;
- interpreter limitations (libdevice): a rejection on the CPU that is not the candidate's fault.
"""
from __future__ import annotations

import re

from sandbox import results

INPUT_WRITE_RULE = ("input-write rule: the candidate wrote into an input during the call (the call on read-only "
                    "copies of inputs that had just passed in writable buffers faulted). Inputs must never be "
                    "written, not even as scratch that is restored before returning: another stream of a serving "
                    "engine reads them meanwhile. Allocate scratch space with torch.empty")
_LIBDEVICE = re.compile(r"\blibdevice\b")


def interpreter_limitation(source: str, exc_type: str, interpreter: bool) -> str | None:
    """Why a failure under Triton's CPU interpreter is the interpreter's, not the candidate's, or None.

    triton.language.extra.libdevice functions are declarations the interpreter does not implement: each
    returns None there, and the kernel then fails with an opaque InterpreterError ("cannot convert None
    ... to tensor", seen with triton 3.7.1). On a GPU the same kernel compiles and runs."""
    if not interpreter or exc_type != "InterpreterError" or not _LIBDEVICE.search(source or ""):
        return None
    return ("interpreter limitation: the kernel calls triton.language.extra.libdevice, which Triton's CPU "
            "interpreter does not implement (its functions return None there, so the kernel fails with an "
            "InterpreterError). This is not a fault of the candidate: it cannot be checked without a GPU; "
            "evaluate it on a GPU, or use tl.math / tl.* functions where one exists")


class TrialEvidence:
    def _guarded_trial(self, w, index: int, shape, row, seed: int, dims, dtype):
        """One call on read-only copies of the first trial's inputs (same values, new addresses), sent only
        after the shape passed: a fault now is a write into an input during the call. The arguments the
        operator writes by contract (MUTATES) get writable copies."""
        self.activity, self.fault_rule = f"the read-only-input call of shape {shape.id}", INPUT_WRITE_RULE
        w.send(self._check_message(index, dims, dtype, [seed], guard=True))
        expected = self._expected(dims, dtype, seed)       # while the worker runs the call
        header, payload = self._expect_trial(w, results.nbytes(expected.parts))
        self._expect(w, "checked")
        self.fault_rule = None
        if header.get("guard") == "none" and header.get("guard_note"):
            note = (f"input-write guard unavailable on this machine ({str(header['guard_note'])[:200]}): writes "
                    f"into inputs during the call were checked only by the digests after it")
            if note not in self.result.reasons:
                self.result.reasons.append(note)
        failure = self._check_trial(header, payload, expected, dtype, row)
        if failure is None:
            return None
        return (f"the call on read-only copies of trial 1's inputs (same values, new addresses): {failure} "
                f"(trial 1 passed with the same values: the result depends on where the inputs live)")

    def _late_failure_hint(self, w, index: int, shape, failed: int, seeds: list[int], header: dict,
                           payload: bytes, dims, dtype) -> str:
        """Why trial `failed` (0-based, > 0) failed after earlier trials of the same buffers passed, from
        evidence: "" when nothing can be said."""
        first = self._expected(dims, dtype, seeds[0])
        got = results.decode(self.spec, header, payload, first.parts) if not header.get("problem") else None
        if isinstance(got, list):
            for k in range(failed):
                if results.passes(self.spec, got, first if k == 0 else self._expected(dims, dtype, seeds[k]), dtype):
                    return (f" (the output is trial {k + 1}'s result, returned again for new input values: a result "
                            f"cached across calls, by pointer, shape or call count, goes stale when the inputs change)")
        self.activity = f"re-running trial {failed + 1}'s inputs of shape {shape.id} in freshly allocated buffers"
        w.send(self._check_message(index, dims, dtype, [seeds[failed]], fresh=True))
        again_expected = self._expected(dims, dtype, seeds[failed])
        again, again_payload = self._expect_trial(w, results.nbytes(again_expected.parts))
        self._expect(w, "checked")
        scratch = self._row(shape, holdout=True)        # the re-run's error statistics are not the shape's
        failure = self._check_trial(again, again_payload, again_expected, dtype, scratch)
        if failure is None and again.get("fresh_buffers"):
            return (" (the same input values pass in freshly allocated buffers: state keyed by the buffers' "
                    "addresses, such as a result cached by pointer, went stale when new values were copied into "
                    "the same buffers)")
        if failure is None:
            return " (the same input values pass when re-run: the failure depends on state kept across calls)"
        return (" (the same input values fail again in freshly allocated buffers, so reused buffers are not the "
                "cause: the error depends on these input values, e.g. outliers, large magnitudes, overflow to "
                "inf/NaN, or on state the kernel keeps across calls)")
