"""The viewer's aiohttp application: one handler per page, each a thin wrapper over a pure page builder.

Called by ``anchorage view`` (:mod:`anchorage.commands.view`) and the viewer's tests. Reads go to a
worker thread (a store read blocks); a campaign's records are cached for ``ttl`` seconds, so a page of a
running campaign is at most that old. Everything shown is escaped (agents wrote much of it) and pages
carry a Content-Security-Policy that allows only their own inline style and script.

URLs (percent-encoded names):

* ``/`` — the campaigns (and the profiles each was rescored under)
* ``/campaigns/{campaign}/`` — metadata, leaderboard with its notes, per-task, per-seed and F tables, trials (a
  data table: 10,000 trials travel as compact JSON and are drawn a page at a time); ``{campaign}`` may be
  ``name@profile``: the campaign rescored under that profile (``anchorage rescore``; a switch on every page)
* ``/campaigns/{campaign}/entries/{entry}/`` — one entry: its tasks and trials
* ``/campaigns/{campaign}/entries/{entry}/tasks/{task}`` — one cell: its seeds, metrics and gates side by side
* ``/campaigns/{campaign}/trials/{trial}`` — one trial (the Robust BO-Eval the board used beside the trial's own,
  its files)
* ``/campaigns/{campaign}/trials/{trial}/show/{path}`` — one of the trial's files (the scored answer, the prompt, …)
  as a page: confined, capped reads; JSON pretty-printed; agent-written text made readable
* ``/campaigns/{campaign}/trials/{trial}/transcript`` — its model calls
* ``/campaigns/{campaign}/trials/{trial}/files/{trial.json|score.json|transcript.jsonl|stdout.log|stderr.log}``
  — the file as stored (capped; logs: their end)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from aiohttp import web

from anchorage.campaigns.aggregation import Leaderboard
from anchorage.errors import AnchorageError, InputError, did_you_mean
from anchorage.report import pages
from anchorage.report.pages import Cell, CellLike, esc, link
from anchorage.report.runs import LOG_WINDOW, LOGS, RECORD_LIMIT, CampaignRun, RunReadError, Runs
from anchorage.text import decode, readable
from anchorage.trials.records import TRANSCRIPT, anchorage_version

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PROFILE_SEPARATOR = "@"
"""``demo@strict``: campaign ``demo`` rescored under ``strict`` (a campaign's name never holds an ``@``)."""
SHOW_LIMIT = 4 * 1024 * 1024
"""Bytes of a trial's file that its page shows (a larger file: its end)."""
SHOWN_FILES = 200
"""Files a trial page lists (a trial may have written thousands)."""
RAW_FILES = {"trial.json": "trial.json", "score.json": "score.json", TRANSCRIPT: TRANSCRIPT, **{
    f"{name}.log": path for name, path in LOGS.items()}}


def href(*parts: str, trailing: bool = False) -> str:
    """A viewer URL from path segments (each percent-encoded; ``@`` kept: ``demo@strict``)."""
    return "/" + "/".join(quote(p, safe="@") for p in parts) + ("/" if trailing else "")


def campaign_href(campaign: str) -> str:
    return href("campaigns", campaign, trailing=True)


def trial_href(campaign: str, trial: str) -> str:
    return href("campaigns", campaign, "trials", trial)


def entry_href(campaign: str, entry: str) -> str:
    return href("campaigns", campaign, "entries", entry, trailing=True)


def cell_href(campaign: str, entry: str, task: str) -> str:
    return href("campaigns", campaign, "entries", entry, "tasks", task)


def show_href(campaign: str, trial: str, path: str) -> str:
    """A trial's file shown as a page (its path's segments kept as segments)."""
    return href("campaigns", campaign, "trials", trial, "show") + "/" + quote(path, safe="/")


class NotFound(AnchorageError):
    """A name in a URL that the runs do not hold."""


class Viewer:
    """The runs being viewed and a short-lived cache of campaigns read from them."""

    def __init__(self, runs: Runs, *, ttl: float = 5.0) -> None:
        self.runs, self.ttl = runs, ttl
        self._cache: dict[str, tuple[float, CampaignRun, Leaderboard]] = {}
        self._lock = threading.Lock()
        self.generator = f"anchorage {anchorage_version()} (view)"

    def source(self, name: str) -> tuple[Runs, str]:
        """Where a campaign of the URL is read: ``demo`` in the runs, ``demo@strict`` its rescoring under strict."""
        campaign, at, profile = name.partition(PROFILE_SEPARATOR)
        if not at:
            return self.runs, name
        try:
            return self.runs.rescored(campaign, profile), profile
        except InputError as exc:
            raise NotFound(exc.message, hint=exc.hint) from None

    def campaign(self, name: str) -> CampaignRun:
        return self._load(name)[0]

    def board(self, name: str) -> Leaderboard:
        return self._load(name)[1]

    def _load(self, name: str) -> tuple[CampaignRun, Leaderboard]:
        with self._lock:
            hit = self._cache.get(name)
            if hit is not None and time.monotonic() - hit[0] < self.ttl:
                return hit[1], hit[2]
        runs, key = self.source(name)
        try:
            run = runs.campaign(key)
        except InputError as exc:
            raise NotFound(exc.message, hint=exc.hint) from None
        board = run.board
        with self._lock:
            self._cache[name] = (time.monotonic(), run, board)
        return run, board

    def record(self, run: CampaignRun, trial: str) -> dict[str, Any]:
        record = run.record(trial)
        if record is None:
            names = [str(r.get("name")) for r in run.records]
            raise NotFound(f"no trial {trial!r} in campaign {run.name}", hint=did_you_mean(trial, names))
        return record

    # ----- pages ---------------------------------------------------------------------------------------------

    def index(self) -> str:
        rows: list[list[CellLike]] = []
        for name in self.runs.campaigns():
            for shown in [name, *(f"{name}{PROFILE_SEPARATOR}{p}" for p in self._profiles(name))]:
                try:
                    run, board = self._load(shown)
                except (NotFound, RunReadError) as exc:
                    rows.append([Cell(shown, left=True), Cell(f"cannot be read: {exc}", cls="bad", left=True)])
                    continue
                meta = run.metadata()
                best = next((row for row in board.rows if row.scored), None)
                rows.append([Cell(shown, href=campaign_href(shown)),
                             Cell(f"{meta['trials']}/{meta['planned']}", meta["trials"]),
                             Cell(", ".join(r.entry for r in board.rows), left=True),
                             Cell(best.entry if best else "—", left=True),
                             pages.number_cell(best.o_eval_mean if best else None),
                             Cell(board.profile + (" (rescored)" if run.rescored else ""), left=True),
                             Cell(str(meta["started"] or "—"), left=True),
                             Cell(str(meta["finished"] or "—"), left=True)])
        body = (f"<h1>Campaigns in {esc(self.runs.location)}</h1>"
                + pages.table("campaigns", ["campaign", "trials finished/planned", "entries", "best entry",
                                            "its O-Eval", "profile", "started", "finished"], rows, left=1)
                + "<p class='note'>A campaign rescored under another profile (anchorage rescore) is listed as "
                  "campaign@profile.</p>"
                + f"<p class='note'>{esc(self.generator)}</p>")
        return pages.document("Anchorage — campaigns", body, crumbs=[("Anchorage", "/")])

    def _profiles(self, name: str) -> list[str]:
        try:
            return self.runs.profiles(name)
        except (InputError, RunReadError):
            return []

    def profile_switch(self, name: str, run: CampaignRun, board: Leaderboard,
                       here: Callable[[str], str] | None = None) -> str:
        """"Scoring profile: paper@1 (as run) · strict@1 (rescored)": links to the same page under each profile."""
        base = name.partition(PROFILE_SEPARATOR)[0]
        profiles = self._profiles(base)
        if not profiles:
            return ""
        target = here or campaign_href
        choices = [(base, "as run")] + [(f"{base}{PROFILE_SEPARATOR}{p}", f"rescored under {p}") for p in profiles]
        links = " · ".join(f"<b>{esc(label)}</b>" if shown == name else link(label, target(shown))
                           for shown, label in choices)
        return f"<p class='switch'>Scoring profile {esc(board.profile)}. Show: {links}</p>"

    def campaign_page(self, name: str) -> str:
        run, board = self._load(name)
        parts = [f"<h1>Campaign {esc(run.title)}" + (f" <span class='muted'>rescored under {esc(run.rescored)}</span>"
                                                     if run.rescored else "") + "</h1>",
                 self.profile_switch(name, run, board), pages.metadata(run.metadata(), self.generator),
                 f"<h2>Leaderboard — scoring profile {esc(board.profile)}</h2>",
                 pages.leaderboard_table(board, lambda e: entry_href(name, e)),
                 f"<p class='note'>Standard deviation: {esc(board.std)}. {esc(board.ranking)}</p>"]
        for metric, title in (("o_eval", "O-Eval"), ("bo_eval", "Robust BO-Eval")):
            parts += [f"<h2>Per task: {title} (mean over seeds)</h2>",
                      pages.per_task_table(board, metric, lambda e, t: cell_href(name, e, t))]
        parts += ["<h2 id='per-seed'>Per seed</h2>",
                  pages.per_seed_table(board, href("campaigns", name, "entries") + "/{}/"),
                  "<h2>F per task</h2>", pages.f_table(board), "<h2>Trials</h2>",
                  pages.trials_table(run.records, lambda t: trial_href(name, t),
                                     link=href("campaigns", name, "trials") + "/{}"), _problems(run)]
        return pages.document(f"{name} — Anchorage", "".join(parts), crumbs=self._crumbs(name))

    def entry_page(self, name: str, entry: str) -> str:
        run, board = self._load(name)
        mine = [r for r in run.records if r.get("entry") == entry]
        row = next((r for r in board.rows if r.entry == entry), None)
        if row is None:
            raise NotFound(f"no entry {entry!r} in campaign {name}",
                           hint=did_you_mean(entry, [r.entry for r in board.rows]))
        rows: list[list[CellLike]] = []
        for task in board.tasks:
            cell = board.per_task[task].get(entry)
            seeds = [r for r in mine if r.get("task") == task]
            why, bo_why = board.cell_reason(task, entry) or "", board.cell_reason(task, entry, "bo_eval") or ""
            rows.append([Cell(task, href=cell_href(name, entry, task)),
                         Cell(pages.num(cell.o_eval if cell else None), cell.o_eval if cell else None, title=why),
                         Cell(pages.num(cell.bo_eval if cell else None, sign=True), cell.bo_eval if cell else None,
                              title=bo_why),
                         Cell(str(cell.seeds if cell else 0), cell.seeds if cell else 0),
                         Cell(str(len(seeds)), len(seeds)),
                         Cell(str(sum(1 for r in seeds if (r.get("score") or {}).get("hard_gate_failed")))),
                         Cell(why or (bo_why and f"BO-Eval: {bo_why}"), left=True, cls="warn" if why else "")])
        seeds_rows: list[list[CellLike]] = [
            [Cell(str(s.seed), s.seed), pages.number_cell(s.o_eval), pages.number_cell(s.bo_eval, sign=True),
             Cell(f"{s.tasks}/{row.tasks}", s.tasks), Cell(f"{s.cost_usd:.4f}", s.cost_usd)] for s in row.per_seed]
        summary = (f"<p class='warn'>— {esc(row.no_score)}</p>" if row.no_score else
                   f"<p class='note'>O-Eval {esc(pages.num(row.o_eval_mean))} ± {esc(pages.num(row.o_eval_std))}, "
                   f"Robust BO-Eval {esc(pages.num(row.bo_eval_mean, sign=True))} ± {esc(pages.num(row.bo_eval_std))} "
                   f"over {row.seeds} seed(s); {row.cells_scored} of {row.cells_expected} planned cells scored; total "
                   f"cost ${row.total_cost_usd:.4f}.</p>")
        parts = [f"<h1>Entry {esc(entry)} <span class='muted'>in {esc(name)}</span></h1>",
                 self.profile_switch(name, run, board, lambda shown: entry_href(shown, entry)), summary,
                 pages.table("tasks", ["task", "O-Eval", "Robust BO-Eval", "scored seeds", "trials",
                                       "hard gate failed", "why —"], rows),
                 "<h2>Per seed</h2>",
                 pages.table("entry-seeds", ["seed", "O-Eval", "Robust BO-Eval", "tasks scored", "cost USD"],
                             seeds_rows, left=0, filterable=False,
                             note=esc("Each seed's mean over its scored tasks (Robust BO-Eval against the board's F)."))
                 if seeds_rows else "",
                 "<h2>Trials</h2>", pages.trials_table(mine, lambda t: trial_href(name, t),
                                                       link=href("campaigns", name, "trials") + "/{}")]
        return pages.document(f"{entry} — {name}", "".join(parts),
                              crumbs=[*self._crumbs(name), (entry, entry_href(name, entry))])

    def cell_page(self, name: str, entry: str, task: str) -> str:
        run, board = self._load(name)
        trials = sorted((r for r in run.records if r.get("entry") == entry and r.get("task") == task),
                        key=lambda r: int(r.get("seed") or 0))
        if not trials:
            raise NotFound(f"no trial of entry {entry!r} on task {task!r} in campaign {name}",
                           hint=did_you_mean(task, {str(r.get("task")) for r in run.records}))
        scores = {str(r["name"]): self._score(name, str(r["name"]))[0] for r in trials}
        seeds = [f"seed {r.get('seed')}" for r in trials]
        extra = [pages.Column("BO-Eval (board)", "num", sign=True)]
        parts = [f"<h1>{esc(entry)} × {esc(task)} <span class='muted'>in {esc(name)}</span></h1>",
                 self.profile_switch(name, run, board, lambda shown: cell_href(shown, entry, task)),
                 "<h2>Seeds</h2>",
                 pages.trials_table(trials, lambda t: trial_href(name, t), "seeds",
                                    link=href("campaigns", name, "trials") + "/{}", extra=extra,
                                    extra_values=lambda r: [pages.board_bo(r, board)[0]],
                                    note=esc(f"BO-Eval (board): against the board's F — {board.f_rule}.")),
                 "<h2>Metrics (value / reward per seed)</h2>",
                 _side_by_side(trials, scores, seeds, "metrics", "path", _metric_text),
                 "<h2>Gates (status per seed)</h2>",
                 _side_by_side(trials, scores, seeds, "gates", "name", _gate_text)]
        return pages.document(f"{entry} × {task} — {name}", "".join(parts), crumbs=[
            *self._crumbs(name), (entry, entry_href(name, entry)), (task, cell_href(name, entry, task))])

    def trial_page(self, name: str, trial: str) -> str:
        run, board = self._load(name)
        record = self.record(run, trial)
        runs, key = self.source(name)
        score, problem = self._score(name, trial)
        problem = problem or run.problems.get(trial)
        logs = [(f"{log}.log", *runs.tail(key, trial, path, window=LOG_WINDOW)) for log, path in LOGS.items()]
        transcript = href("campaigns", name, "trials", trial, "transcript")
        raw = " · ".join(f"<a href='{esc(href('campaigns', name, 'trials', trial, 'files', f))}'>{esc(f)}</a>"
                         for f in RAW_FILES)
        body = (f"<h1>Trial {esc(trial)}</h1>"
                + self.profile_switch(name, run, board, lambda shown: trial_href(shown, trial))
                + pages.trial_detail(record, score, problem=problem, logs=logs, log_window=LOG_WINDOW,
                                     transcript_href=transcript, board=board,
                                     files=self._files_block(name, trial, record))
                + f"<p class='note'>Files as stored: {raw}</p>")
        entry, task = str(record.get("entry")), str(record.get("task"))
        return pages.document(f"{trial} — {name}", body, crumbs=[
            *self._crumbs(name), (entry, entry_href(name, entry)), (task, cell_href(name, entry, task)),
            (f"seed {record.get('seed')}", trial_href(name, trial))])

    def _files_block(self, name: str, trial: str, record: Mapping[str, Any]) -> str:
        """The trial's files, each opening as a page (:meth:`show_page`); the scored answer first."""
        runs, key = self.source(name)
        try:
            found = runs.files(key, trial)
        except (InputError, RunReadError) as exc:
            return f"<h3>Files</h3><p class='warn'>The trial's files cannot be listed: {esc(exc)}</p>"
        scored = str((record.get("artifact") or {}).get("path") or "")
        ordered = sorted(found, key=lambda f: (f != scored, not f.startswith("artifacts/"), f))
        items = "".join(f"<li>{link(f, show_href(name, trial, f))}"
                        + (" <b>— the scored answer</b>" if f == scored else "") + "</li>" for f in ordered[:SHOWN_FILES])
        more = (f"<li class='muted'>… and {len(ordered) - SHOWN_FILES} more</li>" if len(ordered) > SHOWN_FILES else "")
        none = "" if scored else "<p class='note'>No artifact was scored (see the outcome above).</p>"
        return f"<h3>Files</h3>{none}<ul class='files'>{items}{more}</ul>"

    def show_page(self, name: str, trial: str, path: str) -> str:
        """One file of a trial as a page: read confined and capped (its end when larger), JSON pretty-printed,
        everything an agent wrote made readable."""
        run, _ = self._load(name)
        record = self.record(run, trial)
        runs, key = self.source(name)
        if not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            raise NotFound(f"no file {path!r} in trial {trial}")
        listed = runs.files(key, trial)
        if path not in listed:
            raise NotFound(f"no file {path!r} in trial {trial}", hint=did_you_mean(path, listed))
        note = ""
        try:
            data = runs.read(key, trial, path, limit=SHOW_LIMIT)
        except RunReadError as exc:
            if "limit" not in str(exc):
                raise
            text, size = runs.tail(key, trial, path, window=SHOW_LIMIT)
            data, note = text.encode("utf-8"), f"The file is {size} bytes: its last {SHOW_LIMIT} are shown."
        if data is None:
            raise NotFound(f"trial {trial} has no {path}")
        body = _file_text(data)
        scored = path == str((record.get("artifact") or {}).get("path") or "")
        parts = [f"<h1>{esc(path)} <span class='muted'>of {esc(trial)}</span></h1>",
                 "<p class='note'>" + ("The answer this trial was scored on. " if scored else "")
                 + f"{len(data)} bytes as read (confined to the trial's folder; control sequences removed, "
                   f"invalid text shown as \N{REPLACEMENT CHARACTER}). {esc(note)}</p>", body]
        return pages.document(f"{path} — {trial}", "".join(parts), crumbs=[
            *self._crumbs(name), (trial, trial_href(name, trial)), (path, show_href(name, trial, path))])

    def transcript_page(self, name: str, trial: str) -> str:
        run = self.campaign(name)
        record = self.record(run, trial)
        runs, key = self.source(name)
        try:
            transcript = runs.transcript(key, trial)
        except RunReadError as exc:
            body = f"<p class='bad'>The transcript cannot be shown: {esc(exc)}</p>"
        else:
            if transcript is None:
                why = (record.get("transcript") or {}).get("error") or (
                    "transcripts were off for this trial (turn them on with transcripts: true on the campaign, "
                    "the entry or the Trial)")
                body = f"<p class='note'>No transcript: {esc(why)}.</p>"
            else:
                body = pages.transcript_view(transcript.lines, cut=transcript.cut, unreadable=transcript.unreadable)
        return pages.document(f"transcript — {trial}", f"<h1>Transcript of {esc(trial)}</h1>{body}", crumbs=[
            *self._crumbs(name), (trial, trial_href(name, trial)),
            ("transcript", href("campaigns", name, "trials", trial, "transcript"))])

    def raw_file(self, name: str, trial: str, file: str) -> tuple[bytes, str]:
        run = self.campaign(name)
        self.record(run, trial)
        runs, key = self.source(name)
        relative = RAW_FILES.get(file)
        if relative is None:
            raise NotFound(f"no file {file!r} is shown", hint=did_you_mean(file, RAW_FILES))
        kind = "application/json" if file.endswith(".json") else "text/plain"
        if file.endswith(".log"):
            text, size = runs.tail(key, trial, relative, window=LOG_WINDOW)
            if size is None:
                raise NotFound(f"{trial} has no {relative}")
            return readable(text).encode("utf-8"), kind
        data = runs.read(key, trial, relative, limit=RECORD_LIMIT)
        if data is None:
            raise NotFound(f"{trial} has no {relative}")
        return data, kind

    # ----- helpers -------------------------------------------------------------------------------------------

    def _crumbs(self, name: str) -> list[tuple[str, str | None]]:
        return [("Anchorage", "/"), (name, campaign_href(name))]

    def _score(self, name: str, trial: str) -> tuple[dict[str, Any] | None, str | None]:
        runs, key = self.source(name)
        try:
            score = runs.json(key, trial, "score.json")
        except RunReadError as exc:
            return None, str(exc)
        return (score if isinstance(score, dict) else None), None


def _file_text(data: bytes) -> str:
    """A file's bytes as a ``<pre>``: JSON pretty-printed, other text as written (both made readable); a file with
    NUL bytes is binary and not shown."""
    if b"\x00" in data[:8192]:
        return "<p class='note'>A binary file: not shown.</p>"
    text = decode(data)
    with contextlib.suppress(ValueError, RecursionError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return f"<pre class='file'>{esc(text)}</pre>"


def _problems(run: CampaignRun) -> str:
    if not run.problems:
        return ""
    items = "".join(f"<li>{esc(t)}: {esc(p)}</li>" for t, p in sorted(run.problems.items()))
    return f"<h2>Records with problems</h2><ul class='note'>{items}</ul>"


def _metric_text(item: Mapping[str, Any]) -> Cell:
    status = str(item.get("status") or "")
    text = f"{pages.general(item.get('value'))} / {pages.num(item.get('reward'))}"
    return Cell(text if status in ("scored", "excluded") else f"{text} ({status})", item.get("reward"),
                cls="" if status in ("scored", "excluded") else "bad", title=str(item.get("reason") or ""))


def _gate_text(item: Mapping[str, Any]) -> Cell:
    status = str(item.get("status"))
    cls = "bad" if status == "failed" and item.get("severity") == "hard" else ("warn" if status != "passed" else "ok")
    return Cell(status, status, cls=cls, title=str(item.get("message") or ""), left=True)


def _side_by_side(trials: list[dict[str, Any]], scores: Mapping[str, dict[str, Any] | None], seeds: list[str],
                  key: str, label: str, text: Callable[[Mapping[str, Any]], Cell]) -> str:
    """One row per metric (or gate), one column per seed; gates failed anywhere come first, with each seed's
    message."""
    names: list[str] = []
    by_seed: list[dict[str, Mapping[str, Any]]] = []
    for trial in trials:
        items = {str(i.get(label)): i for i in (scores.get(str(trial["name"])) or {}).get(key) or []}
        by_seed.append(items)
        names += [n for n in items if n not in names]
    if not names:
        return "<p class='note'>none recorded</p>"
    if key == "gates":
        names.sort(key=lambda n: min(pages.gate_rank(items[n]) for items in by_seed if n in items))
    rows: list[list[CellLike]] = []
    for name in names:
        line: list[CellLike] = [Cell(name, left=True)]
        line += [text(items[name]) if name in items else Cell("—") for items in by_seed]
        if key == "gates":
            messages = [f"{seed}: {items[name].get('message')}" for seed, items in zip(seeds, by_seed, strict=True)
                        if name in items]
            line.append(Cell(" · ".join(messages), left=True))
        rows.append(line)
    header = [label, *seeds] + (["messages"] if key == "gates" else [])
    return pages.table(f"cell-{key}", header, rows, left=1)


# ----- the aiohttp application ---------------------------------------------------------------------------------

VIEWER_KEY = web.AppKey("viewer", Viewer)

async def _render(request: web.Request, build: Callable[[], str]) -> web.Response:
    try:
        text = await asyncio.get_running_loop().run_in_executor(None, build)
    except NotFound as exc:
        return _error(404, "Not found", exc)
    except (InputError, RunReadError) as exc:
        return _error(400 if isinstance(exc, InputError) else 500, "Cannot show this", exc)
    return web.Response(text=text, content_type="text/html", headers=_headers())


def _headers() -> dict[str, str]:
    return {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store"}


def _error(status: int, title: str, exc: AnchorageError) -> web.Response:
    hint = f"<p>{esc(exc.hint)}</p>" if exc.hint else ""
    body = pages.document(f"{title} — Anchorage", f"<h1>{esc(title)}</h1><p class='bad'>{esc(exc.message)}</p>{hint}"
                          "<p><a href='/'>all campaigns</a></p>", crumbs=[("Anchorage", "/")])
    return web.Response(status=status, text=body, content_type="text/html", headers=_headers())


def make_app(runs: Runs, *, ttl: float = 5.0) -> web.Application:
    """The viewer's application over ``runs`` (a :class:`~anchorage.report.runs.LocalRuns` or ``StoreRuns``)."""
    viewer = Viewer(runs, ttl=ttl)
    app = web.Application()
    app[VIEWER_KEY] = viewer

    def page(build: Callable[..., str], *names: str) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            values = [request.match_info[n] for n in names]
            return await _render(request, lambda: build(*values))
        return handler

    async def raw(request: web.Request) -> web.Response:
        info = request.match_info
        try:
            data, kind = await asyncio.get_running_loop().run_in_executor(
                None, viewer.raw_file, info["campaign"], info["trial"], info["file"])
        except NotFound as exc:
            return _error(404, "Not found", exc)
        except (InputError, RunReadError) as exc:
            return _error(500, "Cannot show this", exc)
        return web.Response(body=data, content_type=kind, charset="utf-8", headers=_headers())

    async def campaign_redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(campaign_href(request.match_info["campaign"]))

    app.router.add_get("/", page(viewer.index))
    app.router.add_get("/campaigns/{campaign}", campaign_redirect)
    app.router.add_get("/campaigns/{campaign}/", page(viewer.campaign_page, "campaign"))
    app.router.add_get("/campaigns/{campaign}/entries/{entry}/", page(viewer.entry_page, "campaign", "entry"))
    app.router.add_get("/campaigns/{campaign}/entries/{entry}/tasks/{task}",
                       page(viewer.cell_page, "campaign", "entry", "task"))
    app.router.add_get("/campaigns/{campaign}/trials/{trial}", page(viewer.trial_page, "campaign", "trial"))
    app.router.add_get("/campaigns/{campaign}/trials/{trial}/transcript",
                       page(viewer.transcript_page, "campaign", "trial"))
    app.router.add_get("/campaigns/{campaign}/trials/{trial}/files/{file}", raw)
    app.router.add_get("/campaigns/{campaign}/trials/{trial}/show/{path:.+}",
                       page(viewer.show_page, "campaign", "trial", "path"))
    return app
