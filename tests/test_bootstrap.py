"""The baked project's team delivery: the gcs backend and terraform/bootstrap, for every matrix bake.

With a state_bucket answer the main root gets a gcs backend (prefix: the slug) and the bake gets
terraform/bootstrap, checked offline like the main root (fmt, validate, terraform test with a mocked
provider, checkov). Without one there is neither. The Workload Identity provider's CEL is evaluated
with cel-python for the tokens GitHub Actions really sends (claims per
https://docs.github.com/en/actions/reference/security/oidc#example-subject-claims): only this
repository's tokens are admitted, and only a production-environment job on main may act as the
deployer. The deployer's roles are the README's list, and one per kind of resource the module makes.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import baking  # the bake hook's module addresses (conftest puts hooks/ on the path)
import celpy
import hcl2
import pytest
import questions  # the bake hook's check of the answers (conftest puts hooks/ on the path)
from conftest import MATRIX, MODULE_SOURCE, ROOT, bake, called_modules
from test_terraform import output_of, run_checkov, run_tf

pytestmark = pytest.mark.terraform

BUCKET_BAKES = [name for name, answers in MATRIX.items() if answers.get("state_bucket")]


def test_the_matrix_covers_both_kinds_of_state():
    assert BUCKET_BAKES and len(BUCKET_BAKES) < len(MATRIX), BUCKET_BAKES


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def project(request, tmp_path_factory) -> Path:
    return bake(tmp_path_factory.mktemp(f"delivery-{request.param}"), **MATRIX[request.param])


def answers_of(project: Path) -> dict:
    return json.loads((project / ".cookiecutter.json").read_text())


# Plain values: strings without their quotes, blocks without python-hcl2's markers, no comments.
HCL = hcl2.SerializationOptions(with_comments=False, explicit_blocks=False, strip_string_quotes=True)


def load_hcl(path: Path) -> dict:
    with path.open() as file:
        return hcl2.load(file, serialization_options=HCL)


def test_backend_and_bootstrap_follow_the_state_bucket_answer(project):
    answers = answers_of(project)
    backend = load_hcl(project / "terraform" / "backend.tf")
    if answers["state_bucket"]:
        gcs = backend["terraform"][0]["backend"][0]["gcs"]
        assert gcs == {
            "bucket": answers["state_bucket"],
            "prefix": answers["project_slug"],  # several projects share one bucket
        }
        assert (project / "terraform" / "bootstrap" / "main.tf").is_file()
    else:
        assert "terraform" not in backend, backend  # local state: no backend block at all
        assert not (project / "terraform" / "bootstrap").exists()


# --- terraform/bootstrap passes the same offline checks as the main root ------------------------


@pytest.fixture(scope="module", params=BUCKET_BAKES, ids=BUCKET_BAKES)
def bootstrap(request, tmp_path_factory) -> Path:
    project = bake(tmp_path_factory.mktemp(f"bootstrap-{request.param}"), **MATRIX[request.param])
    workdir = project / "terraform" / "bootstrap"
    result = run_tf(workdir, "init", "-backend=false")
    assert result.returncode == 0, output_of(result)
    return workdir


def test_bootstrap_fmt(bootstrap):
    result = run_tf(bootstrap, "fmt", "-check", "-recursive", "-diff")
    assert result.returncode == 0, f"not in terraform fmt style:\n{result.stdout}{result.stderr}"


def test_bootstrap_validate(bootstrap):
    result = run_tf(bootstrap, "validate")
    assert result.returncode == 0, output_of(result)
    assert "Success! The configuration is valid" in result.stdout


def test_bootstrap_terraform_test(bootstrap):
    result = run_tf(bootstrap, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success! 5 passed, 0 failed" in result.stdout, result.stdout


def test_bootstrap_checkov(bootstrap):
    result, failed, report = run_checkov(bootstrap)
    assert failed == [], f"checkov failed checks: {failed}\n{result.stderr[-2000:]}"
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert report["summary"]["passed"] >= 50, report["summary"]
    ran = {c["check_id"] for c in report["results"]["passed_checks"]}
    # Versioning, uniform access, public access prevention on the state bucket; no public IAM member.
    assert {"CKV_GCP_78", "CKV_GCP_29", "CKV_GCP_114", "CKV_SDD_3"} <= ran, ran


def test_bootstrap_test_fails_when_the_condition_admits_any_repository(bootstrap, tmp_path):
    """The baked tftest's exact assertion on the provider's condition can fail."""
    # The whole project, as the bootstrap's tests sit beside it.
    shutil.copytree(bootstrap.parent.parent, tmp_path / "project", symlinks=True)
    copy = tmp_path / "project" / "terraform" / "bootstrap"
    main = copy / "main.tf"
    text = main.read_text()
    condition = re.search(r'attribute_condition = "(.*)"\n', text).group(1)
    main.write_text(text.replace(condition, "assertion.repository != ''"))
    result = run_tf(copy, "test")
    assert result.returncode != 0
    assert "The provider admits tokens of" in output_of(result), output_of(result)


# --- who may plan, who may deploy: the provider's CEL, evaluated ----------------------------------

POOL = "projects/123456789/locations/global/workloadIdentityPools/github-pool"
# The repository's and its owner's numeric ids, as the bootstrap's variables give them (its tftest's).
REPOSITORY_ID, OWNER_ID = "123456789", "987654"
VARIABLES = {"${var.github_repository_id}": REPOSITORY_ID, "${var.github_repository_owner_id}": OWNER_ID}


def resolved(expression: str) -> str:
    for reference, value in VARIABLES.items():
        expression = expression.replace(reference, value)
    assert "${" not in expression, expression
    return expression


def bootstrap_config(project: Path) -> dict:
    return load_hcl(project / "terraform" / "bootstrap" / "main.tf")


def bootstrap_locals(project: Path) -> dict:
    return {key: value for block in bootstrap_config(project)["locals"] for key, value in block.items()}


def cel(expression: str):
    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def admitted(project: Path, token: dict) -> bool:
    """The provider's attribute condition: does Google's STS accept this token at all?"""
    condition = resolved(bootstrap_locals(project)["attribute_condition"])
    return bool(cel(condition).evaluate({"assertion": celpy.json_to_cel(token)}))


def principals(project: Path, token: dict) -> set[str]:
    """What Google's STS makes of a GitHub token: nothing if the condition refuses it, else the
    principal of its subject and a principalSet per mapped attribute (IAM principal identifiers)."""
    local = bootstrap_locals(project)
    activation = {"assertion": celpy.json_to_cel(token)}
    if not admitted(project, token):
        return set()
    mapped = {
        name: str(cel(expression).evaluate(activation)) for name, expression in local["attribute_mapping"].items()
    }
    found = {f"principal://iam.googleapis.com/{POOL}/subject/{mapped.pop('google.subject')}"}
    return found | {f"principalSet://iam.googleapis.com/{POOL}/{name}/{value}" for name, value in mapped.items()}


def binding_member(project: Path, binding: str) -> str:
    """The member of a workloadIdentityUser binding, its interpolations resolved."""
    resources = bootstrap_config(project)["resource"]
    (block,) = [
        r["google_service_account_iam_member"][binding]
        for r in resources
        if binding in r.get("google_service_account_iam_member", {})
    ]
    member = block["member"]
    repository = bootstrap_locals(project)["repository"]
    member = member.replace("${google_iam_workload_identity_pool.github.name}", POOL)
    return resolved(member.replace("${local.repository}", repository))


def tokens(repository: str) -> dict[str, tuple[dict, bool, bool]]:
    """name: (claims, may plan, may deploy)."""
    owner, name = repository.split("/")

    def token(repo: str, sub: str, ref: str, ids: tuple[str, str] | None = None) -> dict:
        # GitHub's claims (OpenID Connect reference): the name, and the ids that survive no re-creation.
        repository_id, owner_id = ids or ((REPOSITORY_ID, OWNER_ID) if repo == repository else ("5550001", "5550002"))
        return {
            "repository": repo,
            "repository_owner": repo.split("/")[0],
            "repository_id": repository_id,
            "repository_owner_id": owner_id,
            "sub": f"repo:{repo}:{sub}",
            "ref": ref,
        }

    return {
        "pull request": (token(repository, "pull_request", "refs/pull/7/merge"), True, False),
        "pull request job naming the production environment": (
            token(repository, "environment:production", "refs/pull/7/merge"),
            True,
            False,
        ),
        "push to main, no environment": (token(repository, "ref:refs/heads/main", "refs/heads/main"), True, False),
        "production on main": (token(repository, "environment:production", "refs/heads/main"), True, True),
        "production on another branch": (
            token(repository, "environment:production", "refs/heads/feature"),
            True,
            False,
        ),
        "staging on main": (token(repository, "environment:staging", "refs/heads/main"), True, False),
        "tag push": (token(repository, "ref:refs/tags/v1", "refs/tags/v1"), True, False),
        "another repository, production on main": (
            token(f"{owner}/{name}-fork", "environment:production", "refs/heads/main"),
            False,
            False,
        ),
        "another owner, same name": (
            token(f"x{owner}/{name}", "environment:production", "refs/heads/main"),
            False,
            False,
        ),
        "the name in another case": (
            token(repository.swapcase(), "environment:production", "refs/heads/main"),
            False,
            False,
        ),
        # The name alone proves nothing: a repository deleted and re-created, or an owner name taken over.
        "the same name, re-created (new id)": (
            token(repository, "environment:production", "refs/heads/main", ("5550003", OWNER_ID)),
            False,
            False,
        ),
        "the same name under a new owner account (new owner id)": (
            token(repository, "environment:production", "refs/heads/main", (REPOSITORY_ID, "5550004")),
            False,
            False,
        ),
    }


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_only_this_repository_plans_and_only_production_on_main_deploys(bake_name, tmp_path):
    project = bake(tmp_path, **MATRIX[bake_name])
    repository = answers_of(project)["repository"]
    planner = binding_member(project, "planner_workload_identity")
    deployer = binding_member(project, "deployer_workload_identity")
    verdicts = {}
    for name, (claims, may_plan, may_deploy) in tokens(repository).items():
        # The condition alone keeps every other repository out, whatever the bindings say.
        ours = (claims["repository_id"], claims["repository_owner_id"]) == (REPOSITORY_ID, OWNER_ID)
        assert admitted(project, claims) == ours, (name, claims)
        found = principals(project, claims)
        verdicts[name] = (planner in found, deployer in found)
        assert verdicts[name] == (may_plan, may_deploy), (name, claims, found)
    assert sum(deploys for _, deploys in verdicts.values()) == 1


def test_the_longest_repository_the_hook_allows_still_fits_google_subject(tmp_path):
    """google.subject "cannot exceed 127 bytes" (IAM API, WorkloadIdentityPoolProvider.attributeMapping),
    or the token exchange fails at run time; questions.check_repository refuses longer names at bake time."""
    repository = "o/" + "r" * 97
    assert questions.check_repository(repository, "long-name-state")
    project = bake(tmp_path, state_bucket="long-name-state", repository=repository)
    subjects = [
        p.rsplit("/subject/", 1)[1]
        for claims, _, _ in tokens(repository).values()
        if claims["repository"] == repository
        for p in principals(project, claims)
        if "/subject/" in p
    ]
    assert max(len(subject.encode()) for subject in subjects) == questions.GOOGLE_SUBJECT_MAX_BYTES


# --- the deployer holds exactly the documented roles, one per kind of resource ----------------------

# The role that lets `terraform apply` create, change and delete each resource type the module uses
# (https://cloud.google.com/iam/docs/understanding-roles; docs/iam.md says why each).
ROLE_FOR_RESOURCE = {
    "google_project_service": "roles/serviceusage.serviceUsageAdmin",
    "google_project_iam_member": "roles/resourcemanager.projectIamAdmin",
    "google_cloudfunctions2_function": "roles/cloudfunctions.admin",
    "google_cloud_run_v2_service_iam_member": "roles/run.admin",  # run.developer cannot set IAM policies
    "google_cloud_run_v2_job": "roles/run.admin",
    "google_cloud_run_v2_job_iam_member": "roles/run.admin",
    "google_storage_bucket": "roles/storage.admin",
    "google_storage_bucket_object": "roles/storage.admin",
    "google_cloud_scheduler_job": "roles/cloudscheduler.admin",
    # The deliveries queue and its enqueuer grants (IAM "Cloud Tasks roles and permissions": queueAdmin
    # holds cloudtasks.queues.*, setIamPolicy included).
    "google_cloud_tasks_queue": "roles/cloudtasks.queueAdmin",
    "google_cloud_tasks_queue_iam_member": "roles/cloudtasks.queueAdmin",
    "google_firestore_database": "roles/datastore.owner",
    "google_firestore_field": "roles/datastore.owner",
    "google_logging_metric": "roles/logging.configWriter",
    "google_monitoring_alert_policy": "roles/monitoring.alertPolicyEditor",
    "google_monitoring_dashboard": "roles/monitoring.dashboardEditor",
    "google_monitoring_notification_channel": "roles/monitoring.notificationChannelEditor",
    "google_workflows_workflow": "roles/workflows.editor",
}
# Made by terraform/bootstrap, not by the deployer: the function's accounts (its local.workload_accounts),
# on each of which the deployer gets actAs, and no project-wide service-account role (IAM "Configure
# resource-based access": a condition cannot narrow those to some accounts).
# The function's image repository and the build account's grant on it too (its module "images"): the
# role that makes them, roles/artifactregistry.admin, sets the IAM policy of every repository of the
# project, and no IAM condition can test a repository's name (IAM "Resource attributes for IAM
# Conditions" lists no Artifact Registry attribute).
MADE_BY_THE_BOOTSTRAP = {
    "google_service_account",
    "google_artifact_registry_repository",
    "google_artifact_registry_repository_iam_member",
    # Cloud Tasks' Data Access audit logs: project-level, set by the owner (the root passes
    # task_queue.data_access_logs = false: tests/test_enqueuer_audit_log.py).
    "google_project_iam_audit_config",
}


def module_files(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> list[Path]:
    return [path for module in called_modules(project, modules) for path in sorted(module.glob("*.tf"))]


def module_resource_types(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> set[str]:
    """The Google resource types the modules a bake calls make (other providers' need no role): its target's."""
    found = re.compile(r'^resource "(google_\w+)"', re.M)
    return {t for path in module_files(project, modules) for t in found.findall(path.read_text())}


def documented_roles(project: Path) -> list[str]:
    """The rows of the README's deployer table (section "The deployer's roles")."""
    readme = (project / "README.md").read_text()
    section = readme.split("### The deployer's roles", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `(roles/[\w.]+)` \|", section, re.M)


def roles_needed(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> set[str]:
    """One project role per Google resource type the modules make that the bootstrap does not make for them."""
    types = module_resource_types(project, modules) - MADE_BY_THE_BOOTSTRAP
    unknown = types - set(ROLE_FOR_RESOURCE)
    assert not unknown, f"give {unknown} a role here, in terraform/bootstrap's deployer_roles and in the README"
    return {ROLE_FOR_RESOURCE[t] for t in types}


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_deployer_roles_are_the_documented_ones_and_what_the_module_needs(bake_name, tmp_path):
    project = bake(tmp_path, **MATRIX[bake_name])
    granted = bootstrap_locals(project)["deployer_roles"]
    assert len(set(granted)) == len(granted), granted
    assert sorted(documented_roles(project)) == sorted(granted)
    needed = roles_needed(project)
    assert set(granted) == needed, {"missing": needed - set(granted), "not needed": set(granted) - needed}


def module_account_ids(project: Path) -> set[str]:
    """The ids of the accounts the bake's modules make when none is given (account_id = "${var.slug}-...")."""
    slug = answers_of(project)["project_slug"]
    found = re.compile(r'^  account_id += "\$\{var\.slug\}-([a-z]+)"', re.M)
    return {f"{slug}-{suffix}" for path in module_files(project) for suffix in found.findall(path.read_text())}


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_deployer_acts_as_exactly_the_bakes_accounts_and_holds_no_project_service_account_role(bake_name, tmp_path):
    """Project-wide roles/iam.serviceAccountUser acts as every account of the project and
    serviceAccountAdmin grants that to itself; IAM Conditions cannot narrow either by account (IAM
    "Configure resource-based access" lists the services whose resource.name a condition can test:
    not IAM). So the bootstrap makes the modules' accounts and grants actAs on each one."""
    project = bake(tmp_path, **MATRIX[bake_name])
    local = bootstrap_locals(project)
    assert not [role for role in local["deployer_roles"] if role.startswith("roles/iam.serviceAccount")]
    accounts = local["workload_accounts"]
    assert set(accounts.values()) == module_account_ids(project) and len(module_account_ids(project)) == 4
    resources = bootstrap_config(project)["resource"]
    (made,) = [
        r["google_service_account"]["workload"] for r in resources if "workload" in r.get("google_service_account", {})
    ]
    assert made["for_each"] == "${local.workload_accounts}" and made["account_id"] == "${each.value}"
    grants = [body for r in resources for name, body in r.get("google_service_account_iam_member", {}).items()]
    (acts_as,) = [g for g in grants if g["role"] == "roles/iam.serviceAccountUser"]
    assert acts_as == {
        "for_each": "${google_service_account.workload}",
        "service_account_id": "${each.value.name}",
        "role": "roles/iam.serviceAccountUser",
        "member": "${google_service_account.deployer.member}",
    }
    assert [g["role"] for g in grants if g is not acts_as] == ["roles/iam.workloadIdentityUser"] * 2


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_root_runs_as_the_bootstraps_accounts_and_makes_none(bake_name, tmp_path):
    """The root's plan (terraform test against mock providers, -verbose prints every planned instance):
    no service account of its own; the function, its build, the Scheduler jobs and the target run as
    the accounts terraform/bootstrap makes, by their emails."""
    project = bake(tmp_path, **MATRIX[bake_name])
    workdir = project / "terraform"
    assert run_tf(workdir, "init", "-backend=false").returncode == 0
    result = run_tf(workdir, "test", "-filter=tests/root.tftest.hcl", "-verbose")
    assert result.returncode == 0, output_of(result)
    planned = set(re.findall(r"^# (module\.\S+):$", result.stdout, re.M))
    assert len(planned) > 30, sorted(planned)
    assert not [address for address in planned if ".google_service_account." in address], sorted(planned)
    project_id = answers_of(project)["gcp_project_id"]
    emails = {
        key: f"{account}@{project_id}.iam.gserviceaccount.com"
        for key, account in bootstrap_locals(project)["workload_accounts"].items()
    }
    # The instance's attributes as -verbose prints them: name = "value", the "=" aligned with spaces.
    uses = {
        "runtime": ("service_account_email", re.escape(emails["runtime"])),
        "invoker": ("service_account_email", re.escape(emails["invoker"])),
        "build": ("service_account", re.escape(f"projects/{project_id}/serviceAccounts/{emails['build']}")),
        # The Cloud Run job takes the email, the workflow the account's name.
        "target": (
            "service_account(?:_email)?",
            f"(?:{re.escape(f'projects/{project_id}/serviceAccounts/')})?{re.escape(emails['target'])}",
        ),
    }
    found = {
        key: bool(re.search(rf'^ +{name} += "{value}"$', result.stdout, re.M)) for key, (name, value) in uses.items()
    }
    assert found == dict.fromkeys(uses, True), result.stdout[-3000:]


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_deployer_holds_no_artifact_registry_role_and_the_bootstrap_makes_the_repository(bake_name, tmp_path):
    """roles/artifactregistry.admin project-wide would let the deployer set the IAM policy of every repository
    of the project. The bootstrap makes the image repository with the modules' own definition and grants the
    build account, and only it, roles/artifactregistry.writer on it."""
    project = bake(tmp_path, **MATRIX[bake_name])
    roles = bootstrap_locals(project)["deployer_roles"]
    assert not [role for role in roles if role.startswith("roles/artifactregistry.")], roles
    (images,) = [block["images"] for block in bootstrap_config(project)["module"] if "images" in block]
    slug = answers_of(project)["project_slug"]
    assert (images["source"], images["repository_id"], images["location"]) == (
        MODULE_SOURCE.replace(baking.MODULE, "image-repository"),
        f"{slug}-images",
        "${var.region}",
    )
    assert images["writers"] == {"build": '${google_service_account.workload["build"].member}'}
    assert "images_kept" not in images  # the module's one default, as the core module's


def planned_attributes(output: str, address: str) -> dict[str, str]:
    """The string attributes of one planned instance, as `terraform test -verbose` prints it."""
    block = output.split(f"# {address}:\n", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r'^ +(\w+) += "([^"]*)"$', block, re.M))


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_bootstraps_repository_is_the_functions_docker_repository(bake_name, tmp_path):
    """The root's plan pushes the function's images to the repository the bootstrap's plan makes (and makes
    none): both plans (mock providers, -verbose) from the baked defaults."""
    project = bake(tmp_path, **MATRIX[bake_name])
    bootstrap = project / "terraform" / "bootstrap"
    assert run_tf(bootstrap, "init", "-backend=false").returncode == 0
    made = run_tf(bootstrap, "test", "-verbose")
    assert made.returncode == 0, output_of(made)
    repository = planned_attributes(made.stdout, "module.images.google_artifact_registry_repository.this")
    root = project / "terraform"
    assert run_tf(root, "init", "-backend=false").returncode == 0
    used = run_tf(root, "test", "-filter=tests/root.tftest.hcl", "-verbose")
    assert used.returncode == 0, output_of(used)
    assert "google_artifact_registry_repository" not in used.stdout
    (docker_repository,) = set(re.findall(r'^ +docker_repository += "([^"]*)"$', used.stdout, re.M))
    assert docker_repository == "projects/{project}/locations/{location}/repositories/{repository_id}".format(
        **repository
    )


def test_a_new_kind_of_resource_in_the_module_needs_its_role(tmp_path):
    project = bake(tmp_path, **MATRIX[BUCKET_BAKES[0]])
    granted = set(bootstrap_locals(project)["deployer_roles"])
    modules = shutil.copytree(ROOT / baking.MODULES_DIR, tmp_path / "modules")
    module = modules / "scheduled-dedup"
    (module / "dashboard.tf").unlink()
    assert roles_needed(project, modules) == granted - {"roles/monitoring.dashboardEditor"}
    (module / "dashboard.tf").write_text('resource "google_monitoring_dashboard" "this" {}\n')
    assert roles_needed(project, modules) == granted
    (module / "topic.tf").write_text('resource "google_pubsub_topic" "this" {}\n')
    with pytest.raises(AssertionError, match="google_pubsub_topic"):
        roles_needed(project, modules)


# --- least privilege: what the deployer may grant, what the planner may read (issue 19) -------------


def module_project_roles(project: Path) -> set[str]:
    """Every role the bake's modules grant on the project (google_project_iam_member), literal or in a local."""
    roles = set()
    for path in module_files(project):
        text = path.read_text()
        for block in re.findall(r'resource "google_project_iam_member" "\w+" \{\n(.*?)\n\}', text, re.S):
            literal = re.search(r'^  role += "(roles/[\w.]+)"', block, re.M)
            if literal:
                roles.add(literal.group(1))
            else:  # for_each over a local set of roles (iam.tf, build_roles)
                local = re.search(r"for_each = local\.(\w+)", block).group(1)
                listed = re.search(rf"^  {local} = toset\(\[(.*?)\]\)", text, re.M | re.S).group(1)
                roles |= set(re.findall(r'"(roles/[\w.]+)"', listed))
    return roles


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_deployer_may_grant_only_the_roles_the_modules_grant(bake_name, tmp_path):
    """An unconditional projectIamAdmin lets the deployer grant itself roles/owner. IAM "Set limits on
    granting roles": a condition api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly([...])."""
    project = bake(tmp_path, **MATRIX[bake_name])
    local = bootstrap_locals(project)
    assert sorted(local["grantable_roles"]) == sorted(module_project_roles(project))
    conditions = local["deployer_conditions"]
    expression = conditions["roles/resourcemanager.projectIamAdmin"]["expression"]
    listed = '${join(", ", [for role in local.grantable_roles : "\'${role}\'"])}'
    assert expression == f"api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly([{listed}])"
    assert "roles/resourcemanager.projectIamAdmin" in local["deployer_roles"]
    # storage.admin reaches the source bucket the module names <project>-<slug>-src, and no other bucket.
    assert local["source_bucket"] == "${var.project_id}-" + answers_of(project)["project_slug"] + "-src"
    assert storage_admin_reaches(project) == {
        "the project (buckets are listed and created there)": True,
        "the source bucket": True,
        "an object of the source bucket": True,
        "a managed folder of the source bucket": True,
        "another bucket": False,
        "an object of another bucket": False,
        "a managed folder of another bucket": False,
        "a bucket whose name starts with the source bucket's": False,
    }


def storage_admin_reaches(project: Path) -> dict[str, bool]:
    """The deployer's storage.admin condition, evaluated (CEL) for resources as Cloud Storage names them
    (IAM "Resource attributes for IAM Conditions": projects/_/buckets/B, and what lives in B under it)."""
    local = bootstrap_locals(project)
    source = "projects/_/buckets/my-project-" + answers_of(project)["project_slug"] + "-src"
    other = "projects/_/buckets/another-team-data"
    resources = {
        "the project (buckets are listed and created there)": (
            "cloudresourcemanager.googleapis.com/Project",
            "projects/my-project",
        ),
        "the source bucket": ("storage.googleapis.com/Bucket", source),
        "an object of the source bucket": ("storage.googleapis.com/Object", f"{source}/objects/function-abc.zip"),
        "a managed folder of the source bucket": ("storage.googleapis.com/ManagedFolder", f"{source}/managedFolders/f"),
        "another bucket": ("storage.googleapis.com/Bucket", other),
        "an object of another bucket": ("storage.googleapis.com/Object", f"{other}/objects/data.csv"),
        "a managed folder of another bucket": ("storage.googleapis.com/ManagedFolder", f"{other}/managedFolders/f"),
        "a bucket whose name starts with the source bucket's": ("storage.googleapis.com/Bucket", f"{source}-copy"),
    }
    expression = local["deployer_conditions"]["roles/storage.admin"]["expression"]
    expression = expression.replace("${local.source_bucket}", source.rsplit("/", 1)[1])
    program = cel(expression)
    return {
        what: bool(program.evaluate({"resource": celpy.json_to_cel({"type": kind, "name": name})}))
        for what, (kind, name) in resources.items()
    }


def test_module_project_roles_reads_literals_and_the_build_roles(tmp_path):
    project = bake(tmp_path, **MATRIX[BUCKET_BAKES[0]])
    assert {"roles/datastore.user", "roles/logging.logWriter", "roles/storage.objectViewer"} <= (
        module_project_roles(project)
    )


# What a plan's refresh reads of each resource type the modules make: get (and getIamPolicy for a
# *_iam_member), never data. Permissions as IAM's "Understanding roles" lists them under each viewer role.
READ_FOR_RESOURCE = {
    "google_artifact_registry_repository": {"artifactregistry.repositories.get"},
    "google_artifact_registry_repository_iam_member": {"artifactregistry.repositories.getIamPolicy"},
    "google_project_service": {"serviceusage.services.get", "serviceusage.services.list"},
    "google_service_account": {"iam.serviceAccounts.get"},
    "google_project_iam_member": {"resourcemanager.projects.get", "resourcemanager.projects.getIamPolicy"},
    # Read from the project's IAM policy (its auditConfigs); a team bake's root makes none (the bootstrap does).
    "google_project_iam_audit_config": {"resourcemanager.projects.getIamPolicy"},
    "google_cloudfunctions2_function": {"cloudfunctions.functions.get"},
    "google_cloud_run_v2_service_iam_member": {"run.services.get", "run.services.getIamPolicy"},
    "google_cloud_run_v2_job": {"run.jobs.get"},
    "google_cloud_run_v2_job_iam_member": {"run.jobs.getIamPolicy"},
    "google_storage_bucket": {"storage.buckets.get"},
    "google_storage_bucket_object": {"storage.objects.get"},
    "google_cloud_scheduler_job": {"cloudscheduler.jobs.get"},
    "google_cloud_tasks_queue": {"cloudtasks.queues.get"},
    "google_cloud_tasks_queue_iam_member": {"cloudtasks.queues.getIamPolicy"},
    "google_firestore_database": {"datastore.databases.getMetadata"},
    "google_firestore_field": {"datastore.indexes.get", "datastore.indexes.list"},
    "google_logging_metric": {"logging.logMetrics.get"},
    "google_monitoring_alert_policy": {"monitoring.alertPolicies.get"},
    "google_monitoring_dashboard": {"monitoring.dashboards.get"},
    "google_monitoring_notification_channel": {"monitoring.notificationChannels.get"},
    "google_workflows_workflow": {"workflows.workflows.get"},
}


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_planner_reads_metadata_of_what_the_modules_make_and_no_data(bake_name, tmp_path):
    """Not roles/viewer: it holds datastore.entities.get/list, every Firestore document of the project."""
    project = bake(tmp_path, **MATRIX[bake_name])
    local = bootstrap_locals(project)
    assert "planner_roles" not in local
    types = module_resource_types(project)
    assert not types - set(READ_FOR_RESOURCE), f"give {types - set(READ_FOR_RESOURCE)} its read permissions"
    needed = set().union(*(READ_FOR_RESOURCE[t] for t in types))
    assert sorted(local["planner_permissions"]) == sorted(needed)
    assert not [p for p in needed if p.startswith("datastore.entities.") or not re.search(r"\.(get|list)\w*$", p)]
    resources = bootstrap_config(project)["resource"]
    (planner,) = [
        r["google_project_iam_member"]["planner"]
        for r in resources
        if "google_project_iam_member" in r and "planner" in r["google_project_iam_member"]
    ]
    assert planner["role"] == "${google_project_iam_custom_role.planner.name}"


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_state_grants_reach_only_this_bakes_prefix(bake_name, tmp_path):
    """Bootstraps sharing a bucket must not read or overwrite each other's state: both grants carry
    the prefix condition (resource.name of objects; objectListPrefix for the backend's listing)."""
    project = bake(tmp_path, **MATRIX[bake_name])
    local = bootstrap_locals(project)
    slug = answers_of(project)["project_slug"]
    assert local["state_prefix"] == f"{slug}/"
    assert local["state_condition"] == (
        "resource.name.startsWith('projects/_/buckets/${local.state_bucket}/objects/${local.state_prefix}') || "
        "(resource.type == 'storage.googleapis.com/Bucket' && "
        "api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('${local.state_prefix}'))"
    )
    resources = bootstrap_config(project)["resource"]
    grants = {name: body for r in resources for name, body in r.get("google_storage_bucket_iam_member", {}).items()}
    assert set(grants) == {"state_deployer", "state_planner"}
    assert all(grant["condition"][0]["expression"] == "${local.state_condition}" for grant in grants.values())


def test_the_bootstrap_waits_after_enabling_the_apis(bootstrap, tmp_path):
    """Everything the bootstrap makes is ordered after a time_sleep that follows the APIs (the same
    rule as the module's, on `terraform graph`)."""
    from test_terraform import dependency_graph, unwaited

    graph = dependency_graph(bootstrap, tmp_path)
    nodes = set(graph) | {n for targets in graph.values() for n in targets}
    made = sorted(n for n in nodes if n.startswith("google_") and not n.startswith("google_project_service."))
    assert len(made) >= 8, made
    assert {n: unwaited(graph, n, {"google_project_service.this"}) for n in made} == {n: [] for n in made}
