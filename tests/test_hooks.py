"""The hooks as a user meets them: refusals through cookiecutter (API and CLI), odd names, and baking.py's steps."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import baking
import pytest
import yaml
from conftest import DEFAULT_ANSWERS, DEFAULTS, ROOT, bake, copy_template, git_commit, root_configuration
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter as cookiecutter_main

# (answers, field, value as the hook sees it, a fragment of the rule). A `jobs` object replaces the default
# whole; cookiecutter hands numbers to the hook as text.
REFUSALS = {
    "slug": ({"project_slug": "Bad_Slug"}, "project_slug", "Bad_Slug", "3-20 chars of lowercase letters"),
    "name-slugifies-to-nothing": ({"project_name": "!!"}, "project_slug", "-", "3-20 chars of lowercase letters"),
    "project-id": ({"gcp_project_id": "my-project-"}, "gcp_project_id", "my-project-", "does not end with a hyphen"),
    "region": ({"region": "europe-west"}, "region", "europe-west", "must be a GCP region"),
    "cron-groc": (
        {"jobs": {"nightly": {"schedule": "every 5 minutes", "time_zone": "Etc/UTC"}}},
        "jobs.nightly.schedule",
        "every 5 minutes",
        "only guarantees the X-CloudScheduler-ScheduleTime header for unix-cron",
    ),
    "cron-range": (
        {"jobs": {"nightly": {"schedule": "0 24 * * *", "time_zone": "Etc/UTC"}}},
        "jobs.nightly.schedule",
        "0 24 * * *",
        "hour value '24' is outside 0-23",
    ),
    "time-zone": (
        {"jobs": {"nightly": {"schedule": "0 3 * * *", "time_zone": "Europe/Atlantis"}}},
        "jobs.nightly.time_zone",
        "Europe/Atlantis",
        "must be an IANA time zone",
    ),
    "deadline": (
        {"attempt_deadline_seconds": 1801, "lease_seconds": 3630},
        "attempt_deadline_seconds",
        "1801",
        "must be 15-1800",
    ),
    "lease": (
        {"lease_seconds": 329},
        "lease_seconds",
        "329",
        "must be at least attempt_deadline_seconds + 30",
    ),
    # A job's own number is named under the job (issue 17).
    "job-lease": (
        {"jobs": {"nightly": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "lease_seconds": 329}}},
        "jobs.nightly.lease_seconds",
        "329",
        "must be at least attempt_deadline_seconds + 30 (330)",
    ),
    "retention": (
        {"retention_seconds": 3659},
        "retention_seconds",
        "3659",
        "must be at least lease_seconds + the retry window (360 + 3300 = 3660)",
    ),
    "retries-end-before-the-lease": (
        {"retry_count": 3, "min_backoff_seconds": 10},  # the template's defaults until the rule came
        "retry_count",
        "3",
        "the retries (10+20+40 = 70 s) end before the lease (360 s) expires",
    ),
    "retry-count": ({"retry_count": 6}, "retry_count", "6", "must be 0-5"),
    # The counterexample: every 5 minutes, every other answer at its default.
    "schedule-busier-than-one-fault-allows": (
        {"jobs": {"nightly": {"schedule": "*/5 * * * *", "time_zone": "Etc/UTC"}}},
        "jobs.nightly.schedule",
        "*/5 * * * *",
        "fires only 300 s apart in Etc/UTC",
    ),
    "retry-duration-too-short": (
        {"retry_count": 0, "max_retry_duration_seconds": 400},
        "max_retry_duration_seconds",
        "400",
        "with retry_count 0 it alone bounds the retries",
    ),
    # Both typed: pressing Enter at max_backoff_seconds would take 10 x 301 (capped at 3600) instead.
    "backoff": (
        {"min_backoff_seconds": 301, "max_backoff_seconds": 300},
        "max_backoff_seconds",
        "300",
        "must be at least min_backoff_seconds",
    ),
    "non-numeric": ({"lease_seconds": "6 min"}, "lease_seconds", "6 min", "must be a whole number"),
    "jobs-extra-key": (
        {"jobs": {"nightly": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "retries": 2}}},
        "jobs.nightly",
        {"retries": "2", "schedule": "0 3 * * *", "time_zone": "Etc/UTC"},  # tojson sorts the keys
        "must hold a schedule, and nothing else but attempt_deadline_seconds",
    ),
    "jobs-bad-id": (
        {"jobs": {"Nightly_Report": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}}},
        "jobs",
        "Nightly_Report",
        "each job id must be 1-40 chars",
    ),
    "jobs-not-json": ({"jobs": "nightly 0 3 * * *"}, "jobs", "nightly 0 3 * * *", "is not JSON"),
    "jobs-not-an-object": ({"jobs": "[]"}, "jobs", [], "non-empty mapping"),
    "max-lateness": (
        {"jobs": {"nightly": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "max_lateness_seconds": 30}}},
        "jobs.nightly.max_lateness_seconds",
        "30",
        "at least 60 (omit it for no limit)",
    ),
    "audit-interval": ({"audit_interval_minutes": 7}, "audit_interval_minutes", "7", "must be one of 5, 10, 15"),
    "database": ({"firestore_database": "Runs"}, "firestore_database", "Runs", "(default) or 4-63 chars"),
    "collection": ({"firestore_collection": "__runs__"}, "firestore_collection", "__runs__", "reserved by Firestore"),
}


@pytest.mark.parametrize(("answers", "field", "value", "rule"), list(REFUSALS.values()), ids=list(REFUSALS))
def test_bad_answer_is_refused_with_one_line_and_nothing_left_behind(tmp_path, capfd, answers, field, value, rule):
    output = tmp_path / "out"
    output.mkdir()
    with pytest.raises(FailedHookException):
        bake(output, **answers)
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ")]
    assert errors == err.strip().splitlines(), "the refusal is one line"
    assert errors[0].startswith(f"ERROR: {field}={value!r}: "), errors[0]
    assert rule in errors[0]
    assert list(output.iterdir()) == []
    Path(REPLAY_HINT.search(errors[0])["file"]).unlink()  # the refusal's own replay file: named, and there


def test_no_retries_at_all_bakes_with_one_warning_line(tmp_path, capfd):
    project = bake(tmp_path, retry_count=0)
    warnings = [line for line in capfd.readouterr().err.splitlines() if line.startswith("WARNING: ")]
    assert warnings == [
        "WARNING: retry_count=0 with max_retry_duration_seconds=0: Cloud Scheduler never retries, so one crash, "
        "retryable error or hang loses the run (a crash after the claim leaves it for `python -m "
        "scheduled_dedup_tools.runs stuck`; an error or a hang releases it and leaves only its retryable_failure "
        "log line)"
    ]
    assert (project / "main.py").is_file()


def test_the_defaults_bake_without_warnings(tmp_path, capfd):
    bake(tmp_path)
    assert [line for line in capfd.readouterr().err.splitlines() if line.startswith(("WARNING", "ERROR"))] == []


CLI_REFUSALS = {
    "project-id": (["gcp_project_id=Bad"], "ERROR: gcp_project_id='Bad': a GCP project id is 6-30 chars of lowercase"),
    "retries-end-before-the-lease": (
        ["__retry_count=3", "__min_backoff_seconds=10"],  # unasked settings: given under their "__" names
        "ERROR: retry_count='3': the retries (10+20+40 = 70 s) end before the lease (360 s) expires, so a run whose "
        "instance crashed is never retried; values that pass: min_backoff_seconds 52, max_backoff_seconds 520",
    ),
}


def refusal(output: Path, *arguments: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """The first ERROR line of a cookiecutter CLI bake into `output` that must fail and write nothing."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cookiecutter"), "--no-input", "-o", str(output), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    errors = [text for text in result.stderr.splitlines() if text.startswith("ERROR: ")]
    assert errors, result.stderr
    assert not output.exists() or list(output.iterdir()) == []
    return errors[0]


