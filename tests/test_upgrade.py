"""A project baked at the previous release upgrades to this working tree (issue 28): the module `ref=` bump and
`cruft update` of the Python side, then a plan against the state an apply of the old bake left.

The template's history as a bake sees it: a git repository of the template's parts (conftest.TEMPLATE_PARTS) with
a commit per point, so that a bake pins its modules at `git::file://<repository>//...?ref=<commit>` as a team's
bake pins them at the template's remote, and `cruft update` moves them to the new commit. The points: the
previous release (CHANGELOG.md's second entry), this working tree, and older commits whose bakes the `moved`
blocks carry (OLDER): the previous release crosses no move, so those bakes are what prove the `moved` blocks.

Terraform: `terraform test` with mock providers; a run applies an old bake's root (its `module` block) and the
next plans the same answers' root of this working tree on the same state (`state_key`, Terraform 1.11+; the
pattern of Terraform's own internal/command/testdata/test/with_state_key/moved.tftest.hcl). Mock providers never
ask for a replacement, so a replacement is read from the plan: a resource deleted (its address gone: a rename
without a `moved` block), or a stateful one updated to another identity (a new name is another object).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TEMPLATE_PARTS, copy_template, git_commit

from tests.terraform_offline import terraform

pytestmark = [pytest.mark.bake, pytest.mark.terraform]

CRUFT = Path(sys.executable).with_name("cruft")
# The release entries of CHANGELOG.md: "## <version>", then its commit on a "Commit: `<sha>`" line.
RELEASE = re.compile(r"^## (\d+\.\d+\.\d+)\n\nCommit: (?:`([0-9a-f]{7,40})`)?", re.M)
# Older bakes the moved blocks carry, (commit, answers) by name: each block's `from` is in one of their states.
OLDER = {
    # Before the split into a core and a module per target (9983fc3): the audit's policy, the accounts' count,
    # the datastore grant's key (the core's moved blocks) and each proxy's resources (the root's and its module's).
    "split_function": ("9983fc3^", {}),
    "split_cloud_run_job": ("9983fc3^", {"target": "cloud_run_job"}),
    "split_workflow": ("9983fc3^", {"target": "workflow"}),
    # Before the images repository moved into its own module (ceafa44): images.tf's moved blocks.
    "images_function": ("ceafa44^", {}),
}
# What an upgrade from an older bake deletes by design, by its address in the older state: none of it holds data.
RETIRED = {
    # issue 19: one missed-run alert for every job (the audit's) replaced a metric and a policy per job.
    'module.scheduled_dedup.google_logging_metric.scheduler_attempt_failed["nightly"]',
    'module.scheduled_dedup.google_monitoring_alert_policy.scheduler_attempt_failed["nightly"]',
    # ceafa44: the build account writes to its own repository, no project-wide Artifact Registry role.
    'module.scheduled_dedup.google_project_iam_member.build["roles/artifactregistry.writer"]',
}
# A Cloud Run job's image: the root has no default (its Dockerfile's build makes it).
JOB_IMAGE = "europe-docker.pkg.dev/test-project/jobs/nightly-report:test"
# The git repository that holds the template's history: this checkout, or (tests/mutants/run.py, whose copy has
# no .git) the one it names.
HISTORY = Path(os.environ.get("TEMPLATE_HISTORY", ROOT))
ANSWERS = {"alert_email": "ops@example.com"}  # an alert address: the root's check then passes on apply
# What an upgrade must never destroy or replace: each holds data or identity that a new one would not have
# (the run records and their TTL policy, the schedules, the accounts others grant to, the queued tasks, the
# function's sources and images). Per type, the attributes that name the object: a new value is another object.
STATEFUL = {
    "google_firestore_database": ("project", "name", "location_id"),
    "google_firestore_field": ("project", "database", "collection", "field"),
    "google_cloud_scheduler_job": ("project", "region", "name"),
    "google_service_account": ("project", "account_id"),
    "google_cloud_tasks_queue": ("project", "location", "name"),
    "google_storage_bucket": ("project", "location", "name"),
    "google_artifact_registry_repository": ("project", "location", "repository_id"),
}
# The user's work in job.py: the body of the default job's function, replaced as its docstring invites.
TEMPLATE_BODY = '    logger.info("scheduled work for %s at %s", context.job_id, context.schedule_time.isoformat())\n'
USER_BODY = '    logger.info("exporting the report of %s", context.run_id)  # the user\'s work\n'


def releases() -> list[tuple[str, str | None]]:
    """(version, commit) of each CHANGELOG.md entry, newest first; the newest is VERSION's."""
    found = RELEASE.findall((ROOT / "CHANGELOG.md").read_text())
    return [(version, commit or None) for version, commit in found]


