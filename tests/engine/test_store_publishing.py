"""``anchorage run --store s3://…`` on the real S3 server: finished trials are published in the run-folder layout,
the store's records count as finished (a fresh machine reruns nothing), a trial finished but not published goes up
without running again, and a record a kill left without its ``_COMPLETE`` marker gets it."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from anchorage.cli import app
from anchorage.errors import InfrastructureError
from anchorage.store import COMPLETE_MARKER, open_store
from engine.conftest import campaign_yaml
from store.faults import Fault, FaultProxy

pytestmark = [pytest.mark.sandbox]

ENTRIES = """\
    - name: quick
      agent: {kind: command, command: ["/bin/sh", "-c", "echo '{}' > /root/results/{task}_result.json"]}"""


@pytest.fixture
def bucket(s3_server_env: Any) -> str:
    name = f"engine-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def _run(manifest: Path, runs: Path, store: str, *extra: str) -> Any:
    result = CliRunner().invoke(app, ["run", str(manifest), "--runs-dir", str(runs), "--no-plots", "--store", store,
                                      "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _stored(store: Any, campaign: str) -> dict[str, bytes]:
    return {key.split("/")[1]: store.get_bytes(key) for key in store.list(campaign) if key.endswith("/trial.json")}


def test_a_campaign_is_published_and_never_rerun_from_its_store(mechanism: str, bucket: str, tmp_path: Path) -> None:
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("pub", ENTRIES, seeds=4, parallelism=2))
    uri = f"s3://{bucket}/runs"
    first = _run(manifest, tmp_path / "runs", uri)
    assert first["results"][0]["ran"] == 4 and first["results"][0]["unpublished"] == []
    store = open_store(uri)
    trials = sorted(p.name for p in (tmp_path / "runs" / "pub").iterdir() if p.is_dir())
    assert len(trials) == 4 and store.completed_prefixes("pub") == [f"pub/{t}" for t in trials]
    for trial in trials:
        local = tmp_path / "runs" / "pub" / trial
        assert store.get_bytes(f"pub/{trial}/trial.json") == (local / "trial.json").read_bytes()
        manifest_objects = json.loads(store.get_bytes(f"pub/{trial}/{COMPLETE_MARKER}"))["objects"]
        files = sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file())
        assert sorted(k.removeprefix(f"pub/{trial}/") for k in manifest_objects) == files
    for name in ("campaign.json", "leaderboard.json", "report.html"):
        assert store.exists(f"pub/{name}"), name

    shutil.rmtree(tmp_path / "runs")  # another machine: only the store knows the run
    again = _run(manifest, tmp_path / "runs", uri)
    assert again["results"][0]["ran"] == 0 and again["results"][0]["resumed"] == 4
    assert json.loads((tmp_path / "runs" / "pub" / trials[0] / "trial.json").read_text())["name"] == trials[0]
    assert again["results"][0]["leaderboard"] == first["results"][0]["leaderboard"]


def test_finished_but_unpublished_trials_go_up_without_running_again(mechanism: str, bucket: str,
                                                                     tmp_path: Path) -> None:
    """A kill between a trial's record and its upload leaves it finished here and absent from the store; a record
    stored before a kill came between it and its marker is complete after the next start."""
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("late", ENTRIES, seeds=3, parallelism=2))
    result = CliRunner().invoke(app, ["run", str(manifest), "--runs-dir", str(tmp_path / "runs"), "--no-plots"])
    assert result.exit_code == 0, result.output
    local = {p.parent.name: p.read_bytes() for p in (tmp_path / "runs" / "late").glob("*/trial.json")}
    uri = f"s3://{bucket}/runs"
    store = open_store(uri)
    first = sorted(local)[0]
    store.put_bytes(f"late/{first}/trial.json", local[first])  # stored, then killed before its marker

    published = _run(manifest, tmp_path / "runs", uri)
    assert published["results"][0]["ran"] == 0 and published["results"][0]["resumed"] == 3
    assert _stored(store, "late") == local  # the same records: nothing ran again
    assert store.completed_prefixes("late") == [f"late/{name}" for name in sorted(local)]


def test_the_store_keeps_the_first_record_of_a_trial(mechanism: str, bucket: str, tmp_path: Path) -> None:
    """Two machines ran the same trial: the record stored first stays (create-once), the other machine takes it."""
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("race", ENTRIES, seeds=1, parallelism=1))
    uri = f"s3://{bucket}/runs"
    _run(manifest, tmp_path / "a", uri)
    store = open_store(uri)
    (trial,) = _stored(store, "race")
    theirs = store.get_bytes(f"race/{trial}/trial.json")
    result = CliRunner().invoke(app, ["run", str(manifest), "--runs-dir", str(tmp_path / "b"), "--no-plots"])
    assert result.exit_code == 0
    assert (tmp_path / "b" / "race" / trial / "trial.json").read_bytes() != theirs  # its own run, its own times
    _run(manifest, tmp_path / "b", uri)
    assert store.get_bytes(f"race/{trial}/trial.json") == theirs
    assert (tmp_path / "b" / "race" / trial / "trial.json").read_bytes() == theirs


def test_a_store_that_refuses_costs_the_upload_never_the_trial(mechanism: str, bucket: str, s3_server_env: Any,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store refuses one trial's objects (403): that trial is finished but unpublished (exit code 3, listed);
    the next run publishes it without running it again."""
    proxy = FaultProxy(s3_server_env.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        manifest = tmp_path / "c.yaml"
        manifest.write_text(campaign_yaml("deny", ENTRIES, seeds=3, parallelism=1))
        proxy.add(Fault("status", method="PUT", path_has="-s1/", status=403, code="AccessDenied", times=10**6))
        uri = f"s3://{bucket}/runs"
        result = CliRunner().invoke(app, ["run", str(manifest), "--runs-dir", str(tmp_path / "runs"), "--no-plots",
                                          "--store", uri, "--json"])
        assert result.exit_code == 3, result.output
        (summary,) = json.loads(result.stdout)["results"]
        assert summary["unpublished"] == ["deny-quick-smoke-inventory-s1"] and summary["ran"] == 3
        local = (tmp_path / "runs" / "deny" / "deny-quick-smoke-inventory-s1" / "trial.json").read_bytes()
        proxy.clear()
        again = _run(manifest, tmp_path / "runs", uri)
        assert again["results"][0]["ran"] == 0 and again["results"][0]["unpublished"] == []
        assert open_store(uri).get_bytes("deny/deny-quick-smoke-inventory-s1/trial.json") == local
        assert len(open_store(uri).completed_prefixes("deny")) == 3
    finally:
        proxy.stop()


LONE = """\
apiVersion: anchorage.dev/v1alpha1
kind: Trial
metadata: {name: lone-s0}
spec:
  task: smoke-inventory
  seed: 0
  agent: {kind: command, command: ["/bin/sh", "-c", "echo '{}' > /root/results/smoke-inventory_result.json"]}
"""


def test_a_lone_trial_is_published_at_the_stores_root_and_taken_from_it(mechanism: str, bucket: str,
                                                                       s3_server_env: Any, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rules as a campaign's trials (``TrialCopies``): a store that refuses costs the upload (the command
    fails and says a rerun publishes it), the rerun publishes without running, and another machine takes the
    store's record instead of running."""
    manifest = tmp_path / "trial.yaml"
    manifest.write_text(LONE)
    uri = f"s3://{bucket}/runs"
    proxy = FaultProxy(s3_server_env.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    proxy.add(Fault("status", method="PUT", path_has="lone-s0/", status=403, code="AccessDenied", times=10**6))
    args = ["run", str(manifest), "--no-plots", "--store", uri, "--json"]
    refused = CliRunner().invoke(app, [*args, "--runs-dir", str(tmp_path / "a")])
    assert isinstance(refused.exception, InfrastructureError), refused.output
    assert "could not be published" in str(refused.exception) and "rerun the same command" in str(refused.exception)
    local = (tmp_path / "a" / "lone-s0" / "trial.json").read_bytes()
    store = open_store(uri)
    assert not store.exists("lone-s0/trial.json")

    proxy.clear()
    (again,) = _run(manifest, tmp_path / "a", uri)["results"]
    assert again["name"] == "lone-s0" and again["phase"] == json.loads(local)["phase"]
    assert store.get_bytes("lone-s0/trial.json") == local  # published as it was: it did not run again
    assert store.completed_prefixes("") == ["lone-s0"]

    (elsewhere,) = _run(manifest, tmp_path / "b", uri)["results"]  # another machine: the store's record, not a new run
    assert elsewhere["phase"] == again["phase"]
    assert (tmp_path / "b" / "lone-s0" / "trial.json").read_bytes() == local
