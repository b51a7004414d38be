"""A proposer that replays candidate files in order: for tests, demos and replaying a run by hand.

It is a real proposer (DESIGN.md section 6, item 12): the loop cannot tell it from the others.
`changed` is the file's name; `why` is the file's first docstring or comment line, when it has one.
Once the files run out it answers with an error proposal ("script exhausted"), which the loop records
like any other failed proposal, and marks it final so the loop stops.
"""
from __future__ import annotations

from pathlib import Path

from agent.types import Proposal, ProposalContext


def _first_line(source: str) -> str:
    for line in source.splitlines():
        text = line.strip().strip('"').strip("'").lstrip("#").strip()
        if text:
            return text[:200]
    return ""


class ScriptedProposer:
    name = "scripted"
    writes_from_reference = True   # its files may be written from nothing: --from-reference replays them too

    def __init__(self, paths: list[str] | tuple[str, ...], skip: int = 0):
        """`skip`: files already replayed by an earlier session of the same run (--resume)."""
        self.paths = [Path(p) for p in paths]
        missing = [str(p) for p in self.paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"scripted proposer: no such file(s): {', '.join(missing)}")
        self.position = max(0, int(skip))
        self.observed: list[tuple[str, str, bool]] = []   # (file, verdict, accepted), for inspection

    def propose(self, ctx: ProposalContext) -> Proposal:
        if self.position >= len(self.paths):
            # meta["final"]: nothing will ever come after this; the loop stops instead of spinning.
            return Proposal(source=None, error="script exhausted", meta={"final": True})
        path = self.paths[self.position]
        self.position += 1
        source = path.read_text()
        return Proposal(source=source, changed=path.name, why=_first_line(source), meta={"script_path": str(path)})

    def observe(self, proposal: Proposal, result, accepted: bool) -> None:
        verdict = getattr(result, "verdict", "none") if result is not None else "none"
        self.observed.append((proposal.changed, verdict, accepted))
