"""A baked project can be created with cruft and take a later template change with `cruft update`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import git_commit

pytestmark = pytest.mark.bake

CRUFT = Path(sys.executable).with_name("cruft")


def run(*command, cwd):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result


def test_cruft_create_then_update_after_a_template_change(template_repo, tmp_path):
    out = tmp_path / "projects"
    run(CRUFT, "create", str(template_repo), "--no-input", "--output-dir", str(out), cwd=tmp_path)
    project = out / "nightly-report"
    state = json.loads((project / ".cruft.json").read_text())
    assert state["template"] == str(template_repo)
    # The hooks ran under cruft: answers written, the modules called at the template's commit (cruft's _commit).
    assert (project / ".cookiecutter.json").is_file()
    module = f"git::{template_repo.as_uri()}//terraform/modules/scheduled-dedup?ref={state['commit']}"
    assert f'  source = "{module}"\n' in (project / "terraform" / "main.tf").read_text()
    assert (project / "rules.py").is_file() and (project / "config.yaml").is_file()
    assert not (project / ".template-dir").exists(), "post_gen_project.py must remove the hooks' note"
    run("git", "init", "-q", "-b", "main", cwd=project)
    git_commit(project, "baked")

    # The template changes: an edited file and a new, rendered one.
    baked_dir = template_repo / "{{cookiecutter.project_slug}}"
    job = baked_dir / "_targets" / "function" / "job.py"  # the default target's overlay (baking.TARGETS_DIR)
    job.write_text(job.read_text() + "\n# template v2: a line every baked project should receive\n")
    (baked_dir / "CHANGELOG.md").write_text("# {{ cookiecutter.project_slug }}\n\n- template v2\n")
    git_commit(template_repo, "template v2")

    stale = subprocess.run([CRUFT, "check", "--project-dir", str(project)], capture_output=True, text=True)
    assert stale.returncode != 0, "cruft check must report a project behind its template"

    run(CRUFT, "update", "--project-dir", str(project), "--skip-apply-ask", "--allow-untracked-files", cwd=tmp_path)
    assert (project / "job.py").read_text().endswith("# template v2: a line every baked project should receive\n")
    assert (project / "CHANGELOG.md").read_text() == "# nightly-report\n\n- template v2\n"
    assert not list(project.rglob("*.rej")), "a hunk of the update did not apply"
    run(CRUFT, "check", "--project-dir", str(project), cwd=tmp_path)


def test_cruft_update_of_the_protocol_applies_to_a_bake_with_other_answers(template_repo, tmp_path):
    """The protocol's modules hold no answer (they live in config.yaml), so a change to one is the same diff in
    every bake: here one beside the settings, in a bake whose every setting differs from the defaults."""
    out = tmp_path / "projects"
    answers = {
        "project_name": "Ledger Sync",
        "gcp_project_id": "billing-prod-42",
        "region": "us-central1",
        "firestore_database": "scheduler-db",
        "firestore_collection": "ledger_runs",
        "jobs": {"hourly": {"schedule": "0 * * * *", "time_zone": "America/New_York"}},
    }
    run(CRUFT, "create", str(template_repo), "--no-input", "--output-dir", str(out),
        "--extra-context", json.dumps(answers), cwd=tmp_path)  # fmt: skip
    project = out / "ledger-sync"
    settings = yaml.safe_load((project / "config.yaml").read_text())
    assert (settings["project"], settings["collection"]) == ("billing-prod-42", "ledger_runs")
    run("git", "init", "-q", "-b", "main", cwd=project)
    git_commit(project, "baked")

    protocol = template_repo / "{{cookiecutter.project_slug}}" / "config.py"
    old = "MAX_FUTURE = dt.timedelta(days=32)\n"
    assert old in protocol.read_text()
    protocol.write_text(protocol.read_text().replace(old, "MAX_FUTURE = dt.timedelta(days=33)  # template v2\n"))
    git_commit(template_repo, "template v2: the protocol changes")

    run(CRUFT, "update", "--project-dir", str(project), "--skip-apply-ask", "--allow-untracked-files", cwd=tmp_path)
    assert not list(project.rglob("*.rej")), "a hunk of the update did not apply"
    assert (project / "config.py").read_bytes() == protocol.read_bytes()
    assert yaml.safe_load((project / "config.yaml").read_text()) == settings
    run(CRUFT, "check", "--project-dir", str(project), cwd=tmp_path)


def test_cruft_create_with_extra_context_jobs_bakes_exactly_those_jobs(template_repo, tmp_path):
    """cookiecutter merges an object answer into an object default key by key: the default `nightly` job used
    to survive beside the given one. The default is text now, so the given object replaces it whole."""
    out = tmp_path / "projects"
    jobs = {"export": {"schedule": "0 2 * * *", "time_zone": "Europe/Berlin"}}
    run(CRUFT, "create", str(template_repo), "--no-input", "--output-dir", str(out),
        "--extra-context", json.dumps({"jobs": jobs}), cwd=tmp_path)  # fmt: skip
    project = out / "nightly-report"
    assert yaml.safe_load((project / "config.yaml").read_text())["jobs"] == jobs
    assert json.loads((project / ".cookiecutter.json").read_text())["jobs"] == ["export"]


@pytest.mark.parametrize("answers", [{}, {"project_slug": "X"}], ids=["baked", "refused"])
def test_the_hooks_checkout_under_cruft_is_removed(template_repo, tmp_path, answers):
    """cruft passes the hooks no _repo_dir and checks out where it tells no hook: pre_gen_project.py checks out
    _template at _commit itself, and removes it when the bake is done or refused: no directory is left in the temp
    dir (cookiecutter leaves its rendered hook scripts there, and a refusal its answers: files)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    command = [CRUFT, "create", str(template_repo), "--no-input", "--output-dir", str(tmp_path / "projects")]
    result = subprocess.run(
        [*command, "--extra-context", json.dumps(answers)],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (result.returncode == 0) == (not answers), result.stdout + result.stderr
    assert [path.name for path in temp.iterdir() if path.is_dir()] == []
