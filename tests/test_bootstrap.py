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
    assert "Success! 11 passed, 0 failed" in result.stdout, result.stdout


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
    """The bootstrap's blocks, of every file: main.tf's and the target's (target.tf, its local.bootstrap_target_*)."""
    config: dict[str, list] = {}
    for path in sorted((project / "terraform" / "bootstrap").glob("*.tf")):
        for kind, blocks in load_hcl(path).items():
            config.setdefault(kind, []).extend(blocks)
    return config


# A value the bootstrap composes of literals and locals: main.tf's shared part and the target's (target.tf).
COMPOSED = re.compile(r"\$\{(concat|merge)\((.*)\)\}", re.S)


def evaluated(value, local: dict):
    """`value` as Terraform has it when it is a local, or concat or merge of literals and locals; else as written."""
    if isinstance(value, str) and (name := re.fullmatch(r"\$\{local\.(\w+)\}", value)):
        return evaluated(local[name.group(1)], local)
    if not (isinstance(value, str) and (call := COMPOSED.fullmatch(value))):
        return value
    arguments = [evaluated(a, local) for a in hcl2.loads(f"x = [{call.group(2)}]", serialization_options=HCL)["x"]]
    if call.group(1) == "concat":
        return [item for argument in arguments for item in argument]
    return {key: item for argument in arguments for key, item in argument.items()}


def bootstrap_locals(project: Path) -> dict:
    written = {key: value for block in bootstrap_config(project)["locals"] for key, value in block.items()}
    return {key: evaluated(value, written) for key, value in written.items()}


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

