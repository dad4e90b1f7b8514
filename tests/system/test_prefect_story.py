"""A flow run tells amrsim's story to Prefect: `amrsim train` against a Prefect server (this test process's loopback
one, as a user's configured server) leaves, readable through Prefect's client, amrsim's own log lines (stage starts
and ends with row counts, failed rows and failures with their reasons, training steps with dev scores), the state of
a run that `max_steps` stopped before its model was finished (Completed, named Unfinished, with the reason), and the
run's summary table as a table artifact."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_cli, shared_prefect_server
from tests.stages.train.test_s3bert import ASPECTS, CONFIG, pair_rows


@pytest.fixture
def toy(tmp_path, tiny_model):
    """The S3BERT toy pipeline: 32 pairs with graphs (one graph does not parse, one row has an empty sentence),
    the metrics stage, an s3bert entry of 6 steps with a dev score every 3."""
    rows = pair_rows(0, 24, "train") + pair_rows(1, 8, "dev")
    rows[3].update(sentence2="the cat", amr2="(a / b")  # fails in the metrics stage
    rows[5].update(sentence1="")  # fails at ingest: kept with status 'failed' and the reason
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    path = tmp_path / "pipelines.yaml"
    path.write_text(CONFIG.format(aspects=json.dumps(ASPECTS), model=json.dumps(tiny_model)), encoding="utf-8")
    return path


def _runs(client, config: str) -> dict[str, object]:
    """The flow runs (by flow name) whose `config` parameter is `config`: this test's, on a shared server."""
    from prefect.client.schemas.sorting import FlowRunSort

    runs = client.read_flow_runs(limit=200, sort=FlowRunSort.EXPECTED_START_TIME_DESC)  # the newest first
    return {client.read_flow(r.flow_id).name: r for r in runs if r.parameters.get("config") == config}


def _log_lines(client, run_ids: list) -> list[str]:
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort

    lines: list[str] = []
    while True:  # the API hands at most 200 records a call
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=run_ids)), limit=200,
                                offset=len(lines), sort=LogSort.TIMESTAMP_ASC)
        lines += [f"{log.name} | {log.message}" for log in logs]
        if len(logs) < 200:
            return lines


