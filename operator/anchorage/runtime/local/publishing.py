"""The local engine's run published to an artifact store: ``anchorage run --store URI`` (``s3://`` or ``file://``).

The run folder stays the engine's working state (the sandbox writes there, its ``.lock`` keeps two runs on this
machine apart); with a store, every finished trial is also published under ``<store>/<campaign>/<trial>/`` in the
run-folder layout the operator writes too (docs/design-notes.md, "Run folder"): the trial's files, then its
``trial.json`` as a create-once write (``exclusive``), then the ``_COMPLETE`` marker with the manifest. So:

* a trial the store records is never run again, whichever machine ran it: at the start the engine takes the
  store's records into the run folder (and writes the marker of a record a kill left without one);
* a trial finished here but not published (a kill between the local record and its upload) is published before
  anything runs, never rerun;
* of two engines racing on the same trial, the first record stored wins; the other takes it (no second record).

``campaign.json`` goes up when the run starts (and comes down first when only the store has it: the manifest's pin
applies across machines), the leaderboard, report and plots when it ends.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from anchorage import confined
from anchorage.runtime.local.trials import read_record
from anchorage.store import COMPLETE_MARKER, ArtifactStore
from anchorage.store.base import AlreadyStored, join
from anchorage.trials import TrialRecord, is_terminal
from anchorage.trials.records import parse_record

RECORD = "trial.json"
log = logging.getLogger(__name__)


class Publisher:
    """Publishes the trials of one campaign (``campaign`` ``""``: a lone Trial at the store's root)."""

    def __init__(self, store: ArtifactStore, campaign: str = "") -> None:
        self.store, self.campaign = store, campaign

    def prefix(self, trial: str) -> str:
        return join(self.campaign, trial)

    # ----- the store's records -------------------------------------------------------------------

    def stored_records(self) -> dict[str, TrialRecord]:
        """Trial name → the record the store holds (one listing, one GET per record; one this version cannot read
        counts as none); a record a kill left without its ``_COMPLETE`` marker gets it now."""
        keys = self.store.list(self.campaign)
        depth = len(self.campaign.split("/")) + 2 if self.campaign else 2
        complete = {k.rsplit("/", 2)[-2] for k in keys if k.endswith("/" + COMPLETE_MARKER)}
        records: dict[str, TrialRecord] = {}
        for key in keys:
            parts = key.split("/")
            if len(parts) != depth or parts[-1] != RECORD:
                continue
            trial = parts[-2]
            record = self._get_record(key)
            if record is None:
                continue
            if trial not in complete:
                self.store.mark_complete(self.prefix(trial))
            records[trial] = record
        return records

    def stored_record(self, trial: str) -> TrialRecord | None:
        """The store's record of one trial, if it holds one (its marker written when a kill left none)."""
        record = self._get_record(join(self.prefix(trial), RECORD))
        if record is not None and not self.store.is_complete(self.prefix(trial)):
            self.store.mark_complete(self.prefix(trial))
        return record

    def _get_record(self, key: str) -> TrialRecord | None:
        """The record stored at ``key`` (None when absent; see :func:`~anchorage.trials.records.parse_record` for one
        this version cannot read)."""
        try:
            raw = self.store.get_bytes(key)
        except FileNotFoundError:
            return None
        return parse_record(raw, self.store.uri_of(key))

    def fetch(self, trial: str, trial_dir: Path) -> None:
        """Make ``trial_dir`` a copy of the store's trial (whatever a killed run left there goes first)."""
        if trial_dir.exists():
            shutil.rmtree(trial_dir)
        prefix = self.prefix(trial) + "/"
        for key in self.store.list(self.prefix(trial)):
            relative = key[len(prefix):]
            if relative != COMPLETE_MARKER:
                self.store.get_file(key, trial_dir / relative)

    def retract(self, trial: str) -> None:
        """Remove a trial's record before it runs again (``--retry-infra``: its attempts stay in the new record)."""
        self.store.clear_complete(self.prefix(trial))
        self.store.delete(join(self.prefix(trial), RECORD))

    # ----- publishing ----------------------------------------------------------------------------

    def publish(self, trial: str, trial_dir: Path) -> TrialRecord | None:
        """Upload a finished trial: its files, its record (create-once), its marker. Returns the record another
        writer stored first (this one's is then dropped), else None."""
        prefix = self.prefix(trial)
        names, limits = confined.regular_files(trial_dir)
        if limits.truncated:
            log.warning("%s: more than %d entries; the rest is not published", trial_dir, limits.max_entries)
        with confined.folder_fd(trial_dir) as top:
            for relative in names:
                if relative == RECORD or os.path.basename(relative).startswith("."):
                    continue
                fd, _ = confined.open_regular(top, relative)
                try:
                    self.store.put_file(join(prefix, relative), Path(f"/proc/self/fd/{fd}"))
                finally:
                    os.close(fd)
            record = confined.read_bytes(top, RECORD, limit=confined.RECORD_LIMIT)
        theirs: TrialRecord | None = None
        try:
            self.store.put_bytes(join(prefix, RECORD), record, content_type="application/json", exclusive=True)
        except AlreadyStored:
            theirs = self._get_record(join(prefix, RECORD))
            log.warning("%s: another run stored this trial's record first; keeping that one", self.store.uri_of(prefix))
        self.store.mark_complete(prefix)
        return theirs

    def publish_files(self, directory: Path, names: list[str]) -> None:
        """Upload campaign-level files (``campaign.json``, leaderboard, report, ``plots/...``) that exist."""
        for name in names:
            path = directory / name
            if path.is_file() and not path.is_symlink():
                self.store.put_file(join(self.campaign, name), path)

    def pull_manifest(self, directory: Path) -> None:
        """Copy the store's ``campaign.json`` into a run folder that has none (another machine's run)."""
        target = directory / "campaign.json"
        if not target.exists() and self.store.exists(join(self.campaign, "campaign.json")):
            self.store.get_file(join(self.campaign, "campaign.json"), target)


@dataclass(frozen=True)
class TrialCopies:
    """One trial's two copies: its run folder, and (with a publisher) the store's. The rules that keep them in line
    live here alone, for a campaign's trials and a lone Trial alike: a finished record in the store wins; one
    finished only here goes up; a store that keeps failing costs the upload (listed, published by a rerun), never
    the trial's result."""

    trial: str
    folder: Path
    publisher: Publisher | None = None

    def settle(self, unpublished: list[str]) -> TrialRecord | None:
        """Before the trial runs: :meth:`settle_with` the store's record of it (one GET)."""
        stored = self.publisher.stored_record(self.trial) if self.publisher is not None else None
        return self.settle_with(stored, unpublished)

    def settle_with(self, stored: TrialRecord | None, unpublished: list[str]) -> TrialRecord | None:
        """Before the trial runs (``stored``: the store's record, if any; a campaign lists them all at once): the
        store's finished record comes into the folder (over whatever a killed run left), and one finished here that
        the store lacks goes up. The finished record, or None when the trial is still to run."""
        ours = read_record(self.folder)
        if self.publisher is not None and stored is not None and is_terminal(stored.phase):
            if ours != stored:
                self.publisher.fetch(self.trial, self.folder)
            return stored
        if ours is not None and is_terminal(ours.phase):
            return self.publish(ours, unpublished)
        return None

    def publish(self, record: TrialRecord, unpublished: list[str]) -> TrialRecord:
        """Publish the finished trial (nothing without a publisher); the record that counts: another run's, when
        it stored one first (the folder then takes it), else ``record``. A failed upload is added to
        ``unpublished`` and logged."""
        if self.publisher is None:
            return record
        try:
            theirs = self.publisher.publish(self.trial, self.folder)
            if theirs is not None:
                self.publisher.fetch(self.trial, self.folder)
        except Exception as exc:  # the store's failure (or a bug) costs this upload, never the run
            unpublished.append(self.trial)
            log.warning("trial %s is finished but not published: %s: %s", self.trial, type(exc).__name__, exc)
            return record
        return theirs or record


def outputs_of(directory: Path) -> list[str]:
    """The campaign-level files of a run folder, relative to it (plots included)."""
    names = ["campaign.json", "leaderboard.json", "leaderboard.csv", "leaderboard.md", "report.html"]
    plots = directory / "plots"
    if plots.is_dir():
        names += sorted(f"plots/{p.name}" for p in plots.iterdir() if p.is_file() and not p.is_symlink())
    return names