@pytest.mark.parametrize(("answers", "line"), list(CLI_REFUSALS.values()), ids=list(CLI_REFUSALS))
def test_cookiecutter_cli_refuses_with_non_zero_exit_and_one_line(tmp_path, answers, line):
    assert refusal(tmp_path / "out", str(ROOT), *answers).startswith(line)


@pytest.mark.parametrize(
    ("template", "cwd"),
    [(".", ROOT), ("..", ROOT / "hooks"), (str(ROOT), Path("/"))],
    ids=["dot", "parent", "absolute"],
)
def test_cookiecutter_cli_bakes_from_a_relative_template_path(tmp_path, template, cwd):
    """`cookiecutter .`, `cookiecutter ..` and an absolute path, from a shell in `cwd` (which sets PWD): the hooks
    run elsewhere, yet both find the template (pre_gen_project.template_dir(), from cookiecutter's _repo_dir; which
    post_gen_project.py learns from the note it leaves)."""
    output = tmp_path / "out"
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cookiecutter"),
            "--no-input",
            "-o",
            str(output),
            template,
        ],  # fmt: skip
        cwd=cwd,
        env={**os.environ, "PWD": str(cwd)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (project,) = output.iterdir()
    # The modules' address is this checkout's: its local path, or its origin at its commit.
    head, origin, prefix = baking.git_facts(ROOT)
    address = baking.module_source(template, None, ROOT, head, origin, prefix).replace(baking.MODULE, "scheduled-dedup")
    assert f'  source = "{address}"\n' in (project / "terraform" / "main.tf").read_text()
    assert (project / "config.yaml").is_file() and (project / "rules.py").is_file()
    assert not (project / ".template-dir").exists(), "post_gen_project.py must remove the hooks' note"


COOKIECUTTER = Path(sys.executable).parent / "cookiecutter"


def test_a_relative_template_path_the_shells_directory_does_not_hold_is_refused_in_one_line(tmp_path):
    """The hooks read no other process's state (no /proc): a relative `_repo_dir` is the shell's ($PWD); started
    where PWD says otherwise (a script that changed directory), the bake is refused before anything is written,
    naming the way out."""
    line = refusal(tmp_path / "out", ".", cwd=ROOT, env={**os.environ, "PWD": str(tmp_path)})
    assert line.startswith(
        f"ERROR: _repo_dir='.': no template there from the shell's directory (PWD={str(tmp_path)!r}); "
        "give cookiecutter the template's absolute path; your answers are saved in "
    )


@pytest.fixture
def own_replay_dir(tmp_path, monkeypatch):
    """cookiecutter's replay directory, moved out of ~ by a user config (COOKIECUTTER_CONFIG) as a user may."""
    replay_dir = tmp_path / "replay"
    config = tmp_path / "cookiecutterrc.yaml"
    config.write_text(f"replay_dir: {json.dumps(str(replay_dir))}\n")
    monkeypatch.setenv("COOKIECUTTER_CONFIG", str(config))
    return replay_dir


def at_the_terminal(*arguments: str, typed: dict[int, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`cookiecutter` asking its questions on stdin: `typed` maps a question's number (1 = the first asked)
    to the line typed there; every other question gets Enter."""
    lines = [typed.get(number, "") for number in range(1, 60)]
    return subprocess.run(
        [str(COOKIECUTTER), *arguments],
        input="\n".join(lines) + "\n",
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# The order cookiecutter asks in: every plain question as cookiecutter.json lists it (`jobs` is text: among them).
QUESTION_NUMBER = {key: number for number, key in enumerate(
    [key for key, value in DEFAULTS.items() if not key.startswith("_") and not isinstance(value, dict)], start=1
)}  # fmt: skip


def test_at_the_terminal_at_most_twelve_questions_are_asked(tmp_path, own_replay_dir):
    """Enter at every question bakes the defaults; cookiecutter numbers each question it asks ([n/N])."""
    result = at_the_terminal("-o", str(tmp_path / "out"), str(ROOT), typed={}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    asked = re.findall(r"\[(\d+)/(\d+)\]", result.stdout)
    assert asked and len(asked) == int(asked[-1][1]) <= 12, asked
    project = tmp_path / "out" / "nightly-report"
    assert json.loads((project / ".cookiecutter.json").read_text())["jobs"] == ["nightly"]
    written = yaml.safe_load((project / "config.yaml").read_text())
    assert written["jobs"] == {"nightly": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}}
    assert written["defaults"]["attempt_deadline_seconds"] == 300  # an unasked setting, written all the same


def test_at_the_terminal_a_longer_deadline_and_enter_for_the_rest_bakes(tmp_path, own_replay_dir):
    """The issue's case, the deadline given as extra context under its unasked name, Enter at every question:
    the lease follows the deadline (config.py derives it)."""
    result = at_the_terminal(
        "-o", str(tmp_path / "out"), str(ROOT), "__attempt_deadline_seconds=600", typed={}, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    project = tmp_path / "out" / "nightly-report"
    written = yaml.safe_load((project / "config.yaml").read_text())
    assert written["defaults"]["attempt_deadline_seconds"] == 600 and "lease_seconds" not in written["defaults"]
    loaded = subprocess.run(
        [sys.executable, "-c", "import config; print(config.load().jobs['nightly-report-nightly'].lease.seconds)"],
        cwd=project, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "660"


REPLAY_HINT = re.compile(
    r"; your answers are saved in (?P<file>\S+): correct it there, then bake again with: (?P<cmd>.+)"
)


def refusal_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR: ") and "Stopping generation" not in line]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_refusal_names_the_replay_file_and_the_command_that_bakes_from_it(tmp_path, own_replay_dir):
    output = tmp_path / "out"
    refused = at_the_terminal(
        "-o", str(output), str(ROOT), typed={QUESTION_NUMBER["gcp_project_id"]: "Bad"}, cwd=tmp_path
    )
    assert refused.returncode != 0
    line = refusal_line(refused.stderr)
    assert line.startswith("ERROR: gcp_project_id='Bad': "), refused.stderr
    hint = REPLAY_HINT.search(line)
    assert hint, line
    replay_file = Path(hint["file"])
    saved = json.loads(replay_file.read_text())
    assert saved["cookiecutter"]["gcp_project_id"] == "Bad"
    command = shlex.split(hint["cmd"])
    assert command == ["cookiecutter", "--replay-file", str(replay_file), "-o", str(output), str(ROOT)]
    assert not output.exists() or list(output.iterdir()) == []

    saved["cookiecutter"]["gcp_project_id"] = "fixed-project-id"
    replay_file.write_text(json.dumps(saved))
    again = subprocess.run(
        [str(COOKIECUTTER), *command[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 0, again.stderr
    answers = json.loads((output / "nightly-report" / ".cookiecutter.json").read_text())
    assert answers["gcp_project_id"] == "fixed-project-id"
    assert answers["attempt_deadline_seconds"] == "300"
    replay_file.unlink()


def test_each_refusal_names_a_replay_file_no_other_bake_overwrites(tmp_path, own_replay_dir, capfd):
    """cookiecutter's own replay file (<replay_dir>/<template>.json) is rewritten by the next bake: two refused
    bakes name two files, each still holding its own answers after the other."""
    output = tmp_path / "out"
    output.mkdir()
    files = []
    for project_id in ("Bad", "Worse"):
        with pytest.raises(FailedHookException):
            bake(output, gcp_project_id=project_id)
        files.append(Path(REPLAY_HINT.search(refusal_line(capfd.readouterr().err))["file"]))
    assert files[0] != files[1]
    assert [json.loads(path.read_text())["cookiecutter"]["gcp_project_id"] for path in files] == ["Bad", "Worse"]
    bake(output / "later", project_name="Later Bake")  # a later bake leaves them alone
    assert [json.loads(path.read_text())["cookiecutter"]["gcp_project_id"] for path in files] == ["Bad", "Worse"]
    for path in files:
        path.unlink()


# --- `jobs` given whole: exactly those jobs, however they are given (issue 17) ------------------------

GIVEN_JOBS = {
    "export": {"schedule": "0 2 * * *", "time_zone": "Europe/Berlin"},
    "sync": {"schedule": "0 */6 * * *", "time_zone": "Etc/UTC"},
}


def baked_job_ids(project: Path) -> dict[str, list[str]]:
    """The job ids each place of a bake holds: the answers record, config.yaml (the function's and Terraform's
    one source), job.py's WORK."""
    return {
        "answers": sorted(json.loads((project / ".cookiecutter.json").read_text())["jobs"]),
        "config": sorted(yaml.safe_load((project / "config.yaml").read_text())["jobs"]),
        "work": sorted(work_functions(project / "job.py")),
    }


def test_jobs_given_through_extra_context_are_exactly_those_jobs(tmp_path):
    project = bake(tmp_path, jobs=GIVEN_JOBS)
    assert baked_job_ids(project) == dict.fromkeys(("answers", "config", "work"), sorted(GIVEN_JOBS))


def work_functions(job_py: Path) -> dict[str, str]:
    """job.py's WORK as {job id: the name of its function}, each function defined in job.py itself."""
    module = ast.parse(job_py.read_text())
    defined = {node.name for node in module.body if isinstance(node, ast.FunctionDef)}
    (table,) = [node.value for node in module.body if isinstance(node, ast.AnnAssign) and node.target.id == "WORK"]
    work = {key.value: value.id for key, value in zip(table.keys, table.values, strict=True)}
    assert set(work.values()) <= defined
    return work


def test_job_py_starts_with_one_work_function_per_job(tmp_path):
    """Not one stub named after the default job shared by every job: each job's work is its own function."""
    jobs = {**GIVEN_JOBS, "3-hourly": {"schedule": "0 */3 * * *", "time_zone": "Etc/UTC"}}
    project = bake(tmp_path, jobs=jobs)
    assert work_functions(project / "job.py") == {
        "3-hourly": "job_3_hourly_work",
        "export": "export_work",
        "sync": "sync_work",
    }


def test_jobs_given_in_a_config_file_are_exactly_those_jobs(tmp_path):
    config = tmp_path / "bake.yaml"
    config.write_text(json.dumps({"default_context": {"jobs": GIVEN_JOBS}}))  # YAML is a superset of JSON
    result = subprocess.run(
        [str(COOKIECUTTER), "--no-input", "--config-file", str(config), "-o", str(tmp_path / "out"), str(ROOT)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    project = tmp_path / "out" / "nightly-report"
    assert baked_job_ids(project) == dict.fromkeys(("answers", "config", "work"), sorted(GIVEN_JOBS))


def test_jobs_given_as_json_text_on_the_command_line_are_exactly_those_jobs(tmp_path):
    result = subprocess.run(
        [str(COOKIECUTTER), "--no-input", "-o", str(tmp_path / "out"), str(ROOT), f"jobs={json.dumps(GIVEN_JOBS)}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    project = tmp_path / "out" / "nightly-report"
    assert baked_job_ids(project) == dict.fromkeys(("answers", "config", "work"), sorted(GIVEN_JOBS))


ODD_NAME = 'Bob\'s "Quarterly" \\ Report: Café 日本語 🚀'


@pytest.fixture(scope="module")
def odd_name_bake(tmp_path_factory):
    return bake(tmp_path_factory.mktemp("odd-name"), project_name=ODD_NAME)


def test_odd_name_is_recorded_intact(odd_name_bake):
    answers = json.loads((odd_name_bake / ".cookiecutter.json").read_text(encoding="utf-8"))
    assert answers["project_name"] == ODD_NAME
    assert answers["project_slug"] == odd_name_bake.name


def test_odd_name_is_the_baked_pyproject_description(odd_name_bake):
    pyproject = tomllib.loads((odd_name_bake / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["description"] == ODD_NAME


# ---------------------------------------------------------------- baking.py


def make_tree(root: Path, relatives) -> None:
    """Files for paths with a suffix (tests/test_x.py), directories holding a file for the rest."""
    for relative in set(relatives):
        path = root / relative
        if path.suffix:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
        else:
            path.mkdir(parents=True)
            (path / "keep.txt").write_text("x")


EVERY_TARGET_ONLY_PATH = sorted({path for paths in baking.TARGET_ONLY_PATHS.values() for path in paths})


@pytest.mark.parametrize("target", list(baking.TARGET_ONLY_PATHS))
def test_remove_unused_paths_keeps_only_the_chosen_targets_paths(tmp_path, target):
    make_tree(tmp_path, EVERY_TARGET_ONLY_PATH)
    (tmp_path / "main.py").write_text("shared")
    removed = baking.remove_unused_paths(tmp_path, target)
    kept = baking.TARGET_ONLY_PATHS[target]
    assert sorted(removed) == [tmp_path / path for path in EVERY_TARGET_ONLY_PATH if path not in kept]
    assert [path for path in EVERY_TARGET_ONLY_PATH if (tmp_path / path).exists()] == sorted(kept)
    assert (tmp_path / "main.py").read_text() == "shared"


def test_remove_unused_paths_removes_files_keeps_shared_paths_and_skips_missing_ones(tmp_path, monkeypatch):
    mapping = {"a": ("a.txt", "shared.txt"), "b": ("b.txt", "b_dir", "never_baked.txt", "shared.txt"), "c": ()}
    monkeypatch.setattr(baking, "TARGET_ONLY_PATHS", mapping)
    make_tree(tmp_path, ["a.txt", "b.txt", "b_dir", "shared.txt"])
    assert baking.remove_unused_paths(tmp_path, "a") == [tmp_path / "b.txt", tmp_path / "b_dir"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "shared.txt"]
    assert baking.remove_unused_paths(tmp_path, "c") == [tmp_path / "a.txt", tmp_path / "shared.txt"]
    assert list(tmp_path.iterdir()) == []


ANSWERS = {
    "project_name": 'Café 🚀 "Q"',
    "project_slug": "cafe-q",
    "target": "workflow",
    "jobs": {"nightly": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}},
    "state_bucket": "",
    "_template": "/somewhere",
    "_output_dir": "/elsewhere",
    "_repo_dir": "/repo",
}


def test_public_answers_drops_private_keys_only():
    public = baking.public_answers(ANSWERS)
    assert public == {key: ANSWERS[key] for key in ("project_name", "project_slug", "target", "jobs", "state_bucket")}
    assert "_template" in ANSWERS


def test_write_answers_writes_sorted_public_json(tmp_path):
    path = baking.write_answers(tmp_path, ANSWERS, "1.2.3")
    assert path == tmp_path / ".cookiecutter.json"
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    # The jobs by id only: their schedules live in config.yaml alone; the release baked at beside them.
    assert json.loads(text) == {**baking.public_answers(ANSWERS), "jobs": ["nightly"], "template_version": "1.2.3"}
    assert list(json.loads(text)) == sorted([*baking.public_answers(ANSWERS), "template_version"])


SHA = "0123456789abcdef0123456789abcdef01234567"
MODULES = f"//{baking.MODULES_DIR.as_posix()}/{baking.MODULE}"
# (cookiecutter's _template, _checkout, the checkout's origin remote) -> the modules' address (repo_dir /t, HEAD SHA).
DERIVATIONS = {
    "gh-abbreviation": ("gh:acme/dedup", None, None, f"git::https://github.com/acme/dedup.git{MODULES}?ref={SHA}"),
    "gl-abbreviation": ("gl:acme/dedup", None, None, f"git::https://gitlab.com/acme/dedup.git{MODULES}?ref={SHA}"),
    "bb-abbreviation": ("bb:acme/dedup", None, None, f"git::https://bitbucket.org/acme/dedup{MODULES}?ref={SHA}"),
    "https-at-a-tag": (
        "https://example.com/dedup.git",
        "v2.1.0",
        None,
        f"git::https://example.com/dedup.git{MODULES}?ref=v2.1.0",
    ),
    "git+https": (
        "git+https://example.com/dedup.git",
        None,
        None,
        f"git::https://example.com/dedup.git{MODULES}?ref={SHA}",
    ),
    "scp-like-ssh": (
        "git@github.com:acme/dedup.git",
        None,
        None,
        f"git::git@github.com:acme/dedup.git{MODULES}?ref={SHA}",
    ),
    "ssh-url": (
        "ssh://git@example.com/dedup.git",
        "main",
        None,
        f"git::ssh://git@example.com/dedup.git{MODULES}?ref=main",
    ),
    "local-clone-of-a-remote": (
        ".",
        None,
        "https://example.com/dedup.git",
        f"git::https://example.com/dedup.git{MODULES}?ref={SHA}",
    ),
    "local-without-a-remote": ("/t", None, None, f"/t/terraform/modules//{baking.MODULE}"),
    "local-clone-of-a-local-repository": ("/t", None, "/src/dedup", f"git::file:///src/dedup{MODULES}?ref={SHA}"),
}


def test_a_template_in_a_sub_directory_of_its_repository_names_its_modules_there():
    address = baking.module_source("gh:acme/mono", None, Path("/t"), SHA, None, "templates/dedup/")
    assert (
        address == f"git::https://github.com/acme/mono.git//templates/dedup/terraform/modules/{baking.MODULE}?ref={SHA}"
    )


@pytest.mark.parametrize(
    ("template", "checkout", "origin", "address"), list(DERIVATIONS.values()), ids=list(DERIVATIONS)
)
def test_the_modules_address_is_derived_from_where_the_bake_came_from(template, checkout, origin, address):
    assert baking.module_source(template, checkout, Path("/t"), SHA, origin) == address


def test_a_git_source_without_a_checkout_or_a_commit_is_refused():
    with pytest.raises(baking.ModuleSourceError, match=r"_template='gh:acme/dedup': no checkout and no commit"):
        baking.module_source("gh:acme/dedup", None, Path("/t"), None, None)


def test_module_source_overrides_the_derivation_and_names_every_module(tmp_path):
    answers = {"_template": "gh:acme/dedup", "_module_source": "git::https://example.com/x.git//m/{module}?ref=v9"}
    sources = baking.module_sources(answers, tmp_path)
    assert sources == {name: f"git::https://example.com/x.git//m/{name}?ref=v9" for name in baking.MODULES}


# Issue 26: a team bake is deployed by CI, whose `terraform init` runs on a fresh runner.
TEAM = {"state_bucket": "acme-tf-state", "repository": "acme/report"}
FETCHABLE = f"git::https://example.com/dedup.git//terraform/modules/{baking.MODULE}?ref=v2"


@pytest.mark.parametrize(
    ("address", "local"),
    [
        ("/home/me/dedup/terraform/modules//{module}", True),
        ("./modules/{module}", True),
        ("../dedup/terraform/modules/{module}", True),
        ("~/dedup/terraform/modules//{module}", True),
        ("C:\\dedup\\terraform\\modules//{module}", True),
        ("file:///src/dedup//terraform/modules/{module}", True),
        (f"git::file:///src/dedup{MODULES}?ref={SHA}", True),
        (FETCHABLE, False),
        (f"git::git@github.com:acme/dedup.git{MODULES}?ref={SHA}", False),
        ("github.com/acme/dedup//terraform/modules/{module}?ref=v2", False),
        ("app.terraform.io/acme/{module}/google", False),
    ],
)
def test_an_address_on_the_baking_machine_is_local(address, local):
    assert baking.is_local(address) is local


@pytest.fixture(params=["local-directory", "file-clone"])
def local_template(request, tmp_path):
    """The template as a directory of this machine (no git), or a clone of a local repository (origin: a path,
    so the derived address is git::file://...)."""
    copy = copy_template(tmp_path / "template")
    if request.param == "local-directory":
        return copy
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=copy, check=True, timeout=60)
    git_commit(copy, "template v1")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(copy), str(clone)], check=True, timeout=60)
    return clone


def refused_bake(template: Path, output: Path, capfd, **answers: object) -> str:
    """The one line a refused bake prints; nothing is left in `output`."""
    output.mkdir()
    with pytest.raises(FailedHookException):
        cookiecutter_main(str(template), no_input=True, output_dir=str(output), extra_context=answers)
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ")]
    assert errors == err.strip().splitlines() and len(errors) == 1, err
    assert list(output.iterdir()) == [], "refused before anything is written"
    Path(REPLAY_HINT.search(errors[0])["file"]).unlink()
    return errors[0]


def test_a_team_bake_from_this_machine_without_module_source_is_refused_in_one_line(local_template, tmp_path, capfd):
    line = refused_bake(local_template, tmp_path / "out", capfd, **TEAM)
    assert line.startswith("ERROR: _module_source='': a team bake (state_bucket='acme-tf-state') is deployed by CI")
    assert f"e.g. {baking.MODULE_SOURCE_EXAMPLE}" in line  # the variable's format, with its placeholder
    where = "git::file://" if local_template.name == "clone" else str(local_template / baking.MODULES_DIR)
    assert where in line


def test_a_team_bake_from_this_machine_with_a_fetchable_module_source_bakes(local_template, tmp_path):
    answers = {**TEAM, "_module_source": FETCHABLE}
    project = Path(
        cookiecutter_main(str(local_template), no_input=True, output_dir=str(tmp_path), extra_context=answers)
    )
    sources = re.findall(r'^  source += "([^"]+)"', (project / "terraform" / "main.tf").read_text(), re.M)
    assert sources == [FETCHABLE.replace(baking.MODULE, "scheduled-dedup")]


def test_a_solo_bake_from_this_machine_calls_the_modules_there(local_template, tmp_path):
    """No state bucket: `make deploy` runs where the bake is, so the baking machine's address serves."""
    project = Path(cookiecutter_main(str(local_template), no_input=True, output_dir=str(tmp_path)))
    (source,) = re.findall(r'^  source += "([^"]+)"', (project / "terraform" / "main.tf").read_text(), re.M)
    assert baking.is_local(source)


@pytest.mark.parametrize("answers", [{}, TEAM], ids=["solo", "team"])
def test_a_module_source_without_the_placeholder_is_refused_in_one_line(tmp_path, capfd, answers):
    address = "git::https://example.com/dedup.git//terraform/modules/scheduled-dedup?ref=v2"
    line = refused_bake(ROOT, tmp_path / "out", capfd, **answers, _module_source=address)
    assert line.startswith(f"ERROR: _module_source={address!r}: must hold {{module}} where each module's name goes")


def test_a_bake_from_a_clone_calls_the_modules_at_its_remote_pinned_to_its_commit(template_repo, tmp_path):
    """No _module_source: a bake from a clone of a remote calls the modules there, at the commit it was baked from,
    and holds no copy of them."""
    git = ("git", "-C", str(template_repo))
    subprocess.run([*git, "remote", "add", "origin", "https://example.com/dedup.git"], check=True, timeout=60)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    out = tmp_path / "out"
    project = Path(
        cookiecutter_main(str(template_repo), no_input=True, output_dir=str(out), extra_context={"target": "workflow"})
    )
    assert not (project / baking.MODULES_DIR).exists()
    sources = re.findall(r'^  source += "([^"]+)"', root_configuration(project / "terraform"), re.M)
    assert sources == [
        f"git::https://example.com/dedup.git//terraform/modules/{name}?ref={head}"
        for name in ("scheduled-dedup", "scheduled-dedup-workflow")
    ]


def test_every_module_the_modules_call_is_in_the_same_package():
    """The core module calls ../image-repository and ../scheduled-dedup-project: siblings in terraform/modules, so
    every source form (a git sub-directory, an absolute path's package) carries them."""
    called = {
        sibling
        for path in (ROOT / baking.MODULES_DIR).glob("*/*.tf")
        for sibling in re.findall(r'^  source += "\.\./([\w-]+)"', path.read_text(), re.M)
    }
    assert called == {"image-repository", "scheduled-dedup-project"}
    assert sorted(path.name for path in (ROOT / baking.MODULES_DIR).iterdir()) == sorted(baking.MODULES)


@pytest.mark.parametrize(("state_bucket", "kept"), [("", False), ("acme-tf-state", True)])
def test_the_bootstrap_is_kept_only_with_a_state_bucket(tmp_path, state_bucket, kept):
    make_tree(tmp_path, baking.STATE_BUCKET_ONLY_PATHS)
    (tmp_path / "terraform" / "main.tf").write_text("shared")
    removed = baking.remove_pipeline_paths(tmp_path, state_bucket)
    assert all((tmp_path / path).exists() == kept for path in baking.STATE_BUCKET_ONLY_PATHS)
    assert removed == ([] if kept else [tmp_path / path for path in baking.STATE_BUCKET_ONLY_PATHS])
    assert (tmp_path / "terraform" / "main.tf").exists()


def test_finish_bake_prunes_and_records(tmp_path, capsys):
    project = tmp_path / "project"
    make_tree(project, [*EVERY_TARGET_ONLY_PATH, *baking.STATE_BUCKET_ONLY_PATHS, baking.TARGETS_DIR])
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / baking.VERSION_FILE).write_text("1.2.3\n")
    targets = tmp_path / "repo" / baking.TEMPLATE_DIR_NAME / baking.TARGETS_DIR
    for target in ("function", "workflow"):  # each overlay's job.py, and a part a shared file would include
        (targets / target / baking.PARTS).mkdir(parents=True)
        (targets / target / "job.py").write_text(target + " {{ cookiecutter.project_slug }}\n")
        (targets / target / baking.PARTS / "README.md").write_text("a part\n")
    baking.finish_bake(project, tmp_path / "repo", {**DEFAULT_ANSWERS, **ANSWERS})
    assert not (project / "terraform" / "bootstrap").exists()  # no state bucket answered
    assert not (project / baking.MODULES_DIR).exists()
    # No git repository: the modules are called at the checkout's local path, and the bake says so in one line.
    said = f"terraform/main.tf calls the modules at the local path {tmp_path / 'repo' / baking.MODULES_DIR}\n"
    assert capsys.readouterr().out == said
    written = yaml.safe_load((project / baking.CONFIG_FILE).read_text())
    assert (written["slug"], list(written["jobs"])) == ("cafe-q", ["nightly"])
    kept = baking.TARGET_ONLY_PATHS["workflow"]
    assert [path for path in EVERY_TARGET_ONLY_PATH if (project / path).exists()] == sorted(kept)
    recorded = json.loads((project / ".cookiecutter.json").read_text(encoding="utf-8"))
    assert (recorded["target"], recorded["template_version"]) == ("workflow", "1.2.3")
    # The chosen target's overlay, rendered over the base; its parts and every overlay gone.
    assert (project / "job.py").read_text() == "workflow cafe-q\n"
    assert not (project / baking.TARGETS_DIR).exists() and not (project / baking.PARTS).exists()


# Shared files choose no target's code: a target's files live in its overlay (baking.TARGETS_DIR), a target's part of
# a shared file is included from the overlay's PARTS by the target's name. `{{ }}` may still render a value.
# An `if` on the target in a tag or an expression (`{% if %}`, `{% elif %}`, `{{ "a" if cookiecutter.target ... }}`),
# or a variable set from it (`{% set proxy = cookiecutter.target != ... %}`, then branched on).
TARGET_BRANCH = re.compile(
    r"\{[%{]-?[^%}]*\bif\b[^%}]*\bcookiecutter\.target\b|\{%-?\s*set\b[^%]*\bcookiecutter\.target\b"
)
# Files that still branch on the target: none (each target's text is its overlay's part).
TARGET_BRANCHES_LEFT: set[str] = set()


def test_shared_files_hold_no_branch_on_the_target():
    template = ROOT / baking.TEMPLATE_DIR_NAME
    shared = [path for path in template.rglob("*") if path.is_file() and baking.TARGETS_DIR not in path.parts]
    branching = {
        path.relative_to(template).as_posix()
        for path in shared
        if TARGET_BRANCH.search(path.read_text(encoding="utf-8", errors="replace"))
    }
    assert branching == TARGET_BRANCHES_LEFT


def test_the_readme_example_of_module_source_bakes_a_team_project(tmp_path):
    """The template README's `_module_source` example, run as written (this checkout for its path): it bakes, and
    the modules' address is the example's."""
    readme = (ROOT / "README.md").read_text()
    (block,) = [text for text in re.findall(r"```sh\n(.*?)```", readme, re.S) if "_module_source=" in text]
    command = shlex.split(block.replace("\\\n", " "))
    assert command[0] == "cookiecutter"
    given = dict(argument.split("=", 1) for argument in command[2:])
    result = subprocess.run(
        [str(COOKIECUTTER), "--no-input", "-o", str(tmp_path), str(ROOT), *command[2:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert given.get("state_bucket"), "the example is a team bake"
    (project,) = tmp_path.iterdir()
    main = (project / "terraform" / "main.tf").read_text()
    assert f'  source = "{given["_module_source"].replace(baking.MODULE, "scheduled-dedup")}"\n' in main
