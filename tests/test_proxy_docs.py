"""What a bake's README and docs/ say its code does, where the claim can be checked against the code: the variable
the root requires before `make deploy` can apply, what `make fire` answers for a proxy target locally, the names of
job.py they cite, how to redo a proxy run, each target's log fields, and the grants and plan-time checks the
template's docs name."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, TEMPLATE_PROJECT, bake, root_configuration

pytestmark = pytest.mark.bake

TARGETS = ("function", "cloud_run_job", "workflow")
PROXIES = TARGETS[1:]
VARIABLE = re.compile(r'^variable "(\w+)" \{\n(.*?)^\}', re.M | re.S)
# `job.WORK`, job.py's `WORK`: a name of job.py the text says exists.
CITED = re.compile(r"`job\.(?!py`)(\w+)`|`job\.py`'s `(\w+)`")


@pytest.fixture(scope="module")
def bakes(tmp_path_factory) -> dict[str, Path]:
    return {target: bake(tmp_path_factory.mktemp(f"proxy-docs-{target}"), target=target) for target in TARGETS}


def section(text: str, heading: str) -> str:
    """The body of the markdown section `heading` (any level), up to the next heading of any level."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert match, f"no section {heading!r}"
    return match[1]


def required_variables(variables_tf: str) -> list[str]:
    """The variables of a Terraform file without a default: an apply asks for each one."""
    return [name for name, body in VARIABLE.findall(variables_tf) if not re.search(r"^\s*default\s*=", body, re.M)]


def test_the_parser_tells_a_required_variable_from_one_with_a_default():
    text = 'variable "a" {\n  type = string\n}\n\nvariable "b" {\n  type    = bool\n  default = true\n}\n'
    assert required_variables(text) == ["a"]
    assert section("# T\n\n## A\none\n### B\ntwo\n## C\n", "A") == "one\n"


def test_the_deploy_steps_set_each_variable_the_root_requires(bakes):
    """`make deploy` passes only CREATE_DATABASE= and ALERT_EMAIL=, so a variable of terraform/variables.tf without a
    default stops the apply at a prompt: the README's deploy steps say to set it in terraform/terraform.tfvars (read
    at every apply, unlike a -var). The cloud_run_job root requires job_image, the image of its Dockerfile."""
    required = {target: required_variables(root_configuration(p / "terraform")) for target, p in bakes.items()}
    assert any(required.values()), "no bake's root requires a variable: the check would check nothing"
    for target, names in required.items():
        deploy = section((bakes[target] / "README.md").read_text(), "Deploy")
        in_tfvars = "`terraform/terraform.tfvars`" in deploy
        unsaid = [name for name in names if f'`{name} = "' not in deploy or not in_tfvars]
        assert not unsaid, f"{target}: the deploy steps never say to set {unsaid} in terraform/terraform.tfvars"


@pytest.mark.parametrize("target", PROXIES)
def test_a_proxy_readme_says_what_make_fire_answers_without_its_target(bakes, target):
    """Locally no PROXY_* variable is set (the deploy sets it) and job.py raises: every `make fire` answers 500
    retryable_failure. The README says so, naming the variable job.py reads, and promises no processed/duplicate."""
    (variable,) = set(re.findall(r'os\.environ\.get\("(PROXY_\w+)"', (bakes[target] / "job.py").read_text()))
    local = section((bakes[target] / "README.md").read_text(), "Run it locally")
    (fire,) = [line for line in local.splitlines() if line.startswith("make fire")]
    assert "retryable_failure" in fire and variable in fire, fire
    assert "processed" not in fire and "duplicate" not in fire, fire


def importable_names(module: Path) -> set[str]:
    """What `module.X` can reach: its top-level definitions and assignments, and what it imports (re-exports)."""
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


def test_every_name_of_job_py_the_readme_and_docs_cite_is_in_that_bakes_job_py(bakes):
    """A proxy's job.py starts an execution and has no WORK: its README must not send the reader there."""
    cited_anywhere = set()
    for target, project in bakes.items():
        texts = [project / "README.md", *sorted((project / "docs").glob("*.md"))]
        cited = {a or b for page in texts for a, b in CITED.findall(page.read_text())}
        cited_anywhere |= cited
        missing = cited - importable_names(project / "job.py")
        assert not missing, f"{target}: its README or docs cite {sorted(missing)}, which its job.py does not have"
    assert cited_anywhere, "no page cites a name of job.py: the check would check nothing"