# The right that lets `terraform apply` of a team bake's root create, change and delete each resource type the modules
# make there (https://cloud.google.com/iam/docs/understanding-roles; docs/iam.md says why each). A project role, or
# one of these grants on one named resource:
SOURCE_BUCKET_GRANT = "roles/storage.objectUser on the source bucket"  # the bootstrap's source_deployer
CUSTOM_ROLE = "the deployer's custom role"  # google_project_iam_custom_role.deployer: local.deployer_permissions
ROLE_FOR_RESOURCE = {
    # The function, the Cloud Run job and its grants, the Scheduler jobs, the
    # deliveries queue and its enqueuers, the log-based metrics, the Monitoring objects, the workflow: the custom role
    # (PERMISSIONS_FOR_RESOURCE), not the predefined admin and editor roles (issue 26: run.admin sets every service's
    # IAM policy, cloudfunctions.admin every function's).
    "google_cloudfunctions2_function": CUSTOM_ROLE,
    "google_cloud_run_v2_job": CUSTOM_ROLE,
    "google_cloud_run_v2_job_iam_member": CUSTOM_ROLE,
    # The zips in the one source bucket (IAM "Cloud Storage roles": objectUser creates, reads, deletes objects).
    "google_storage_bucket_object": SOURCE_BUCKET_GRANT,
    "google_cloud_scheduler_job": CUSTOM_ROLE,
    "google_cloud_tasks_queue": CUSTOM_ROLE,
    "google_cloud_tasks_queue_iam_member": CUSTOM_ROLE,
    # The TTL policy (Firestore's field configuration: datastore.indexes.*), conditioned on the database.
    "google_firestore_field": "roles/datastore.indexAdmin",
    "google_logging_metric": CUSTOM_ROLE,
    "google_monitoring_alert_policy": CUSTOM_ROLE,
    "google_monitoring_dashboard": CUSTOM_ROLE,
    "google_monitoring_notification_channel": CUSTOM_ROLE,
    "google_workflows_workflow": CUSTOM_ROLE,
}
# What the custom role holds for each of those: the create, get, update and delete the google provider calls (and
# getIamPolicy/setIamPolicy for an *_iam_member), the wait on a long-running operation (*.operations.get), each as
# IAM's "Roles and permissions" page of its service lists it (cloud.google.com/iam/docs/roles-permissions/<service>:
# cloudfunctions, run, cloudscheduler, cloudtasks, logging, monitoring, workflows).
CRUD = ("create", "delete", "get", "update")
PERMISSIONS_FOR_RESOURCE = {
    "google_cloudfunctions2_function": {
        *(f"cloudfunctions.functions.{verb}" for verb in CRUD),
        "cloudfunctions.operations.get",
    },
    "google_cloud_run_v2_job": {*(f"run.jobs.{verb}" for verb in CRUD), "run.operations.get"},
    "google_cloud_run_v2_job_iam_member": {"run.jobs.getIamPolicy", "run.jobs.setIamPolicy"},
    # paused: jobs.pause and jobs.resume, whose permission is cloudscheduler.jobs.enable.
    "google_cloud_scheduler_job": {
        *(f"cloudscheduler.jobs.{verb}" for verb in CRUD),
        "cloudscheduler.jobs.pause",
        "cloudscheduler.jobs.enable",
    },
    "google_cloud_tasks_queue": {f"cloudtasks.queues.{verb}" for verb in CRUD},
    "google_cloud_tasks_queue_iam_member": {"cloudtasks.queues.getIamPolicy", "cloudtasks.queues.setIamPolicy"},
    # logging.logMetrics.* alone, not roles/logging.configWriter (sinks and exclusions too).
    "google_logging_metric": {f"logging.logMetrics.{verb}" for verb in (*CRUD, "list")},
    "google_monitoring_alert_policy": {f"monitoring.alertPolicies.{verb}" for verb in CRUD},
    "google_monitoring_dashboard": {f"monitoring.dashboards.{verb}" for verb in CRUD},
    "google_monitoring_notification_channel": {f"monitoring.notificationChannels.{verb}" for verb in CRUD},
    "google_workflows_workflow": {*(f"workflows.workflows.{verb}" for verb in CRUD), "workflows.operations.get"},
}
# What the deployer must never hold at project level, each reaching past the bake (issue 26): an HMAC key for any
# account (storage.hmacKeys.create passes any resource condition: Cloud Storage "Create an HMAC key"), any role to any
# principal, any API (Compute's default editor account with it), sinks and exclusions, any database.
PROJECT_WIDE_ROLES = (
    "roles/storage.admin",
    "roles/resourcemanager.projectIamAdmin",
    "roles/serviceusage.serviceUsageAdmin",
    "roles/logging.configWriter",
    "roles/datastore.owner",
    # The predefined admin and editor roles of the services it deploys to: every service's, job's, function's, queue's
    # IAM policy, and more than a deploy calls (issue 26; the custom role instead).
    "roles/run.admin",
    "roles/cloudfunctions.admin",
    "roles/cloudscheduler.admin",
    "roles/cloudtasks.queueAdmin",
    "roles/monitoring.alertPolicyEditor",
    "roles/monitoring.dashboardEditor",
    "roles/monitoring.notificationChannelEditor",
    "roles/workflows.editor",
)
# Made by terraform/bootstrap, not by the deployer: the function's accounts (its local.workload_accounts),
# on each of which the deployer gets actAs, and no project-wide service-account role (IAM "Configure
# resource-based access": a condition cannot narrow those to some accounts).
# The function's image repository and the build account's grant on it too (its module "images"): the
# role that makes them, roles/artifactregistry.admin, sets the IAM policy of every repository of the
# project, and no IAM condition can test a repository's name (IAM "Resource attributes for IAM
# Conditions" lists no Artifact Registry attribute).
# And every type of scheduled-dedup-project (its module "project": the APIs, the source bucket, the project-level
# grants, the database, Cloud Tasks' audit logs): project_types().
# And the invoker's grant: not on the function's service (run.services.setIamPolicy, which no condition narrows to one
# service, would set every service's IAM policy) but roles/run.servicesInvoker on the project, which module "project"
# makes as the owner (its grants); the root, given project_setup, makes none (test_the_root_runs_as_...).
MADE_BY_THE_BOOTSTRAP = {
    "google_service_account",
    "google_cloud_run_v2_service_iam_member",
    "google_artifact_registry_repository",
    "google_artifact_registry_repository_iam_member",
}
PROJECT_MODULE = "scheduled-dedup-project"


