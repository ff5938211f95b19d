"""Verifying a saved pack: recompute its ids, and its manifest against the files on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ragstore.common.fields import fields_dict
from ragstore.common.files import entry_problem, read_regular
from ragstore.context.builder import assemble_pack, manifest_entry, manifest_of
from ragstore.context.models import ContextPack

__all__ = ["VerifyReport", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of :func:`verify`. ``manifest_id_ok`` is ``None`` when the pack has no L7."""

    pack_id_ok: bool
    manifest_id_ok: bool | None
    checked: tuple[str, ...]
    changed: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when both ids match the content and every file is on disk unchanged."""
        return self.pack_id_ok and self.manifest_id_ok is not False and not self.changed and not self.missing

    def as_dict(self) -> dict[str, object]:
        """The report as plain JSON-able data."""
        lists = {name: list(getattr(self, name)) for name in ("checked", "changed", "missing")}
        return {"ok": self.ok, **fields_dict(self, **lists)}

    def lines(self) -> list[str]:
        """One human line per finding, then a verdict line."""
        out = [f"changed: {path}" for path in self.changed] + [f"missing: {path}" for path in self.missing]
        if not self.pack_id_ok:
            out.append("pack_id does not match the pack's layers (the pack file was edited)")
        if self.manifest_id_ok is False:
            out.append("manifest_id does not match L7 (the pack file was edited)")
        verdict = "ok" if self.ok else "FAILED"
        out.append(f"{verdict}: {len(self.checked)} files checked")
        return out


def verify(pack: ContextPack, root: str | Path) -> VerifyReport:
    """Recompute ``pack_id`` and ``manifest_id`` from the pack, and each manifest entry from the file under
    ``root``; name the files whose bytes changed and those that are missing.

    The files checked are L7's entries, or L2's files when L7 was shed; none when both were shed.
    Never raises for a changed or missing file: that is what the report is for. Only regular files are
    read: a FIFO, a device, a link loop or a link leading outside ``root`` where a file was counts as
    changed, and is never opened (a FIFO cannot hang the check).
    """
    rebuilt = assemble_pack(pack.layers, pack.budget.max_tokens)
    entries = pack.layers.L7 if pack.layers.L7 is not None else manifest_of(pack.layers.L2 or [])
    base = Path(root)
    real_base = os.path.realpath(base)
    changed: list[str] = []
    missing: list[str] = []
    for entry in entries:
        target = base / entry.path
        problem = entry_problem(target, real_base)
        if problem is not None and problem != "a folder" and not problem.startswith(("cannot stat", "broken")):
            changed.append(entry.path)  # a FIFO, device, link loop or link leaving the root: never opened
            continue
        try:
            data = read_regular(target)
        except OSError:
            missing.append(entry.path)
            continue
        if manifest_entry(entry.path, data) != entry:
            changed.append(entry.path)
    return VerifyReport(
        pack_id_ok=rebuilt.pack_id == pack.pack_id,
        manifest_id_ok=None if pack.layers.L7 is None else rebuilt.manifest_id == pack.manifest_id,
        checked=tuple(entry.path for entry in entries),
        changed=tuple(changed),
        missing=tuple(missing),
    )