def test_the_docs_name_every_role_the_cloud_run_job_module_grants_the_function(bakes):
    """modules/scheduled-dedup-cloud-run-job grants the function's runtime account each role of local.runtime_roles on
    the job (the executor to start an execution, the viewer to follow it): security.md's least-privilege row, iam.md
    and the bake's deployer-roles row name them all."""
    main_tf = (ROOT / "terraform" / "modules" / "scheduled-dedup-cloud-run-job" / "main.tf").read_text()
    roles = re.findall(r'"(roles/[\w.]+)"', re.search(r"runtime_roles = \{(.*?)\}", main_tf, re.S)[1])
    assert len(roles) >= 1
    (least,) = [row for row in (ROOT / "docs" / "security.md").read_text().splitlines() if "**least privilege**" in row]
    runtime = "`<slug>-run@`, target `cloud_run_job`"
    iam = [row for row in (ROOT / "docs" / "iam.md").read_text().splitlines() if runtime in row]
    readme = (bakes["cloud_run_job"] / "README.md").read_text()
    (deployer,) = [row for row in section(readme, "The deployer's roles").splitlines() if "`roles/run.admin`" in row]
    for name, text in {"security.md": least, "iam.md": "\n".join(iam), "README.md": deployer}.items():
        assert not [role for role in roles if f"`{role}`" not in text], f"{name} omits a role of runtime_roles: {text}"


def test_the_docs_name_a_postcondition_only_where_a_module_has_one():
    """A page that promises a plan-time `postcondition` check points at a lifecycle block some module must have."""
    terraform = [*(ROOT / "terraform").rglob("*.tf"), *(TEMPLATE_PROJECT / "terraform").rglob("*.tf")]
    blocks = [path for path in terraform if re.search(r"^\s*postcondition\s*\{", path.read_text(), re.M)]
    pages = [*(ROOT / "docs").glob("*.md"), *(TEMPLATE_PROJECT / "docs").glob("*.md"), TEMPLATE_PROJECT / "README.md"]
    naming = [page.name for page in pages if "postcondition" in page.read_text()]
    assert blocks or not naming, f"{naming} name a postcondition, and no module has one"


def test_each_proxy_says_which_fields_its_own_log_lines_carry(bakes):
    """operations.md's "Read the logs of one run": the Cloud Run job's lines carry what cloud_run_job/__main__.py's
    TaskFields stamps, under resource.type cloud_run_job; the workflow's sys.log line, the keys workflow.yaml logs."""
    crj = bakes["cloud_run_job"]
    stamped = re.search(r"self\.fields = \{(.*?)\}", (crj / "cloud_run_job" / "__main__.py").read_text(), re.S)[1]
    workflow = yaml.safe_load((bakes["workflow"] / "workflow" / "workflow.yaml").read_text())
    (effect,) = [step["side_effect"] for step in workflow["main"]["steps"] if "side_effect" in step]
    expected = {
        "cloud_run_job": (set(re.findall(r'"(\w+)":', stamped)), 'resource.type="cloud_run_job"'),
        "workflow": (set(effect["try"]["args"]["json"]) - {"message"}, "`sys.log`"),
    }
    for target, (fields, source) in expected.items():
        logs = section((bakes[target] / "docs" / "operations.md").read_text(), "Read the logs of one run")
        assert fields and source in logs, logs
        assert not [field for field in fields if f"`{field}`" not in logs], f"{target}: {fields} not all named: {logs}"


def test_the_redo_recipe_names_what_keys_a_proxy_run_by_its_id(bakes):
    """A re-run starts a new execution with the same run id; what skips the work again is the job's run, item and
    output documents (cloud_run_job/store.py) or the workflow's guard (workflow.yaml): the recipe names each by its
    collection as the code spells it."""
    store = (bakes["cloud_run_job"] / "cloud_run_job" / "store.py").read_text()
    (prefix,) = re.findall(r'prefix = f"\{config\.collection\}(_\w+)"', store)
    collections = dict(re.findall(r'self\.(\w+) = self\.client\.collection\(f"\{prefix\}(_\w+)"\)', store))
    workflow = (bakes["workflow"] / "workflow" / "workflow.yaml").read_text()
    (guard,) = re.findall(r'sys\.get_env\("DEDUP_COLLECTION", [^)]*\) \+ "(_\w+)"', workflow)
    expected = {
        "cloud_run_job": [prefix + collections[name] for name in ("runs", "items", "outputs")],
        "workflow": [f"{guard}/<run_id>"],
    }
    for target, suffixes in expected.items():
        recipe = section((bakes[target] / "docs" / "operations.md").read_text(), "Redo a proxy run")
        collection = json.loads((bakes[target] / ".cookiecutter.json").read_text())["firestore_collection"]
        named = [f"`{collection}{suffix}" for suffix in suffixes]
        assert all(name in recipe for name in named), f"{target}: {named} not all in: {recipe}"
