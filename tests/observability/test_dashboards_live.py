"""End to end: a real Prometheus (Debian's ``prometheus``, started here) scrapes the gateway (``anchorage
gateway`` in front of the mock upstream, with scripted 429 and 500 answers and a request the upstream does not
meter) and the local engine (``anchorage run FILE --metrics-port N``) during a small campaign on the smoke task
— the mock model, the oracle and agents that idle then fail, scored with gates and obligations — under the
``cluster`` and ``namespace`` target labels a multi-cluster Prometheus adds. Then every query of every panel of
every dashboard runs through Prometheus' HTTP API with those variables chosen: each one parses, evaluates and
returns data (the gateway's error panels after the injected upstream errors); choosing the campaign keeps the
campaign's panels filled, choosing another empties them.

Queries are evaluated at the engine's last successful scrape: Prometheus marks a target's series stale at
its next failed scrape (the engine has exited, or was too busy to answer within the 1 s interval), so "now"
would no longer see the engine's numbers.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anchorage.gateway import BackgroundServer
from anchorage.gateway.mock import MockUpstream
from anchorage.metrics import OPERATOR_ONLY
from charts import dashboards
from charts.promql import parse
from services import PROMETHEUS, Prometheus, free_port

pytestmark = pytest.mark.slow

CAMPAIGN = """\
apiVersion: anchorage.dev/v1alpha1
kind: VerificationCampaign
metadata:
  name: observed
spec:
  tasks: [smoke-inventory]
  entries:
    - {name: mock, agent: {kind: mock, model: mock-model}}
    - {name: oracle, agent: {kind: oracle}}
    - {name: idle, agent: {kind: command, command: ["sh", "-c", "sleep 3; exit 3"]}}
    - {name: tail, agent: {kind: command, command: ["sh", "-c", "sleep 2; exit 3"]}}
  baseline: mock
  seeds: 1
  parallelism: 1
  verification: {gates: true, lean: true}