def module_files(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> list[Path]:
    """The .tf files of the modules a team bake's root deploys: every called module but scheduled-dedup-project, which
    only the bootstrap applies (the root passes project_setup)."""
    called = [module for module in called_modules(project, modules) if module.name != PROJECT_MODULE]
    return [path for module in called for path in sorted(module.glob("*.tf"))]


RESOURCE = re.compile(r'^resource "(google_\w+)"', re.M)


def module_resource_types(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> set[str]:
    """The Google resource types the modules a bake's root deploys make (other providers' need no role)."""
    return {t for path in module_files(project, modules) for t in RESOURCE.findall(path.read_text())}


def project_types(modules: Path = ROOT / baking.MODULES_DIR) -> set[str]:
    """The Google resource types scheduled-dedup-project makes: the owner's, through the bootstrap."""
    return {t for path in (modules / PROJECT_MODULE).glob("*.tf") for t in RESOURCE.findall(path.read_text())}


def documented_roles(project: Path) -> list[str]:
    """The rows of the README's deployer table (section "The deployer's roles")."""
    readme = (project / "README.md").read_text()
    section = readme.split("### The deployer's roles", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `(roles/[\w.]+)` \|", section, re.M)


def roles_needed(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> set[str]:
    """One right per Google resource type the root's modules make that the bootstrap does not make for them."""
    types = module_resource_types(project, modules) - MADE_BY_THE_BOOTSTRAP
    assert not types & project_types(modules), (
        f"{types & project_types(modules)}: the owner's (scheduled-dedup-project)"
    )
    unknown = types - set(ROLE_FOR_RESOURCE)
    assert not unknown, f"give {unknown} a role here, in terraform/bootstrap's deployer_roles and in the README"
    return {ROLE_FOR_RESOURCE[t] for t in types}


def permissions_needed(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> set[str]:
    """The custom role's permissions the root's modules need: those of each of their types the custom role serves."""
    types = {t for t in module_resource_types(project, modules) if ROLE_FOR_RESOURCE.get(t) == CUSTOM_ROLE}
    return set().union(*(PERMISSIONS_FOR_RESOURCE[t] for t in types))


def test_each_type_the_custom_role_serves_has_its_permissions():
    assert set(PERMISSIONS_FOR_RESOURCE) == {t for t, role in ROLE_FOR_RESOURCE.items() if role == CUSTOM_ROLE}


def bootstrap_resources(project: Path, kind: str) -> dict[str, dict]:
    return {name: body for r in bootstrap_config(project)["resource"] for name, body in r.get(kind, {}).items()}


def granted_rights(project: Path) -> set[str]:
    """The deployer's project roles, and the one-resource grants ROLE_FOR_RESOURCE names, as the bootstrap has them."""
    rights = set(bootstrap_locals(project)["deployer_roles"])
    bucket = bootstrap_resources(project, "google_storage_bucket_iam_member").get("source_deployer")
    if (
        bucket
        and bucket["bucket"] == "${module.project.source_bucket}"
        and bucket["role"] == "roles/storage.objectUser"
    ):
        rights.add(SOURCE_BUCKET_GRANT)
    custom = bootstrap_resources(project, "google_project_iam_member").get("deployer_custom")
    if custom and custom["role"] == "${google_project_iam_custom_role.deployer.name}":
        rights.add(CUSTOM_ROLE)
    return rights


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_deployer_roles_are_the_documented_ones_and_what_the_module_needs(bake_name, tmp_path):
    project = bake(tmp_path, **MATRIX[bake_name])
    granted = bootstrap_locals(project)["deployer_roles"]
    assert len(set(granted)) == len(granted), granted
    assert sorted(documented_roles(project)) == sorted(granted)
    needed = roles_needed(project)
    rights = granted_rights(project)
    assert rights == needed, {"missing": needed - rights, "not needed": rights - needed}


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
    # Nor anything that needs project-wide rights: the bootstrap's module "project" made it (project_setup).
    assert not [address for address in planned if ".module.project" in address], sorted(planned)
    # Nor the invoker's grant on the function's service (run.services.setIamPolicy): the owner's, on the project.
    assert not [address for address in planned if ".google_cloud_run_v2_service_iam_member." in address]
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
    granted = granted_rights(project)
    modules = shutil.copytree(ROOT / baking.MODULES_DIR, tmp_path / "modules")
    module = modules / "scheduled-dedup"
    permissions = set(bootstrap_locals(project)["deployer_permissions"])
    (module / "dashboard.tf").unlink()
    assert roles_needed(project, modules) == granted
    assert permissions_needed(project, modules) == permissions - PERMISSIONS_FOR_RESOURCE["google_monitoring_dashboard"]
    (module / "dashboard.tf").write_text('resource "google_monitoring_dashboard" "this" {}\n')
    assert permissions_needed(project, modules) == permissions
    (module / "topic.tf").write_text('resource "google_pubsub_topic" "this" {}\n')
    with pytest.raises(AssertionError, match="google_pubsub_topic"):
        roles_needed(project, modules)


@pytest.mark.parametrize("kind", ["google_storage_bucket", "google_project_iam_member", "google_project_service"])
def test_what_needs_project_wide_rights_back_in_the_deployed_modules_fails(kind, tmp_path):
    """A bucket, a project grant or an API made by the root's modules again would need storage.admin,
    projectIamAdmin or serviceUsageAdmin back: refused, they are scheduled-dedup-project's."""
    project = bake(tmp_path, **MATRIX[BUCKET_BAKES[0]])
    modules = shutil.copytree(ROOT / baking.MODULES_DIR, tmp_path / "modules")
    (modules / "scheduled-dedup" / "again.tf").write_text(f'resource "{kind}" "again" {{}}\n')
    with pytest.raises(AssertionError, match="the owner's"):
        roles_needed(project, modules)


# --- least privilege: what the deployer may grant, what the planner may read (issue 19) -------------


def cel_verdict(expression: str, resource: dict) -> bool:
    return bool(cel(expression).evaluate({"resource": celpy.json_to_cel(resource)}))


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_deployer_holds_nothing_that_reaches_the_whole_project(bake_name, tmp_path):
    """Issue 26: every project-level role of the deployer is one that the modules' resources need (test above), none
    of PROJECT_WIDE_ROLES; the one conditioned role names this bake's database; the custom role holds exactly what
    the modules' resource types need (PERMISSIONS_FOR_RESOURCE); the rest is granted on one resource (the source
    bucket, actAs on each account). test_every_grant_of_the_deployer_... checks all of it on the bootstrap's plan."""
    project = bake(tmp_path, **MATRIX[bake_name])
    local = bootstrap_locals(project)
    assert not set(local["deployer_roles"]) & set(PROJECT_WIDE_ROLES), local["deployer_roles"]
    assert "grantable_roles" not in local
    # The custom role: exactly what the modules' resource types need (PERMISSIONS_FOR_RESOURCE), of Cloud Logging the
    # log-based metrics alone (no sink, no exclusion).
    assert sorted(local["deployer_permissions"]) == sorted(permissions_needed(project))
    (role,) = local["deployer_conditions"]
    assert role == "roles/datastore.indexAdmin"
    expression = local["deployer_conditions"][role]["expression"].replace("${var.project_id}", "my-project")
    expression = expression.replace("${local.database}", local["database"])
    assert local["database"] == answers_of(project)["firestore_database"]
    # Firestore names a database projects/P/databases/D for IAM Conditions (Firestore "Configure per-database access
    # permissions"; IAM "Resource attributes for IAM Conditions": firestore.googleapis.com).
    databases = {
        f"projects/my-project/databases/{local['database']}": True,
        "projects/my-project/databases/(default)": False,
        "projects/my-project/databases/another-team-db": False,
        f"projects/my-project/databases/{local['database']}-copy": False,
    }
    assert {name: cel_verdict(expression, {"name": name}) for name in databases} == databases
    bucket = bootstrap_resources(project, "google_storage_bucket_iam_member")["source_deployer"]
    assert "condition" not in bucket and bucket["bucket"] == "${module.project.source_bucket}"


def project_module_call(project: Path) -> dict:
    """The bootstrap's module "project" call, its inputs that are locals, concat or merge evaluated."""
    (call,) = [block["project"] for block in bootstrap_config(project)["module"] if "project" in block]
    local = bootstrap_locals(project)
    return {key: evaluated(value, local) for key, value in call.items()}


def proxy_grants(target: str) -> dict[str, tuple[str, bool]]:
    """A proxy module's project_grants (its main.tf's locals): key => (role, database), what the root would pass."""
    if target == "function":
        return {}
    module = {"cloud_run_job": "scheduled-dedup-cloud-run-job", "workflow": "scheduled-dedup-workflow"}[target]
    text = (ROOT / baking.MODULES_DIR / module / "main.tf").read_text()
    block = re.search(r"^  project_grants = \{\n(.*?)\n  \}$", text, re.M | re.S).group(1)
    rows = re.findall(r'^    (\w+) += \{ role = "([\w./]+)", member = [^,]+, database = (true|false) \}$', block, re.M)
    return {key: (role, database == "true") for key, role, database in rows}


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_bootstrap_makes_the_project_grants_the_modules_would(bake_name, tmp_path):
    """The bootstrap's module "project" gets the proxy target's grants as its module's project_grants output writes
    them (same keys, roles and database conditions), and the workflow module's APIs: the root passes neither."""
    project = bake(tmp_path, **MATRIX[bake_name])
    call = project_module_call(project)
    target = answers_of(project)["target"]
    given = {key: (grant["role"], grant["database"]) for key, grant in call["grants"].items()}
    # And the invoker's, on the project (MADE_BY_THE_BOOTSTRAP says why).
    assert given == {**proxy_grants(target), "invoker": ("roles/run.servicesInvoker", False)}
    assert call["grants"]["invoker"]["member"] == '${google_service_account.workload["invoker"].member}'
    expected = bootstrap_locals(project)["bootstrap_apis"]  # the bootstrap's own; the function's are the module's
    if target == "workflow":
        outputs = (ROOT / baking.MODULES_DIR / "scheduled-dedup-workflow" / "outputs.tf").read_text()
        listed = re.search(r'output "apis" \{.*?value += (\[.*?\])', outputs, re.S).group(1)
        expected = expected + json.loads(listed)
    assert call["apis"] == expected
    assert call["firestore"] == {"database": "${local.database}", "create_database": "${var.create_firestore_database}"}
    main = (project / "terraform" / "main.tf").read_text()
    assert "project_setup = {" in main and "project_grants" not in main


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
    grants.pop(
        "source_deployer"
    )  # the source bucket's (test_the_deployer_holds_nothing_that_reaches_the_whole_project)
    assert set(grants) == {"state_deployer", "state_planner"}
    assert all(grant["condition"][0]["expression"] == "${local.state_condition}" for grant in grants.values())


def test_the_bootstrap_waits_after_enabling_the_apis(bootstrap, tmp_path):
    """Everything the bootstrap makes is ordered after a time_sleep that follows the APIs (the same
    rule as the module's, on `terraform graph`), but the project they are enabled in."""
    from test_terraform import dependency_graph, reachable, unwaited

    graph = dependency_graph(bootstrap, tmp_path)
    nodes = set(graph) | {n for targets in graph.values() for n in targets}
    assert "google_project.this" in reachable(graph, "google_project_service.this"), "APIs of the project made here"
    made = sorted(
        n
        for n in nodes
        if n.startswith("google_") and n != "google_project.this" and not n.startswith("google_project_service.")
    )
    assert len(made) >= 8, made
    assert {n: unwaited(graph, n, {"google_project_service.this"}) for n in made} == {n: [] for n in made}


def readme_section(project: Path, title: str) -> str:
    readme = (project / "README.md").read_text()
    return readme.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]


@pytest.mark.parametrize("bake_name", BUCKET_BAKES)
def test_the_readme_says_what_the_owner_runs_once_and_what_the_deployer_may_do(bake_name, tmp_path):
    """Issue 26: the bake README's two lists are the code's. "What the owner runs once": the bake's own project (its
    variables, its deletion policy, what its creation needs), one row per resource type scheduled-dedup-project makes,
    and the project-level roles it grants (its build roles, the runtime's, the target's as the bootstrap passes them).
    "What the deployer may do": the custom role's permissions, on the bake's own project, the conditioned role, and
    none of the project-wide roles but as ones it does not hold."""
    project = bake(tmp_path, **MATRIX[bake_name])
    owner = readme_section(project, "What the owner runs once")
    rows = dict(re.findall(r"^\| `(google_\w+)` \| (.*) \|$", owner, re.M))
    assert set(rows) == project_types(), sorted(rows)
    module = (ROOT / baking.MODULES_DIR / PROJECT_MODULE / "main.tf").read_text()
    build = set(re.findall(r'"(roles/[\w.]+)"', re.search(r"build_roles = toset\(\[(.*?)\]\)", module).group(1)))
    runtime = set(
        re.findall(
            r'resource "google_project_iam_member" "datastore_user" \{\n.*?role += "(roles/[\w.]+)"', module, re.S
        )
    )
    target = {grant["role"] for grant in project_module_call(project).get("grants", {}).values()}
    assert set(re.findall(r"`(roles/[\w.]+)`", rows["google_project_iam_member"])) == build | runtime | target
    # First the bake's own project: where it is made, who pays, what the owner needs for each, that it is never
    # deleted, and the one way to use an existing project; each named as the bootstrap's code names it.
    (made,) = bootstrap_resources(project, "google_project").values()
    variables = {name for block in bootstrap_config(project)["variable"] for name in block}
    first = owner.split("\n\n", 1)[0]
    for name in ("parent", "billing_account", "existing_project_holds_only_this_bake"):
        assert f"`{name}" in first and name in variables and f"var.{name}" in json.dumps(made), name
    assert "`google_project.this`" in first and f'`deletion_policy = "{made["deletion_policy"]}"`' in first, first
    assert "`roles/resourcemanager.projectCreator`" in first and "`roles/billing.user`" in first, first
    deployer = readme_section(project, "What the deployer may do")
    assert "granted on one named resource, this bake's own project" in " ".join(deployer.split()), deployer
    local = bootstrap_locals(project)
    assert re.findall(r"^- `([\w.]+)`$", deployer, re.M) == sorted(local["deployer_permissions"])
    assert set(re.findall(r"`(roles/[\w.]+)` carries an IAM condition", deployer)) == set(local["deployer_conditions"])
    holds_none = deployer.split("and none that reaches the whole project: no", 1)[1].split("\n\n", 1)[0]
    assert set(PROJECT_WIDE_ROLES) - {"roles/datastore.owner"} <= set(re.findall(r"`(roles/[\w.]+)`", holds_none))


def moves(main: str, kind: str) -> list[dict[str, str]]:
    """The root's moved or removed blocks: from, to (moved), destroy (removed)."""
    found = []
    for block in re.findall(rf"^{kind} \{{\n(.*?)\n\}}$", main, re.M | re.S):
        found.append(dict(re.findall(r"^ +(from|to|destroy) += (\S+)$", block, re.M)))
    return found


@pytest.mark.parametrize("bake_name", ["defaults", *BUCKET_BAKES])
def test_an_applied_bake_keeps_what_moved_to_the_owner(bake_name, tmp_path):
    """What left the core (and the proxy modules) for scheduled-dedup-project is destroyed nowhere: a solo bake's root
    moves each object into module.scheduled_dedup.module.project[0]; a team bake's root forgets each (removed,
    destroy = false) and its bootstrap imports them (adopt_existing)."""
    project = bake(tmp_path, **MATRIX[bake_name])
    main = (project / "terraform" / "main.tf").read_text()
    project_resources = {
        f"{kind}.{name}"
        for path in (ROOT / baking.MODULES_DIR / PROJECT_MODULE).glob("*.tf")
        for kind, name in re.findall(r'^resource "(google_\w+|time_sleep)" "(\w+)"', path.read_text(), re.M)
    }
    core = {f"module.scheduled_dedup.{r}" for r in project_resources if not r.endswith(("database_grants", ".grants"))}
    if MATRIX[bake_name].get("state_bucket"):
        removed = moves(main, "removed")
        assert all(block["destroy"] == "false" for block in removed), removed
        forgotten = {block["from"] for block in removed}
        assert core <= forgotten, core - forgotten
        assert not moves(main, "moved") or all("module.project" not in block["to"] for block in moves(main, "moved"))
        bootstrap = (project / "terraform" / "bootstrap" / "main.tf").read_text()
        imported = set(re.findall(r"^  to       = module\.project\.(\S+?)(?:\[.*\])?$", bootstrap, re.M))
        assert imported >= {
            "google_project_service.this",
            "google_storage_bucket.source",
            "google_project_iam_member.build",
            "google_project_iam_member.datastore_user",
            "google_firestore_database.this",
        }, imported
    else:
        moved = {
            block["from"]: block["to"] for block in moves(main, "moved") if "module.project" in block.get("to", "")
        }
        assert {f"module.scheduled_dedup.{r}" for r in project_resources} & set(moved) == core
        assert all(
            moved[address] == address.replace("scheduled_dedup.", "scheduled_dedup.module.project[0].")
            for address in core
        )
        assert not moves(main, "removed")


# --- every IAM binding of the deployer, as the bootstrap's offline plan makes it (issue 26) ------------------------

# Any IAM grant the google provider makes: additive members, authoritative bindings and whole policies, at any level.
IAM_GRANT = re.compile(r"^google_\w+_iam_(member|binding|policy)$")
# Levels above one resource: a grant there reaches everything of the project (or more).
PROJECT_LEVEL = re.compile(r"^google_project_iam_")
BEYOND_THE_PROJECT = re.compile(r"^google_(organization|folder|billing_account)_iam_")
# A condition that names one resource: resource.name equal to one literal, nothing else.
NAMES_ONE_RESOURCE = re.compile(r"""^resource\.name == (?:'[^'|&]+'|"[^"|&]+")$""")

# What the deployer may hold project-wide without a condition, each for its reason: its custom role's permissions
# (google_project_iam_custom_role.deployer). None of their services is among those whose resource.name an IAM condition
# can test (IAM "Resource attributes for IAM Conditions", https://cloud.google.com/iam/docs/conditions-resource-attributes:
# "Other services and resource types do not recognize resource attributes"; Cloud Logging's cover log buckets and
# views, not log-based metrics), and a resource's create permission is checked on the project. So each reaches every
# resource of its kind in the project, and the project is the bake's own (deployer_grants refuses any other): a stolen
# deployer may delete this bake's resources, and change them only as far as it may act as the accounts they run as
# (actAs, on this bake's accounts alone).
REASONS = {
    "google_cloudfunctions2_function": "the function",
    "google_cloud_scheduler_job": "the Scheduler jobs",
    "google_cloud_tasks_queue": "the deliveries queue",
    "google_logging_metric": "the log-based metrics",
    "google_monitoring_alert_policy": "the alert policies",
    "google_monitoring_dashboard": "the dashboard",
    "google_monitoring_notification_channel": "the alert's e-mail channel",
    "google_cloud_run_v2_job": "the Cloud Run job",
    "google_workflows_workflow": "the workflow",
    # setIamPolicy on every queue of the project: the enqueuers' grants must be made on the queue the deploy makes,
    # after it exists, and no condition can narrow Cloud Tasks to it (granting the enqueuers project-wide instead
    # would let them queue to every bake's queue).
    "google_cloud_tasks_queue_iam_member": "the enqueuers' grants on the deliveries queue",
    # setIamPolicy on every job of the project, for the same reason (the runtime's executor and viewer grants
    # project-wide would start any job of the project with overrides, as its account).
    "google_cloud_run_v2_job_iam_member": "the runtime's grants on the Cloud Run job",
}


def unconditioned_allowed(project: Path) -> dict[str, str]:
    """The allow-list for this bake: each permission the deployer may hold project-wide without a condition => its
    reason (REASONS, by the resource type it is for)."""
    return {
        permission: REASONS[kind]
        for kind in module_resource_types(project)
        if ROLE_FOR_RESOURCE.get(kind) == CUSTOM_ROLE
        for permission in PERMISSIONS_FOR_RESOURCE[kind]
    }


def planned_instances(output: str, run: str) -> dict[str, tuple[str, dict]]:
    """Every instance one run of `terraform test -verbose` printed: address => (type, attributes)."""
    text = output.split(f'  run "{run}"... pass\n', 1)[1].split('\n  run "', 1)[0]
    parts = re.split(r"^# (\S+):\n", text, flags=re.M)
    found = {}
    for address, body in zip(parts[1::2], parts[2::2], strict=True):
        kind = re.search(r'^resource "(\w+)"', body, re.M)
        if not kind or not (
            IAM_GRANT.match(kind.group(1))
            or kind.group(1).startswith("google_service_account")
            or kind.group(1) in ("google_project_iam_custom_role", "google_project")
        ):
            continue
        ((named,),) = [list(typed.values()) for typed in hcl2.loads(body, serialization_options=HCL)["resource"]]
        (attributes,) = named.values()
        found[address] = (kind.group(1), attributes)
    return found


def deployer_grants(
    output: str, run: str = "bootstrap", dedicated: str | None = None
) -> tuple[dict[str, tuple[str, str, str]], dict[str, dict]]:
    """The deployer's grants in one run of the bootstrap's test, address => (where, role, what it is on), and the custom
    roles. where: "resource" (on one named resource), "conditioned" (project-level, under a condition naming one
    resource), "project" (project-level, no condition); anything else fails here, and so does a project-level grant on
    any project but the bake's own: the one the run's plan creates (google_project), or `dedicated`, the existing
    project its owner declared holds only this bake (existing_project_holds_only_this_bake). A project is the one
    named resource the custom role's rights can be granted on (the bootstrap's google_project.this says why)."""
    instances = planned_instances(output, run)
    own = {a["project_id"] for kind, a in instances.values() if kind == "google_project"} | {dedicated} - {None}
    assert len(own) == 1, f"the bake's own project: {sorted(own)}"
    deployer = instances["google_service_account.deployer"][1]
    identities = {deployer["member"], deployer["email"], f"serviceAccount:{deployer['email']}"}
    custom = {a["name"]: a for kind, a in instances.values() if kind == "google_project_iam_custom_role"}
    accounts = {a["name"]: address for address, (kind, a) in instances.items() if kind == "google_service_account"}
    grants = {}
    for address, (kind, attributes) in instances.items():
        if not IAM_GRANT.match(kind):
            continue
        members = {attributes.get("member")} | set(attributes.get("members", []))
        policy = attributes.get("policy_data", "")
        if not (members & identities or any(identity in policy for identity in identities)):
            continue
        assert not BEYOND_THE_PROJECT.match(kind), f"{address}: a grant beyond the project"
        assert "policy_data" not in attributes, f"{address}: a whole IAM policy naming the deployer"
        role = attributes["role"]
        role = f"custom {custom[role]['role_id']}" if role in custom else role
        if not PROJECT_LEVEL.match(kind):
            on = accounts.get(attributes.get("service_account_id"), "")
            on = on or next(str(attributes[k]) for k in ("bucket", "name", "repository") if k in attributes)
            grants[address] = ("resource", role, f"{kind} {on}")
            continue
        assert attributes["project"] in own, f"{address}: {role} on project {attributes['project']}, not the bake's own"
        if attributes.get("condition"):
            (condition,) = attributes["condition"]
            assert NAMES_ONE_RESOURCE.match(condition["expression"]), f"{address}: {condition['expression']}"
            grants[address] = ("conditioned", role, condition["expression"])
        else:
            grants[address] = ("project", role, "")
    return grants, custom


def unconditioned_rights(grants: dict, custom: dict) -> set[str]:
    """What the deployer's project-level grants without a condition hold: roles, and custom roles' permissions."""
    permissions = {f"custom {role['role_id']}": set(role["permissions"]) for role in custom.values()}
    return set().union(*(permissions.get(role, {role}) for where, role, _ in grants.values() if where == "project"))


def test_every_grant_of_the_deployer_is_on_one_resource_or_named_or_allowed(bootstrap):
    """Issue 26: the bootstrap's plan (terraform test -verbose, mock provider), every IAM grant of any type whose member
    is the deployer: on one named resource, project-level under a condition naming one resource, or project-level
    and unconditioned with exactly the rights unconditioned_allowed lists (each for its reason). A grant of any other
    kind, or a right more or less, fails."""
    result = run_tf(bootstrap, "test", "-verbose")
    assert result.returncode == 0, output_of(result)
    grants, custom = deployer_grants(result.stdout)
    project = bootstrap.parent.parent
    answers, local = answers_of(project), bootstrap_locals(project)
    allowed = unconditioned_allowed(project)
    assert set(REASONS) == set(PERMISSIONS_FOR_RESOURCE)
    rights = unconditioned_rights(grants, custom)
    assert rights == set(allowed), {"not allowed": rights - set(allowed), "allowed, not held": set(allowed) - rights}
    # On one resource: the state bucket (its prefix), the source bucket, the image repository (read), and each of the
    # bake's accounts (actAs).
    on_resources = sorted(on for where, _, on in grants.values() if where == "resource")
    assert on_resources == sorted(
        [
            f"google_storage_bucket_iam_member {answers['state_bucket']}",
            f"google_storage_bucket_iam_member {answers['gcp_project_id']}-{answers['project_slug']}-src",
            f"google_artifact_registry_repository_iam_member {answers['project_slug']}-images",
            *(
                f'google_service_account_iam_member google_service_account.workload["{key}"]'
                for key in local["workload_accounts"]
            ),
        ]
    ), on_resources
    # Under a condition naming one resource: the TTL policy's index admin, on this bake's database.
    assert [(role, on) for where, role, on in grants.values() if where == "conditioned"] == [
        (
            "roles/datastore.indexAdmin",
            f"resource.name == 'projects/{answers['gcp_project_id']}/databases/{local['database']}'",
        )
    ], grants
    # An existing project its owner declared holds only this bake: the same grants, on it. Undeclared, none is the
    # bake's own.
    run = "an_existing_project_that_holds_only_this_bake"
    existing, _ = deployer_grants(result.stdout, run, dedicated=answers["gcp_project_id"])
    assert sorted(existing.values()) == sorted(grants.values()), existing
    with pytest.raises(AssertionError, match="the bake's own project: \\[\\]"):
        deployer_grants(result.stdout, run)


def test_a_project_grant_to_the_deployer_outside_the_list_fails(bootstrap, tmp_path):
    """A separate google_project_iam_member for the deployer (here roles/run.developer, unconditioned), one under a
    condition that names no one resource, an authoritative binding naming it, or its custom role granted on a project
    other than the bake's own: each refused."""
    shutil.copytree(bootstrap.parent.parent, tmp_path / "project", symlinks=True)
    copy = tmp_path / "project" / "terraform" / "bootstrap"
    grant = (
        'resource "google_project_iam_member" "extra" {\n  project = var.project_id\n'
        '  role    = "roles/run.developer"\n  member  = google_service_account.deployer.member\n'
    )
    extras = {
        "member": grant + "}\n",
        "condition": grant + '  condition {\n    title      = "any"\n'
        "    expression = \"resource.name.startsWith('projects/')\"\n  }\n}\n",
        "another_project": 'resource "google_project_iam_member" "extra" {\n  project = "another-project"\n'
        "  role    = google_project_iam_custom_role.deployer.name\n"
        "  member  = google_service_account.deployer.member\n}\n",
    }
    outputs, failures = {}, {}
    for name, extra in extras.items():
        (copy / "extra.tf").write_text(extra)
        result = run_tf(copy, "test", "-verbose")
        assert result.returncode == 0, output_of(result)
        outputs[name] = result.stdout
    # The stand-in's schema has no google_project_iam_binding: the plan's text as the provider would print one.
    member = planned_instances(outputs["member"], "bootstrap")["google_service_account.deployer"][1]["member"]
    own = answers_of(tmp_path / "project")["gcp_project_id"]  # the bake's own project: its rights are the point
    binding = (
        '# google_project_iam_binding.extra:\nresource "google_project_iam_binding" "extra" {\n'
        f'    members = [\n        "{member}",\n    ]\n    project = "{own}"\n'
        '    role    = "roles/run.developer"\n}\n\n'
    )
    extra = re.compile(r"^# google_project_iam_member\.extra:\n.*?\n}\n\n", re.M | re.S)
    outputs["binding"] = extra.sub(lambda _: binding, outputs["member"], count=1)
    assert "google_project_iam_member.extra" not in outputs["binding"].split('  run "bucket_made_elsewhere"')[0]
    for name, output in outputs.items():
        with pytest.raises(AssertionError) as caught:
            grants, custom = deployer_grants(output)
            assert unconditioned_rights(grants, custom) <= set(unconditioned_allowed(tmp_path / "project"))
        failures[name] = str(caught.value)
    assert "roles/run.developer" in failures["member"] and "roles/run.developer" in failures["binding"], failures
    assert "startsWith" in failures["condition"], failures
    assert "on project another-project, not the bake's own" in failures["another_project"], failures
