"""The sample workflow (workflow/workflow.yaml), checked structurally: it parses, reads only what the
proxy sends, and runs its side effect only behind a Firestore create keyed by the run id. The template's proofs run
it step by step (its harness's workflow_runner) through the emulator and a fake of the Workflows API."""

import datetime as dt
import json
import re
from pathlib import Path

import pytest
import yaml

import config
import job
from keys import RunKey
from run_context import RunContext

WORKFLOW = Path(__file__).resolve().parent.parent / "workflow" / "workflow.yaml"
FIRESTORE = "googleapis.firestore.v1.projects.databases.documents."
GUARD_DOCUMENT = "${guard_document}"


@pytest.fixture(scope="module")
def steps():
    """main's steps, in order, as (name, body) pairs."""
    definition = yaml.safe_load(WORKFLOW.read_text())
    assert definition["main"]["params"] == ["args"]
    return [next(iter(step.items())) for step in definition["main"]["steps"]]


def step(steps, name):
    return dict(steps)[name]


def assigned(steps):
    """init's variables: name -> expression."""
    return {name: value for line in step(steps, "init")["assign"] for name, value in line.items()}


def names(steps):
    return [name for name, _ in steps]


def argument_sent_by_the_proxy(monkeypatch):
    """What job.run puts in the execution's argument, captured by a stand-in client."""
    sent = []

    class Client:
        def create_execution(self, parent, execution, **options):
            sent.append(json.loads(execution.argument))
            return execution

    monkeypatch.setattr(job, "executions_client", Client)
    monkeypatch.setenv("PROXY_WORKFLOW_NAME", "projects/p-123456/locations/europe-west1/workflows/wf")
    moment = dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)
    key = RunKey("p-123456", "europe-west1", "nightly", moment)
    job.run(RunContext(key.run_id, "nightly", "nightly", moment, "attempt", 1, "p-123456", "europe-west1"))
    return sent[0]


def test_the_workflow_reads_only_what_the_proxy_sends(monkeypatch, steps):
    argument = argument_sent_by_the_proxy(monkeypatch)
    read = set(re.findall(r"\bargs\.(\w+)", WORKFLOW.read_text()))
    assert read <= set(argument)
    assert dict(step(steps, "init")["assign"][0]) == {"run_id": "${args.run_id}"}


def test_the_run_id_check_accepts_real_run_ids_only(monkeypatch, steps):
    (branch,) = step(steps, "check_run_id")["switch"]
    pattern = re.search(r'match_regex\(run_id, "(.+?)"\)', branch["condition"]).group(1)
    assert branch["condition"].startswith("${not ") and "raise" in branch

    assert re.search(pattern, argument_sent_by_the_proxy(monkeypatch)["run_id"])
    for bad in ["", "A" * 64, "a" * 63, "a" * 64 + "/x"]:
        assert not re.search(pattern, bad)


def test_the_side_effect_runs_only_after_a_create_keyed_by_the_run_id(steps):
    guard = step(steps, "guard")["try"]
    assert guard["call"] == FIRESTORE + "createDocument"
    assert (guard["args"]["documentId"], guard["args"]["collectionId"]) == ("${run_id}", "${collection}")
    assert names(steps).index("guard") < names(steps).index("side_effect")
    # Its own collection: the handler's run records use the same ids in DEDUP_COLLECTION.
    assert assigned(steps)["collection"].endswith('+ "_workflow"}')
    assert assigned(steps)["guard_document"] == '${documents + "/" + collection + "/" + run_id}'


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEDUP_DATABASE", lambda loaded: loaded.database),
        ("DEDUP_COLLECTION", lambda loaded: loaded.collection),
        ("DEDUP_RETENTION_SECONDS", lambda loaded: str(int(loaded.retention.total_seconds()))),
    ],
)
def test_settings_default_to_the_values_baked_into_the_handler(steps, name, value):
    """Unset in the workflow's environment, a setting means what it means to the handler (config.yaml's)."""
    (default,) = re.findall(rf'sys\.get_env\("{name}", ("(?:[^"\\]|\\.)*")\)', WORKFLOW.read_text())
    assert json.loads(default) == value(config.load())