"""
# The entries run in this order (baseline first); the idle agent's failure happens while Prometheus keeps
# scraping, and the "tail" entry keeps the engine alive ~2 s longer so the earlier events are scraped.
# The target labels every scraped series gets, and the dashboard variables chosen accordingly.
TARGET_LABELS = {"cluster": "test-cluster", "namespace": "anchorage-observed"}
QUERIES = list(dashboards.queries(TARGET_LABELS))
#: Panels of metrics only the Kubernetes operator exports are left out (this run is the local engine's): its watch of
#: Jobs and ScoringRuns (tested in ``tests/controller/test_watch_resilience.py``) and Kueue's admission of its trial
#: Jobs (``tests/controller/test_queue_metrics.py``).
PANELS = sorted({(q.dashboard, q.panel) for q in QUERIES
                 if not all(m in OPERATOR_ONLY for m in parse(q.expr).metrics)})
ANCHORAGE = str(Path(sys.executable).with_name("anchorage"))  # the console script of this virtualenv


@dataclass
class Observed:
    prometheus: Prometheus
    at: float  # evaluation time: the engine's last successful scrape
    engine: str  # host:port of the engine's /metrics
    gateway: str
    engine_output: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = self.prometheus.api("query", query=expr, time=f"{self.at:.3f}")
        if answer.get("status") != "success":
            raise AssertionError(f"Prometheus rejected {expr!r}: {answer.get('errorType')}: {answer.get('error')}")
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result


def read_lines(stream: Any, lines: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):
        lines.put(line)


def start_gateway(port: int, admin_port: int, upstream_url: str, workdir: Path) -> tuple[subprocess.Popen[str], str]:
    """``anchorage gateway --config`` on ``port`` (its metrics on ``admin_port``) in front of ``upstream_url``;
    returns the process and a trial token it printed. Two attempts per request, tiny backoff: scripted failures
    show up quickly."""
    config = workdir / "gateway.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "host": "127.0.0.1", "port": port, "admin_port": admin_port,
        "upstreams": [{"name": "scripted-mock", "base_url": upstream_url, "models": ["mock*"]}],
        "retry": {"max_attempts": 2, "base_delay_seconds": 0.01, "max_delay_seconds": 0.05, "max_total_seconds": 5},
    }))
    process = subprocess.Popen(
        [ANCHORAGE, "gateway", "--config", str(config), "--issue-token", "trial-observed", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=read_lines, args=(process.stdout, lines), daemon=True).start()
    deadline, seen = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=1))
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        token = re.match(r"token trial-observed: (\S+)", seen[-1])
        if token:
            return process, token.group(1)
    stop(process)
    raise RuntimeError(f"the gateway printed no token: {''.join(seen)}")


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


def post(url: str, token: str, path: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(url + path, method="POST", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def drive_gateway(url: str, token: str, upstream: MockUpstream) -> None:
    """Requests of every kind the gateway panels show: plain, streamed, responses API, refused, retried
    after a 429, and failed by 500s that outlast the retries."""
    chat = {"model": "mock-model", "messages": [{"role": "user", "content": "observe me"}]}
    assert [post(url, token, "/v1/chat/completions", chat) for _ in range(3)] == [200] * 3
    assert post(url, token, "/v1/chat/completions", {**chat, "stream": True}) == 200
    assert post(url, token, "/v1/responses", {"model": "mock-model", "input": "observe me"}) == 200
    assert post(url, "atk-forged.token", "/v1/chat/completions", chat) == 401
    upstream.fail(429, retry_after=0)
    assert post(url, token, "/v1/chat/completions", chat) == 200
    upstream.fail(500, times=2)
    assert post(url, token, "/v1/chat/completions", chat) == 502  # the gateway answers 502 after its retries
    upstream.config = upstream.config.model_copy(update={"report_usage": False})
    try:
        assert post(url, token, "/v1/chat/completions", chat) == 200  # answered, but its usage is unknown
    finally:
        upstream.config = upstream.config.model_copy(update={"report_usage": True})


def run_engine(repo_root: Path, workdir: Path, port: int) -> str:
    campaign = workdir / "campaign.yaml"
    campaign.write_text(CAMPAIGN)
    done = subprocess.run(
        [ANCHORAGE, "run", str(campaign), "--runs-dir", str(workdir / "runs"),
         "--metrics-port", str(port), "--no-plots"],
        cwd=repo_root, capture_output=True, text=True, timeout=180)
    # idle and tail fail on purpose: a model's failure, exit code 1
    assert done.returncode == 1, f"anchorage run failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def wait_for_targets(prometheus: Prometheus, targets: list[str], timeout: float = 30.0) -> None:
    """Until Prometheus scrapes every target (its discovery applies a new config after about 5 s): the
    engine must not start before its target is being scraped, or its short run goes unseen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        active = {t["labels"]["instance"]: t for t in prometheus.targets_up()}
        if set(targets) <= set(active) and active[targets[0]]["health"] == "up":
            return
        time.sleep(0.25)
    raise RuntimeError(f"Prometheus did not start scraping {targets} within {timeout} s")


def last_good_scrape(prometheus: Prometheus, target: str, output: str) -> float:
    """When Prometheus last scraped ``target`` successfully. A scrape that times out (a busy engine near its
    end) marks the target's series stale, so queries are evaluated at the last good scrape, not at exit."""
    answer = prometheus.api("query", query=f'up{{instance="{target}"}}[2m]')
    samples = [float(ts) for result in answer["data"]["result"] for ts, value in result["values"] if value == "1"]
    if not samples:
        raise RuntimeError(f"Prometheus never scraped the engine at {target}: {prometheus.targets_up()}\n{output}")
    return max(samples)


