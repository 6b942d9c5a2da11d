"""Reading finished (or running) campaigns from a runs folder or a store prefix — bounded, never following links.

Called by ``anchorage report`` (:mod:`anchorage.report.writing`), ``anchorage view`` (:mod:`anchorage.viewer`),
``anchorage compare`` and the exports (:mod:`anchorage.interop`). The layout is the same in both places
(docs/design-notes.md, "Run folder"): ``<root>/<campaign>/<trial>/{trial.json, score.json, transcript.jsonl,
agent/, verifier/, artifacts/}`` and ``<root>/<campaign>/campaign.json`` (the local engine) or
``<root>/<campaign>/leaderboard.json`` (the operator).

* :class:`LocalRuns` reads a folder through :mod:`anchorage.confined` (a trial folder holds what the agent
  wrote: no link is followed, every read is capped, log tails seek to the end).
* :class:`StoreRuns` reads an :class:`~anchorage.store.ArtifactStore` (``s3://bucket/prefix``): sizes are
  checked before a download and tails are range reads.
* Trial records are read through :class:`~anchorage.trials.records.TrialRecord`; a record that does not
  validate (written by another version) is kept as written, with the validation error beside it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from anchorage import confined
from anchorage.campaigns.aggregation import Leaderboard, TrialResult, leaderboard
from anchorage.campaigns.names import trial_name
from anchorage.errors import AnchorageError, InputError, did_you_mean
from anchorage.store import COMPLETE_MARKER, ArtifactStore, open_store
from anchorage.trials.records import TRANSCRIPT, TrialRecord

RECORD_LIMIT = confined.RECORD_LIMIT
TRANSCRIPT_LIMIT = 16 * 1024 * 1024
"""A transcript larger than this is read only up to it (the gateway caps each trial's transcript already)."""
LOG_WINDOW = 64 * 1024
"""Bytes of the end of an agent log that a page shows."""
LOGS = {"stdout": "agent/stdout.log", "stderr": "agent/stderr.log"}
PROFILES = "profiles"
"""A run's folder of rescorings (``anchorage rescore``): ``<campaign>/profiles/<profile>/``."""


@dataclass
class CampaignRun:
    """One campaign as read: its manifest (when stored), the trial records, and the leaderboard over them."""

    name: str
    location: str
    baseline: str | None
    manifest: dict[str, Any] | None
    planned: list[str]
    records: list[dict[str, Any]]
    problems: dict[str, str] = field(default_factory=dict)   # trial -> why its record is missing or invalid
    meta: dict[str, Any] = field(default_factory=dict)        # campaign.json as stored (empty when none)

    @property
    def title(self) -> str:
        """The campaign's own name (a rescored folder's too: ``demo``, not the profile folder ``strict``)."""
        name = ((self.manifest or {}).get("metadata") or {}).get("name") or self.meta.get("name")
        return str(name or self.name)

    @property
    def rescored(self) -> str | None:
        """``strict@1`` when this folder is a rescoring of a run (``anchorage rescore``), else None."""
        return str(self.meta.get("profile")) if self.meta.get("rescored_from") else None

    @property
    def board(self) -> Leaderboard:
        results = [TrialResult.from_record(r) for r in self.records if is_terminal_record(r)]
        return leaderboard(results, self.baseline, self.planned_cells())

    def planned_cells(self) -> list[tuple[str, str, int]] | None:
        """(entry, task, seed) of every planned trial this run knows the coordinates of (a record's, or the
        manifest's entries × tasks × seeds named as the engine names them); None without a stored plan."""
        if not self.meta.get("trials"):
            return None
        known = {str(r.get("name")): (str(r["entry"]), str(r["task"]), int(r["seed"])) for r in self.records}
        spec = (self.manifest or {}).get("spec") or {}
        missing = [t for t in self.planned if t not in known]
        if missing and isinstance(spec.get("seeds"), int):
            entries = [str(e.get("name")) for e in spec.get("entries") or [] if isinstance(e, dict)]
            tasks = {task for _, task, _ in known.values()} | {Path(str(t)).name for t in spec.get("tasks") or []}
            names = {trial_name(self.title, e, t, s): (e, t, s)
                     for e in entries for t in tasks for s in range(spec["seeds"])}
            known.update({t: names[t] for t in missing if t in names})
        return [known[t] for t in self.planned if t in known]

    def record(self, trial: str) -> dict[str, Any] | None:
        return next((r for r in self.records if r.get("name") == trial), None)

    def metadata(self) -> dict[str, Any]:
        """What made these numbers: dates, profiles, price snapshots, versions (as the records say)."""
        def values(*path: str) -> list[str]:
            found: set[str] = set()
            for record in self.records:
                value: Any = record
                for part in path:
                    value = value.get(part) if isinstance(value, dict) else None
                if value is not None:
                    found.add(str(value))
            return sorted(found)

        started, finished = values("started_at"), values("finished_at")
        return {"campaign": self.title, "location": self.location, "baseline": self.baseline,
                "started": started[0] if started else None, "finished": finished[-1] if finished else None,
                "profiles": values("scoring_profile"), "price_snapshots": values("versions", "price_snapshot"),
                "anchorage_versions": values("versions", "anchorage"), "scorers": values("versions", "scorer"),
                "drivers": values("driver"), "trials": len(self.records), "planned": len(self.planned),
                "rescored": (f"under {self.rescored} from {self.meta.get('rescored_from')} (no agent rerun)"
                             if self.rescored else None)}


def is_terminal_record(record: dict[str, Any]) -> bool:
    return record.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed")


def validated(data: Any) -> tuple[dict[str, Any], str | None]:
    """A record checked against :class:`TrialRecord` (kept as written: both drivers write ``to_json()``'s shape,
    so a valid record is that shape already), or as written with the validation error."""
    if not isinstance(data, dict):
        raise ValueError("a trial record must be a JSON object")
    try:
        TrialRecord.model_validate(data)
        return data, None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(record)'}: {e['msg']}" for e in exc.errors()[:5])
        return data, f"the record does not match this version's TrialRecord ({problems})"


class RunReadError(AnchorageError):
    """A file of a run that exists but cannot be shown (a link, too large, not a regular file, unreadable)."""


class Runs(ABC):
    """A place holding campaign runs; every read is bounded."""

    location: str

    @abstractmethod
    def campaigns(self) -> list[str]:
        """The campaigns found, sorted by name."""

    @abstractmethod
    def _campaign_meta(self, name: str) -> dict[str, Any] | None:
        """``campaign.json`` (local engine) or ``leaderboard.json``'s baseline (operator), None when neither."""

    @abstractmethod
    def _trial_names(self, name: str) -> list[str]:
        """Trial folders of the campaign (that may hold a ``trial.json``: one without is skipped when read)."""

    @abstractmethod
    def read(self, campaign: str, trial: str, relative: str, *, limit: int) -> bytes | None:
        """A file of a trial's folder (None when absent); :class:`RunReadError` when it cannot be shown."""

    @abstractmethod
    def tail(self, campaign: str, trial: str, relative: str, *, window: int = LOG_WINDOW) -> tuple[str, int | None]:
        """The last ``window`` bytes of a trial's file as text and the file's size (None when absent)."""

    @abstractmethod
    def files(self, campaign: str, trial: str) -> list[str]:
        """The regular files of a trial's folder (relative paths, sorted; links are never listed)."""

    @abstractmethod
    def profiles(self, campaign: str) -> list[str]:
        """The profiles the campaign was rescored under (``anchorage rescore``: ``<campaign>/profiles/<p>/``)."""

    @abstractmethod
    def _profile_runs(self, campaign: str) -> Runs:
        """The campaign's ``profiles/`` folder (or prefix) as runs whose campaigns are the profiles."""

    def rescored(self, campaign: str, profile: str) -> RescoredRuns:
        """The campaign rescored under ``profile`` (its records and score records; every other file is the
        run's own); an unknown profile is an InputError listing those there are."""
        found = self.profiles(campaign)
        if profile not in found:
            raise InputError(f"campaign {campaign!r} has no rescoring under profile {profile!r}",
                             hint=did_you_mean(profile, found) or (f"its profiles: {', '.join(found)}" if found else
                                                                   f"anchorage rescore RUN --profile {profile}"))
        return RescoredRuns(self, campaign, self._profile_runs(campaign), profile)

    def campaign(self, name: str) -> CampaignRun:
        """Read one campaign; an unknown name is an InputError listing what exists."""
        meta = self._campaign_meta(name)
        found = self._trial_names(name)
        if meta is None and not found:
            raise InputError(f"no campaign {name!r} in {self.location}",
                             hint=did_you_mean(name, self.campaigns()) or "run 'anchorage view' on the runs folder "
                             "to see the campaigns it holds")
        manifest = (meta or {}).get("manifest")
        baseline = (meta or {}).get("baseline")
        if baseline is None and isinstance(manifest, dict):
            baseline = (manifest.get("spec") or {}).get("baseline")
        planned = [str(t) for t in (meta or {}).get("trials") or []]
        names = planned + sorted(set(found) - set(planned))
        records: list[dict[str, Any]] = []
        problems: dict[str, str] = {}
        for trial, data in self._records(name, names):
            try:
                if isinstance(data, RunReadError):
                    raise data
                if data is None:
                    continue
                record, problem = validated(from_json(data))   # pydantic's parser: 3× json.loads on records
            except RunReadError as exc:
                problems[trial] = str(exc)
                continue
            except (ValueError, RecursionError) as exc:
                problems[trial] = f"trial.json is not a valid record: {exc}"
                continue
            if problem:
                problems[trial] = problem
            if not all(k in record for k in ("entry", "task", "seed")):
                problems[trial] = "trial.json lacks entry, task or seed"
                continue
            records.append(record)
        return CampaignRun(name, self.location, baseline, manifest if isinstance(manifest, dict) else None,
                           planned or names, records, problems, dict(meta or {}))

    def _records(self, campaign: str, trials: list[str]) -> Iterator[tuple[str, bytes | RunReadError | None]]:
        """Each trial's ``trial.json`` as bytes (None when absent, the error when it cannot be read)."""
        for trial in trials:
            try:
                yield trial, self.read(campaign, trial, "trial.json", limit=RECORD_LIMIT)
            except RunReadError as exc:
                yield trial, exc

    def json(self, campaign: str, trial: str, relative: str) -> Any:
        """A JSON file of a trial (None when absent); :class:`RunReadError` when unreadable or invalid."""
        data = self.read(campaign, trial, relative, limit=RECORD_LIMIT)
        if data is None:
            return None
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise RunReadError(f"{relative} of {trial} is not valid JSON: {exc}") from None

    def transcript(self, campaign: str, trial: str, *, limit: int = TRANSCRIPT_LIMIT) -> Transcript | None:
        """The trial's ``transcript.jsonl`` (None when it was not captured), read up to ``limit`` bytes."""
        try:
            data = self.read(campaign, trial, TRANSCRIPT, limit=limit)
            cut = False
        except RunReadError as exc:
            if "limit" not in str(exc):
                raise
            data = self.tail(campaign, trial, TRANSCRIPT, window=limit)[0].encode("utf-8")
            cut = True
        if data is None:
            return None
        lines: list[dict[str, Any]] = []
        bad = 0
        for line in data.decode("utf-8", "replace").splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(item, dict):
                lines.append(item)
        return Transcript(lines, cut, bad)


@dataclass(frozen=True)
class Transcript:
    """The gateway's per-request lines of one trial (``request``, ``response`` or ``response_sse``, ``usage``)."""

    lines: list[dict[str, Any]]
    cut: bool          # the file was larger than the read limit: only its end was read
    unreadable: int    # lines that were not JSON


class LocalRuns(Runs):
    """A runs folder (``runs/``) or one campaign's folder (``runs/demo``) on this machine."""

    def __init__(self, root: Path) -> None:
        root = root.resolve()
        if not root.is_dir():
            raise InputError(f"{root} is not a folder", hint="pass a runs folder (runs/) or a campaign's run folder")
        self.single = (root / "campaign.json").is_file()
        self.root = root.parent if self.single else root
        self.only = root.name if self.single else None
        self.location = str(root)

    def campaigns(self) -> list[str]:
        if self.only is not None:
            return [self.only]
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and not p.is_symlink() and (p / "campaign.json").is_file())

    def _folder(self, name: str) -> Path:
        if "/" in name or name in ("", ".", "..") or (self.only is not None and name != self.only):
            raise InputError(f"no campaign {name!r} in {self.location}")
        return self.root / name

    def _campaign_meta(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads(confined.read_bytes(self._folder(name), "campaign.json", limit=RECORD_LIMIT))
        except confined.ConfinedError as exc:
            if exc.reason == "missing":
                return None
            raise RunReadError(f"{name}/campaign.json: {exc.message}") from None
        except ValueError as exc:
            raise RunReadError(f"{name}/campaign.json is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            return None
        data.setdefault("baseline", None)
        return data

    def _trial_names(self, name: str) -> list[str]:
        folder = self._folder(name)
        if not folder.is_dir():
            return []
        with os.scandir(folder) as entries:
            # real folders (no link): whether one holds a trial.json is found when it is read (the confined read
            # says "missing" and the folder is skipped), so listing 10,000 trials costs no stat of each
            return sorted(entry.name for entry in entries if entry.is_dir(follow_symlinks=False)
                          and not entry.name.startswith(".") and entry.name not in (PROFILES, "plots"))

    def _records(self, campaign: str, trials: list[str]) -> Iterator[tuple[str, bytes | RunReadError | None]]:
        """One descriptor of the campaign's folder for every record (a campaign of 10,000 trials reads in ~1 s)."""
        folder = self._folder(campaign)
        if not folder.is_dir() or folder.is_symlink():
            yield from super()._records(campaign, trials)
            return
        with confined.folder_fd(folder) as fd:
            for trial in trials:
                _check_trial(trial)
                try:
                    yield trial, confined.read_bytes(fd, f"{trial}/trial.json", limit=RECORD_LIMIT)
                except confined.ConfinedError as exc:
                    yield trial, (None if exc.reason == "missing" else RunReadError(f"{trial}/{exc.message}"))

    def read(self, campaign: str, trial: str, relative: str, *, limit: int) -> bytes | None:
        _check_trial(trial)
        try:
            return confined.read_bytes(self._folder(campaign), f"{trial}/{relative}", limit=limit)
        except confined.ConfinedError as exc:
            if exc.reason == "missing":
                return None
            raise RunReadError(f"{trial}/{exc.message}" if not exc.message.startswith(trial) else exc.message) from None

    def tail(self, campaign: str, trial: str, relative: str, *, window: int = LOG_WINDOW) -> tuple[str, int | None]:
        _check_trial(trial)
        folder = self._folder(campaign)
        info = confined.lstat(folder, f"{trial}/{relative}")
        if info is None:
            return "", None
        return confined.tail(folder, f"{trial}/{relative}", window=window), info.st_size

    def files(self, campaign: str, trial: str) -> list[str]:
        _check_trial(trial)
        folder = self._folder(campaign) / trial
        if not folder.is_dir() or folder.is_symlink():
            return []
        return confined.regular_files(folder)[0]

    def profiles(self, campaign: str) -> list[str]:
        folder = self._folder(campaign) / PROFILES
        if not folder.is_dir() or folder.is_symlink():
            return []
        return sorted(p.name for p in folder.iterdir()
                      if p.is_dir() and not p.is_symlink() and confined.lstat(p, "campaign.json") is not None)

    def _profile_runs(self, campaign: str) -> Runs:
        return LocalRuns(self._folder(campaign) / PROFILES)


class StoreRuns(Runs):
    """Campaigns under a store prefix (``s3://bucket/runs``); the listing is cached for ``ttl`` seconds."""

    def __init__(self, store: ArtifactStore, *, ttl: float = 10.0) -> None:
        self.store, self.ttl = store, ttl
        self.location = store.uri
        self._keys: list[str] = []
        self._listed = -1.0
        self._lock = threading.Lock()

    def keys(self) -> list[str]:
        with self._lock:
            if time.monotonic() - self._listed > self.ttl:
                self._keys = self.store.list("")
                self._listed = time.monotonic()
            return self._keys

    def campaigns(self) -> list[str]:
        names = {key.split("/")[0] for key in self.keys()
                 if (key.count("/") == 1 and key.endswith(("/campaign.json", "/leaderboard.json")))
                 or (key.count("/") == 2 and key.endswith("/trial.json"))}
        return sorted(n for n in names if not n.startswith(("_", ".")))

    def _campaign_meta(self, name: str) -> dict[str, Any] | None:
        _check_trial(name)
        for key in (f"{name}/campaign.json", f"{name}/leaderboard.json"):
            if key in self.keys():
                data = self._get(key, RECORD_LIMIT)
                try:
                    meta = json.loads(data) if data is not None else None
                except ValueError as exc:
                    raise RunReadError(f"{key} is not valid JSON: {exc}") from None
                if isinstance(meta, dict):
                    meta.setdefault("baseline", None)
                    return meta if key.endswith("campaign.json") else {"baseline": meta.get("baseline")}
        return None

    def _trial_names(self, name: str) -> list[str]:
        return sorted(key.split("/")[1] for key in self.keys()
                      if key.startswith(f"{name}/") and key.count("/") == 2 and key.endswith("/trial.json"))

    def _get(self, key: str, limit: int) -> bytes | None:
        try:
            size = self.store.describe(key).get("size")
        except FileNotFoundError:
            return None
        if isinstance(size, int) and size > limit:
            raise RunReadError(f"{key} is {size} bytes, over the {limit}-byte limit")
        try:
            return self.store.get_bytes(key)
        except FileNotFoundError:
            return None

    def read(self, campaign: str, trial: str, relative: str, *, limit: int) -> bytes | None:
        _check_trial(campaign)
        _check_trial(trial)
        return self._get(f"{campaign}/{trial}/{relative}", limit)

    def tail(self, campaign: str, trial: str, relative: str, *, window: int = LOG_WINDOW) -> tuple[str, int | None]:
        _check_trial(campaign)
        _check_trial(trial)
        try:
            data, size = self.store.get_tail(f"{campaign}/{trial}/{relative}", window)
        except FileNotFoundError:
            return "", None
        return data.decode("utf-8", "replace"), size

    def files(self, campaign: str, trial: str) -> list[str]:
        _check_trial(campaign)
        _check_trial(trial)
        prefix = f"{campaign}/{trial}/"
        return sorted(key[len(prefix):] for key in self.keys() if key.startswith(prefix) and not key.endswith("/")
                      and key != f"{prefix}{COMPLETE_MARKER}")   # the store's own marker, not a trial's file

    def profiles(self, campaign: str) -> list[str]:
        _check_trial(campaign)
        prefix = f"{campaign}/{PROFILES}/"
        return sorted({key[len(prefix):].split("/")[0] for key in self.keys()
                       if key.startswith(prefix) and key.count("/") == 3 and key.endswith("/campaign.json")})

    def _profile_runs(self, campaign: str) -> Runs:
        return StoreRuns(open_store(f"{self.store.uri.rstrip('/')}/{campaign}/{PROFILES}"), ttl=self.ttl)


class RescoredRuns(Runs):
    """A campaign rescored under another profile, read as one campaign named after the profile: its trial
    records and score records from ``<campaign>/profiles/<profile>/``, every other file of a trial (logs,
    transcript, artifacts, prompt) from the run itself (a rescoring reruns no agent)."""

    RESCORED = ("trial.json", "score.json")

    def __init__(self, original: Runs, campaign: str, profiles: Runs, profile: str) -> None:
        self.original, self.of, self.inner, self.profile = original, campaign, profiles, profile
        self.location = f"{original.location} ({campaign} rescored under {profile})"

    def campaigns(self) -> list[str]:
        return [self.profile]

    def _campaign_meta(self, name: str) -> dict[str, Any] | None:
        return self.inner._campaign_meta(self.profile)

    def _trial_names(self, name: str) -> list[str]:
        return self.inner._trial_names(self.profile)

    def read(self, campaign: str, trial: str, relative: str, *, limit: int) -> bytes | None:
        if relative in self.RESCORED:
            return self.inner.read(self.profile, trial, relative, limit=limit)
        return self.original.read(self.of, trial, relative, limit=limit)

    def tail(self, campaign: str, trial: str, relative: str, *, window: int = LOG_WINDOW) -> tuple[str, int | None]:
        if relative in self.RESCORED:
            return self.inner.tail(self.profile, trial, relative, window=window)
        return self.original.tail(self.of, trial, relative, window=window)

    def files(self, campaign: str, trial: str) -> list[str]:
        return self.original.files(self.of, trial)

    def profiles(self, campaign: str) -> list[str]:
        return []

    def _profile_runs(self, campaign: str) -> Runs:
        raise InputError("a rescored campaign is not rescored again", hint="rescore the original run")


def _check_trial(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\x00" in name:
        raise InputError(f"invalid name {name!r}", hint="campaign and trial names are single path segments")


def open_runs(where: str | Path) -> Runs:
    """``s3://bucket/prefix`` (through :func:`anchorage.store.open_store`) or a local folder."""
    text = str(where)
    if text.startswith("s3://"):
        return StoreRuns(open_store(text))
    if text.startswith("file://"):
        text = text.removeprefix("file://")
    return LocalRuns(Path(text))


def locate_campaign(where: str) -> tuple[Runs, str]:
    """The place and the campaign's name of a run folder (``runs/demo``) or a store prefix
    (``s3://bucket/runs/demo``); used by the commands that take one campaign (compare, export)."""
    if where.startswith("s3://"):
        parent, _, name = where.rstrip("/").rpartition("/")
        return StoreRuns(open_store(parent)), name
    path = Path(where.removeprefix("file://"))
    runs = LocalRuns(path)
    return runs, runs.campaigns()[0] if runs.only is not None else path.name


def open_campaign(where: str) -> CampaignRun:
    """One campaign read from where :func:`locate_campaign` finds it."""
    runs, name = locate_campaign(where)
    return runs.campaign(name)
