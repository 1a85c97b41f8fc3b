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