@pytest.fixture(scope="module")
def observed(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    if not Path(PROMETHEUS).exists():
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    upstream = MockUpstream()  # bound first: its port 0 must not take a port picked below
    upstream_server = BackgroundServer(upstream.app(), name="scripted-mock").start()
    gateway_port, gateway_admin_port, engine_port = free_port(), free_port(), free_port()
    assert upstream_server.url is not None
    gateway, token = start_gateway(gateway_port, gateway_admin_port, upstream_server.url,
                                   tmp_path_factory.mktemp("gateway"))
    targets = [f"127.0.0.1:{gateway_admin_port}", f"127.0.0.1:{engine_port}"]  # the gateway's metrics: its admin port
    prometheus = Prometheus(tmp_path_factory.mktemp("prometheus"), targets, labels=TARGET_LABELS)
    try:
        wait_for_targets(prometheus, targets)
        # The gateway is driven while the engine runs, so its rates are recent when the queries are evaluated.
        driver = threading.Thread(target=drive_gateway, args=(f"http://127.0.0.1:{gateway_port}", token, upstream))
        driver.start()
        try:
            output = run_engine(repo_root, tmp_path_factory.mktemp("engine"), engine_port)
        finally:
            driver.join(timeout=60)
        time.sleep(1.5)  # the engine's exit and the gateway's last requests reach one more scrape
        yield Observed(prometheus, last_good_scrape(prometheus, targets[1], output), targets[1], targets[0], output)
    finally:
        prometheus.stop()
        stop(gateway)
        upstream_server.stop()


def test_prometheus_scraped_the_gateway_and_the_engine(observed: Observed) -> None:
    for target in (observed.gateway, observed.engine):
        up = observed.query(f'max_over_time(up{{instance="{target}"}}[2m])')
        assert up and up[0]["value"][1] == "1", \
            f"{target} was never scraped successfully: {observed.prometheus.targets_up()}\n{observed.engine_output}"
    # The engine's own in-process gateway labels the mock trial's tokens with its entry.
    tokens = observed.query(f'sum by (entry) (anchorage_tokens_total{{instance="{observed.engine}"}})')
    assert {r["metric"]["entry"] for r in tokens} == {"mock"}, observed.engine_output


@pytest.mark.parametrize("query", QUERIES, ids=[q.id for q in QUERIES])
def test_every_dashboard_query_runs(observed: Observed, query: dashboards.Query) -> None:
    observed.query(query.expr)  # raises with Prometheus' message when it does not parse or evaluate


def panel_queries(dashboard: str, panel: str, chosen: dict[str, str] | None = None) -> list[str]:
    found = [q.expr for q in (QUERIES if chosen is None else dashboards.queries({**TARGET_LABELS, **chosen}))
             if (q.dashboard, q.panel) == (dashboard, panel)]
    assert found, f"no panel {panel!r} on {dashboard}"
    return found


@pytest.mark.parametrize("dashboard, panel", PANELS, ids=[f"{d}/{p}" for d, p in PANELS])
def test_every_panel_returns_data(observed: Observed, dashboard: str, panel: str) -> None:
    """Each target of each panel, with the cluster and namespace chosen (the others at "All"), has a result."""
    for expr in panel_queries(dashboard, panel):
        assert observed.query(expr), f"no data for {expr}\n{observed.engine_output[-2000:]}"


CAMPAIGN_PANELS = [p for p in PANELS if p[0] in ("campaign-overview", "trials-health", "verification")]


@pytest.mark.parametrize("dashboard, panel", CAMPAIGN_PANELS, ids=[f"{d}/{p}" for d, p in CAMPAIGN_PANELS])
def test_the_campaign_variable_selects_the_campaigns_series(observed: Observed, dashboard: str, panel: str) -> None:
    for expr in panel_queries(dashboard, panel, {"campaign": "observed", "entry": "mock|oracle|idle|tail"}):
        assert observed.query(expr), f"no data for {expr}"
    for expr in panel_queries(dashboard, panel, {"campaign": "another-campaign"}):
        assert observed.query(expr) == [], expr


def test_no_series_carries_a_trial_id(observed: Observed) -> None:
    answer = observed.prometheus.api("series", **{"match[]": '{__name__=~"anchorage_.*"}',
                                                  "start": f"{observed.at - 300:.0f}", "end": f"{observed.at + 5:.0f}"})
    series = answer["data"]
    assert series
    text = json.dumps(series)
    assert "trial-observed" not in text and "observed-mock-smoke-inventory" not in text and "atk-" not in text