@pytest.mark.slow
def test_a_training_run_stopped_by_max_steps_tells_its_story_and_is_unfinished(tmp_path, toy):
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    proc = run_cli(tmp_path, "train", "s3bert", "--pipeline", "toy", "--config", str(toy), "--run-id", "cut",
                   "--param", "max_steps=3", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]  # stopped as asked: exit 0, as before
    stages = json.loads(proc.stdout)["stages"]  # stdout holds the JSON document alone: no log line there
    assert stages[-1]["status"] == "partial" and stages[-1]["steps"] == 3

    with SyncPrefectClient(api=shared_prefect_server()) as client:
        runs = _runs(client, str(toy))
        assert set(runs) == {"train", "refresh-dataset"}, runs
        train = client.read_flow_run(runs["train"].id)
        # not plain COMPLETED: a named state that says the model is unfinished, and why
        assert train.state.type.value == "COMPLETED" and train.state.name == "Unfinished"
        assert train.state.message == ("s3bert:cut stopped at step 3 of 6 before its model was finished: "
                                       "s3bert:latest is unchanged; its checkpoint is kept, and a train run with "
                                       "run_id=cut resumes it")
        refresh = client.read_flow_run(runs["refresh-dataset"].id)
        assert refresh.state.type.value == "COMPLETED" and refresh.state.name == "Completed"

        lines = _log_lines(client, [train.id, refresh.id])
        text = "\n".join(lines)
        # each stage's start and end with its rows, from amrsim's loggers (the logger's name, then the message)
        assert "amrsim.console | ingest toy_pairs: started" in lines, text
        assert "amrsim.console | ingest toy_pairs: 32 rows in, 32 computed, 1 failed, 32 rows out, " in text, text
        assert "amrsim.console | metrics toy_pairs: 31 rows in, 31 computed, 1 failed, 31 rows out, " in text, text
        # a failed row's reason, from the ingest stage's own logger
        assert (f"amrsim.stages.ingest | warning: dataset 'toy_pairs': 1 of 32 rows failed (kept with status "
                f"'failed'); the first: {tmp_path / 'pairs.jsonl'}:6: empty sentence1") in lines, text
        # training progress with the dev score, the stage's end, and why the run is unfinished
        step = [line for line in lines if line.startswith("amrsim.methods.training | ") and " step 3/6: " in line]
        assert len(step) == 1 and "'dev_loss': " in step[0], text
        assert any(line.startswith("amrsim.console | train s3bert: 24 rows in, 44 computed, 2 failed, ") and
                   line.endswith("(partial); model s3bert:cut, step 3 of 6") for line in lines), text
        assert "amrsim.console | " + train.state.message in lines, text

        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[train.id])))
        assert [(a.type, a.key) for a in artifacts] == [("table", "train-toy-summary")]
        table = json.loads(artifacts[0].data)
        assert [(r["stage"], r["dataset"], r["status"]) for r in table] == [
            (s["stage"], s["dataset"], s["status"]) for s in stages]
        assert table[0] == {k: stages[0][k] for k in ("stage", "dataset", "rows_in", "computed", "failed",
                                                      "rows_out", "seconds", "status")}
        assert table[-1]["stage"] == "train:s3bert" and table[-1]["status"] == "partial"

    # the resume finishes the model: a plain Completed run, and its failure-free story
    proc = run_cli(tmp_path, "train", "s3bert", "--pipeline", "toy", "--config", str(toy), "--resume",
                   "--no-refresh")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with SyncPrefectClient(api=shared_prefect_server()) as client:
        finished = [r for r in client.read_flow_runs(limit=200) if r.parameters.get("config") == str(toy)
                    and r.id not in {train.id, refresh.id}]
        assert len(finished) == 1 and finished[0].state.name == "Completed", finished


@pytest.mark.slow
def test_a_failing_stage_logs_its_reason_and_fails_the_run(tmp_path, toy):
    from prefect.client.orchestration import SyncPrefectClient

    missing = tmp_path / "no-such-model"
    proc = run_cli(tmp_path, "train", "s3bert", "--pipeline", "toy", "--config", str(toy),
                   "--param", f"base_model={missing}")
    assert proc.returncode != 0
    with SyncPrefectClient(api=shared_prefect_server()) as client:
        runs = _runs(client, str(toy))
        train = client.read_flow_run(runs["train"].id)
        assert train.state.type.value == "FAILED", train.state
        lines = _log_lines(client, [train.id])
        failed = [line for line in lines if line.startswith("amrsim.console | train s3bert failed: ")]
        assert len(failed) == 1 and str(missing) in failed[0], "\n".join(lines)


@pytest.mark.slow
def test_stages_on_ray_tell_the_same_story(tmp_path, toy):
    """Metrics batches on a local Ray: their stage's lines come from the flow's process, in the same run's log."""
    pytest.importorskip("ray")
    from prefect.client.orchestration import SyncPrefectClient

    proc = run_cli(tmp_path, "train", "s3bert", "--pipeline", "toy", "--config", str(toy), "--set", "ray.enabled=true",
                   "--set", "ray.num_cpus=1", "--param", "max_steps=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with SyncPrefectClient(api=shared_prefect_server()) as client:
        refresh = _runs(client, str(toy))["refresh-dataset"]
        lines = _log_lines(client, [refresh.id])
    assert "amrsim.console | metrics toy_pairs: started" in lines, lines
    assert any(line.startswith("amrsim.console | metrics toy_pairs: 31 rows in, 31 computed, 1 failed, 31 rows out, ")
               for line in lines), lines
