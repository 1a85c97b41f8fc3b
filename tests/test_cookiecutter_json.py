"""cookiecutter.json agrees with the hooks: every variable is asked clearly, and the defaults bake."""

from __future__ import annotations

import ast
import re

import pytest
import rules
from conftest import DEFAULTS, ROOT
from cookiecutter.generate import generate_context
from cookiecutter.prompt import prompt_for_config

VARIABLES = [key for key in DEFAULTS if not key.startswith("_")]
PROMPTS = DEFAULTS["__prompts__"]


@pytest.fixture(scope="module")
def default_answers():
    """The answers a `--no-input` bake gets, rendered by cookiecutter itself (project_slug included)."""
    context = generate_context(context_file=str(ROOT / "cookiecutter.json"))
    return prompt_for_config(context, no_input=True)


def test_every_variable_has_a_prompt():
    assert [key for key in VARIABLES if key not in PROMPTS] == []
    assert [key for key in PROMPTS if key not in VARIABLES] == [], "prompts for variables that no longer exist"


@pytest.mark.parametrize("variable", [key for key in VARIABLES if isinstance(DEFAULTS[key], list)])
def test_every_choice_has_a_question_and_a_label(variable):
    prompt = PROMPTS[variable]
    assert isinstance(prompt, dict) and prompt.get("__prompt__")
    assert sorted(key for key in prompt if key != "__prompt__") == sorted(DEFAULTS[variable])


def test_targets_are_the_rules_targets():
    assert sorted(DEFAULTS["target"]) == sorted(rules.TARGETS)


def test_defaults_pass_every_rule(default_answers):
    assert default_answers["project_slug"] == "nightly-report"
    checked = rules.validate(default_answers)
    assert checked["project_slug"] == default_answers["project_slug"]
    assert checked["target"] == DEFAULTS["target"][0]


def keys_read_by_hooks() -> set[str]:
    """Every `<answers>["key"]` the hook modules read from the cookiecutter context."""
    context_names = {"context", "values", "answers", "ANSWERS"}
    keys = set()
    for path in sorted((ROOT / "hooks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in context_names
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                keys.add(node.slice.value)
    return keys


def test_keys_the_hooks_read_exist():
    read = keys_read_by_hooks()
    assert {"project_slug", "gcp_project_id", "lease_seconds", "target"} <= read, "the hook scan found too little"
    public = {key for key in read if not key.startswith("_")}
    assert sorted(public - set(VARIABLES)) == []


TIMING_AND_RETRY = [
    "attempt_deadline_seconds",
    "function_timeout_seconds",
    "lease_seconds",
    "retention_seconds",
    "retry_count",
    "min_backoff_seconds",
    "max_backoff_seconds",
    "max_doublings",
    "max_retry_duration_seconds",
]


def test_the_terraform_modules_defaults_are_the_bakes():
    """A module used without a bake (its optional() defaults) gets the same numbers, which pass every rule."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    module = {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*optional\(number, (\d+)\)", variables)}
    assert {name: module.get(name) for name in TIMING_AND_RETRY} == {name: DEFAULTS[name] for name in TIMING_AND_RETRY}


# --- the answers that decide a first apply on a new project (issue 9) --------------------------


def test_a_default_bake_creates_a_database_named_after_its_slug(default_answers):
    """A new project has no Firestore database: by default the bake creates one of its own, named
    from the slug, so it never collides with a (default) database other applications use."""
    assert default_answers["create_firestore_database"] is True
    assert default_answers["firestore_database"] == "nightly-report-db"
    assert rules.validate(default_answers)["firestore_database"] == "nightly-report-db"


@pytest.mark.parametrize("slug", ["abc", "a" * 20, "x-1"])
def test_the_slug_derived_database_id_passes_firestores_rule(slug):
    """<slug>-db is a valid Firestore database id for every valid slug (3-20 chars -> 6-23)."""
    rules.check_slug(slug)
    assert rules.check_database(f"{slug}-db") == f"{slug}-db"


@pytest.mark.parametrize(
    "database", ["abcdef01-2345-6789-abcd-ef0123456789", "Runs", "abc", "a" * 64, "db-", "1db"], ids=str
)
def test_database_ids_firestore_refuses_are_refused(database):
    with pytest.raises(rules.RuleError, match=r"^firestore_database=.*not UUID-like"):
        rules.check_database(database)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_create_firestore_database_must_be_a_bool(value):
    with pytest.raises(rules.RuleError, match=r"^create_firestore_database=.*: must be yes or no$"):
        rules.check_create_database(value)


@pytest.mark.parametrize("email", ["", "oncall@example.com", "a.b+c@sub.example.org"])
def test_alert_email_accepts_an_address_or_nothing(email):
    assert rules.check_alert_email(email) == email


@pytest.mark.parametrize("email", ["oncall", "oncall@example", "on call@example.com", "a@b@c.com"])
def test_alert_email_refuses_what_is_not_an_address(email):
    with pytest.raises(rules.RuleError, match=r"^alert_email=.*: must be an e-mail address"):
        rules.check_alert_email(email)


def test_the_email_rule_is_terraforms():
    """The hook and the module's variable "alert_email" check the same shape."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    terraform_pattern = re.search(r'can\(regex\("\^(.+?)\$", var\.alert_email\)\)', variables)
    assert terraform_pattern and terraform_pattern.group(1).replace("\\\\", "\\") == rules.EMAIL.pattern


def test_the_modules_database_default_is_the_bakes():
    """A module used without a bake also creates its database (a new project has none)."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    module_default = re.search(r"create_database\s*=\s*optional\(bool, (true|false)\)", variables).group(1)
    assert module_default == str(DEFAULTS["create_firestore_database"]).lower() == "true"