def test_the_guard_names_the_execution_that_created_it(steps):
    fields = step(steps, "guard")["try"]["args"]["body"]["fields"]
    assert fields["execution"] == {"stringValue": "${execution_id}"}
    assert assigned(steps)["execution_id"] == '${sys.get_env("GOOGLE_CLOUD_WORKFLOW_EXECUTION_ID")}'


def test_already_exists_reads_the_guard_and_goes_by_its_owner_and_state(steps):
    """What each guard state leads to; the runs through the emulator are the template's proofs (`make proofs`)."""
    handler = step(steps, "guard")["except"]
    error = handler["as"]
    (on_409, on_other) = handler["steps"]
    (branch,) = on_409["already_guarded"]["switch"]
    # map.get, not error.code: an error without a code (connection, timeout) must not turn into a KeyError.
    assert branch == {"condition": "${map.get(" + error + ', "code") == 409}', "next": "read_guard"}
    assert on_other == {"guard_failed": {"raise": "${" + error + "}"}}
    assert step(steps, "read_guard")["call"] == FIRESTORE + "get"
    assert step(steps, "read_guard")["args"] == {"name": GUARD_DOCUMENT}
    # The connector may retry its own create after a lost answer: that 409 is this execution's guard.
    own, completed, failed = step(steps, "guard_state")["switch"]
    assert own == {"condition": "${owner == execution_id}", "next": "side_effect"}
    assert completed["next"] == "skip_duplicate" and failed["next"] == "take_over"
    # The skip ends the execution, and only a jump reaches it: `done` returns first.
    assert set(step(steps, "skip_duplicate")) == {"return"}
    assert names(steps)[-2:] == ["done", "skip_duplicate"] and "return" in step(steps, "done")


def test_a_takeover_is_conditional_on_the_guard_as_it_was_read(steps):
    """Of two executions that found the owner ended, only the first write lands; the other reads the guard again."""
    take_over = step(steps, "take_over")
    assert take_over["try"]["call"] == FIRESTORE + "patch"
    assert take_over["try"]["args"]["currentDocument"] == {"updateTime": "${existing.updateTime}"}
    (refused, other) = take_over["except"]["steps"]
    assert refused["taken_by_another"]["switch"][0]["next"] == "read_guard"
    assert "raise" in other["take_over_failed"]


def test_a_failed_side_effect_marks_the_guard_failed_then_fails(steps):
    handler = step(steps, "side_effect")["except"]
    (release, fail) = handler["steps"]
    assert release["release_guard"]["call"] == FIRESTORE + "patch"
    assert release["release_guard"]["args"]["body"]["fields"] == {"status": {"stringValue": "failed"}}
    assert fail == {"effect_failed": {"raise": "${" + handler["as"] + "}"}}


def test_the_guard_is_marked_completed_once_the_side_effect_is_done(steps):
    names_in_order = names(steps)
    assert names_in_order.index("side_effect") < names_in_order.index("mark_done") < names_in_order.index("done")
    mark = step(steps, "mark_done")
    assert mark["call"] == FIRESTORE + "patch"
    assert mark["args"]["name"] == GUARD_DOCUMENT
    assert mark["args"]["body"]["fields"]["status"] == {"stringValue": "completed"}


def test_the_guard_expires_after_the_retention_so_the_ttl_policy_deletes_it(steps):
    fields = step(steps, "guard")["try"]["args"]["body"]["fields"]
    assert fields["expire_at"] == {"timestampValue": "${time.format(sys.now() + retention_seconds)}"}
    assert 'sys.get_env("DEDUP_RETENTION_SECONDS"' in assigned(steps)["retention_seconds"]