def run(*command, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result


def commit_tree(repo: Path, message: str, fill) -> str:
    """Replace the template's parts in `repo` by what `fill(repo)` writes; commit; return the commit."""
    for part in TEMPLATE_PARTS:
        path = repo / part
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    fill(repo)
    git_commit(repo, message)
    return run("git", "rev-parse", "HEAD", cwd=repo).stdout.strip()


def from_history(commit: str):
    def fill(repo: Path) -> None:
        listed = subprocess.run(
            ["git", "-C", str(HISTORY), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, timeout=60
        )
        assert listed.returncode == 0, f"{HISTORY} lacks commit {commit}: fetch the history (git fetch --unshallow)"
        present = run("git", "-C", str(HISTORY), "ls-tree", "--name-only", commit, cwd=repo).stdout.split()
        archive = subprocess.run(
            ["git", "-C", str(HISTORY), "archive", commit, *[part for part in TEMPLATE_PARTS if part in present]],
            capture_output=True,
            check=True,
            timeout=120,
        )
        subprocess.run(["tar", "-x", "-C", str(repo)], input=archive.stdout, check=True, timeout=120)

    return fill


def cruft_create(repo: Path, commit: str, output: Path, answers: dict | None = None) -> Path:
    output.mkdir()
    run(CRUFT, "create", str(repo), "--checkout", commit, "--no-input", "--output-dir", str(output),
        "--extra-context", json.dumps({**ANSWERS, **(answers or {})}), cwd=output.parent)  # fmt: skip
    (project,) = output.iterdir()
    run("git", "init", "-q", "-b", "main", cwd=project)
    git_commit(project, "baked")
    return project


def cruft_update(project: Path) -> None:
    run(CRUFT, "update", "--project-dir", str(project), "--skip-apply-ask", "--allow-untracked-files",
        cwd=project.parent)  # fmt: skip


def conflicts(project: Path) -> list[str]:
    """What an update could not apply: rejected hunks, conflict markers, unmerged paths."""
    found = [str(path.relative_to(project)) for path in project.rglob("*.rej")]
    for path in project.rglob("*"):
        if ".git" not in path.parts and path.is_file() and "<<<<<<< " in path.read_text(errors="replace"):
            found.append(f"{path.relative_to(project)}: conflict markers")
    status = run("git", "status", "--porcelain", cwd=project).stdout.splitlines()
    return found + [line for line in status if line[:2] in ("UU", "AA", "DU", "UD")]


def project_files(project: Path) -> dict[str, bytes]:
    skipped = {".git", ".cruft.json"}
    return {
        path.relative_to(project).as_posix(): path.read_bytes()
        for path in sorted(project.rglob("*"))
        if path.is_file() and not skipped & set(path.relative_to(project).parts)
    }


UPGRADE_TEST = """\
# Each pair: an apply of an old bake (its root, its modules at its ref), then a plan of this working tree's root
# for the same answers on the same state.
mock_provider "google" {{}}
mock_provider "archive" {{}}
mock_provider "time" {{}}
{runs}"""
RUNS = """
run "{name}_applied" {{
  state_key = "{name}"
  module {{
    source = "./{name}/old/terraform"
  }}
{variables}}}

run "{name}_upgraded" {{
  state_key = "{name}"
  command   = plan
  module {{
    source = "./{name}/new/terraform"
  }}
{variables}}}
"""
# The tested directory: its own configuration is only the providers the runs' roots use.
PROVIDERS = """\
terraform {
  required_providers {
    google  = { source = "hashicorp/google" }
    archive = { source = "hashicorp/archive" }
    time    = { source = "hashicorp/time" }
  }
}
"""


def plan_upgrades(workdir: Path, pairs: dict[str, tuple[Path, Path, dict]]) -> dict[str, list[dict]]:
    """`terraform test` of each pair {name: (old bake, new bake, answers)}, copied under `workdir` (a run's module
    source is a local path under the tested directory): {name: the upgrade plan's resource changes}."""
    workdir.mkdir()
    (workdir / "versions.tf").write_text(PROVIDERS)
    runs = []
    for name, (old, new, answers) in pairs.items():
        for side, bake in (("old", old), ("new", new)):
            shutil.copytree(bake, workdir / name / side, ignore=shutil.ignore_patterns(".git"))
        variables = f'  variables {{\n    job_image = "{JOB_IMAGE}"\n  }}\n' if "target" in answers else ""
        runs.append(RUNS.format(name=name, variables=variables))
    (workdir / "tests").mkdir()
    (workdir / "tests" / "upgrade.tftest.hcl").write_text(UPGRADE_TEST.format(runs="".join(runs)))
    result = terraform(workdir, "init", "-backend=false")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    result = terraform(workdir, "test", "-verbose", "-json", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    plans = {}
    for line in result.stdout.splitlines():
        message = json.loads(line)
        if message.get("type") == "test_plan":
            plans[message["@testrun"].removesuffix("_upgraded")] = message["test_plan"]["resource_changes"]
    assert set(plans) == set(pairs), result.stdout[-3000:]
    return plans


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory):
    """The history repository, the bakes at each point, the cruft updates and the upgrade plans."""
    tmp = tmp_path_factory.mktemp("upgrade")
    (latest, _), (previous_version, previous_commit) = releases()[:2]
    repo = tmp / "template"
    repo.mkdir()
    run("git", "init", "-q", "-b", "main", cwd=repo)
    commits = dict.fromkeys(commit for commit, _ in OLDER.values())  # oldest first, each once
    older = {commit: commit_tree(repo, commit, from_history(commit)) for commit in commits}
    previous = commit_tree(repo, previous_version, from_history(previous_commit))
    current = commit_tree(repo, latest, copy_template)

    untouched = cruft_create(repo, previous, tmp / "untouched")
    snapshot = shutil.copytree(untouched, tmp / "previous-bake", ignore=shutil.ignore_patterns(".git"))
    edited = cruft_create(repo, previous, tmp / "edited")
    job = edited / "job.py"
    assert TEMPLATE_BODY in job.read_text()
    job.write_text(job.read_text().replace(TEMPLATE_BODY, USER_BODY))
    git_commit(edited, "the user's work")
    for project in (untouched, edited):
        cruft_update(project)
    fresh = cruft_create(repo, current, tmp / "fresh")

    pairs = {"previous": (snapshot, untouched, {})}
    for name, (commit, answers) in OLDER.items():
        old = cruft_create(repo, older[commit], tmp / f"{name}-old", answers)
        new = fresh if not answers else cruft_create(repo, current, tmp / f"{name}-new", answers)
        pairs[name] = (old, new, answers)
    return {
        "plans": plan_upgrades(tmp / "plan", pairs),
        "untouched": untouched,
        "edited": edited,
        "fresh": fresh,
        "commits": {"previous": previous, "current": current},
    }


def destroyed_or_replaced(changes: list[dict], retired: set[str] = frozenset()) -> list[str]:
    """What a plan deletes (but the `retired`), and the stateful resources it updates to another identity."""
    found = []
    for change in changes:
        actions, before, after = change["change"]["actions"], change["change"]["before"], change["change"]["after"]
        # A retired resource may be deleted at the address a moved block gave it: either address names it.
        addresses = {change["address"], change.get("previous_address")}
        if "delete" in actions and not addresses & retired:
            found.append(f"{change['address']}: {actions}")
        elif actions == ["update"] and change["type"] in STATEFUL:
            unknown = change["change"].get("after_unknown") or {}
            identity = STATEFUL[change["type"]]
            renamed = [key for key in identity if not unknown.get(key) and before.get(key) != after.get(key)]
            if renamed:
                found.append(f"{change['address']}: {renamed} change, another object")
    return found


@pytest.mark.parametrize("name", ["previous", *OLDER])
def test_the_upgrade_plan_destroys_or_replaces_nothing(upgrade, name):
    """Nothing deleted (a stateful resource least of all: data, schedules, identities), but what a release retired
    by design; no stateful resource renamed. From an older bake, the moved blocks carry what changed address."""
    changes = upgrade["plans"][name]
    # Not vacuous: the plan holds every stateful type a function bake has (an apply of the old bake made them).
    types = {change["type"] for change in changes}
    assert set(STATEFUL) - {"google_artifact_registry_repository"} <= types
    assert destroyed_or_replaced(changes, RETIRED if name in OLDER else set()) == []


def test_the_older_bakes_keep_their_resources_through_the_moved_blocks(upgrade):
    moved = {
        change["previous_address"]: change["address"]
        for changes in upgrade["plans"].values()
        for change in changes
        if change.get("previous_address")
    }
    assert moved.get("module.scheduled_dedup.google_artifact_registry_repository.images") == (
        "module.scheduled_dedup.module.images[0].google_artifact_registry_repository.this"
    )
    assert moved.get("module.scheduled_dedup.google_service_account.runtime") == (
        "module.scheduled_dedup.google_service_account.runtime[0]"
    )
    assert moved.get("module.scheduled_dedup.google_cloud_run_v2_job.this[0]") == (
        "module.cloud_run_job.google_cloud_run_v2_job.this"
    )
    assert moved.get("module.scheduled_dedup.google_workflows_workflow.this[0]") == (
        "module.workflow.google_workflows_workflow.this"
    )


def test_the_plan_check_finds_a_deletion_and_a_rename():
    bucket = {"project": "p", "location": "EU", "name": "a-source"}
    changes = [
        {"address": "x.a", "type": "google_storage_bucket", "change": {"actions": ["delete"], "before": bucket}},
        {
            "address": "x.b",
            "type": "google_storage_bucket",
            "change": {"actions": ["update"], "before": bucket, "after": {**bucket, "name": "b-source"}},
        },
        {"address": "x.c", "type": "google_monitoring_dashboard", "change": {"actions": ["delete"], "before": {}}},
    ]
    for change in changes:
        change["change"].setdefault("after", None)
    assert destroyed_or_replaced(changes, {"x.c"}) == ["x.a: ['delete']", "x.b: ['name'] change, another object"]


def test_an_untouched_bake_updates_with_no_conflict_to_a_fresh_bake_of_the_release(upgrade):
    project = upgrade["untouched"]
    assert conflicts(project) == []
    state = json.loads((project / ".cruft.json").read_text())
    assert state["commit"] == upgrade["commits"]["current"]
    # The modules' ref= bumped with the rest: the update leaves the project as a fresh bake of the release.
    assert project_files(project) == project_files(upgrade["fresh"])
    run(CRUFT, "check", "--project-dir", str(project), cwd=project.parent)


def test_a_bake_whose_job_py_the_user_edited_keeps_the_users_work(upgrade):
    project, fresh = upgrade["edited"], upgrade["fresh"]
    assert conflicts(project) == []
    job = (project / "job.py").read_text()
    assert USER_BODY in job and TEMPLATE_BODY not in job
    # The template's own changes to job.py arrived around the user's: it is the fresh bake's with the user's body.
    assert job == (fresh / "job.py").read_text().replace(TEMPLATE_BODY, USER_BODY)


def test_the_bakes_readme_says_how_to_upgrade(upgrade):
    readme = (upgrade["fresh"] / "README.md").read_text()
    (line,) = [line for line in readme.split("\n- ") if line.startswith("Upgrade: ")]
    for step in ("`template_version`", "`CHANGELOG.md`", "`cruft update`", "`terraform init -upgrade`"):
        assert step in line, line


def test_the_changelog_names_this_version_and_each_earlier_release_its_commit():
    found = releases()
    assert found[0][0] == (ROOT / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", (ROOT / "VERSION").read_text())
    assert len(found) >= 2 and all(commit for _, commit in found[1:]), found
