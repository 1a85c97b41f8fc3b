"""cookiecutter.json agrees with the hooks: every variable is asked clearly, and the defaults bake."""

from __future__ import annotations

import ast
import fnmatch
import json
import re

import baking
import pytest
import questions
import rich.console
import rules
from conftest import DEFAULT_ANSWERS, DEFAULTS, ROOT, extra_context
from cookiecutter.generate import generate_context
from cookiecutter.prompt import prompt_for_config

# The questions cookiecutter asks; the settings it renders without asking ("__" names) follow them.
VARIABLES = [key for key in DEFAULTS if not key.startswith("_")]
UNASKED = [key.removeprefix("__") for key in DEFAULTS if key.startswith(baking.UNASKED) and key != "__prompts__"]
PROMPTS = DEFAULTS["__prompts__"]
# Issue 17: a bake asks at most this many questions; the expert numbers live in the project's configuration.
MAX_QUESTIONS = 12


@pytest.fixture(scope="module")
def default_answers():
    """The answers a `--no-input` bake gets, rendered by cookiecutter itself (project_slug included)."""
    return DEFAULT_ANSWERS


def test_every_variable_has_a_prompt():
    assert [key for key in VARIABLES if key not in PROMPTS] == []
    assert [key for key in PROMPTS if key not in VARIABLES] == [], "prompts for variables that no longer exist"


def test_at_most_twelve_questions():
    assert len(VARIABLES) <= MAX_QUESTIONS, VARIABLES


def test_no_question_default_is_a_jinja_program():
    """A question's default may name an earlier answer ({{ ... }}), never compute with statements ({% ... %})."""
    assert [key for key in VARIABLES if "{%" in json.dumps(DEFAULTS[key])] == []


def test_jobs_default_is_text_so_a_given_object_replaces_it():
    """cookiecutter merges an object given for an object default key by key (apply_overwrites_to_context):
    the default job would survive beside the given ones. Text is replaced whole; the rules parse it."""
    assert isinstance(DEFAULTS["jobs"], str)
    default = {"nightly": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}}
    assert rules.check_jobs(questions.parse_jobs(DEFAULTS["jobs"])) == default


@pytest.mark.parametrize("text", ["{nightly: 1}", "[]", '""', "{}"], ids=str)
def test_jobs_text_that_is_no_json_object_is_refused_in_one_line(text):
    with pytest.raises(rules.RuleError, match=r"^jobs=") as refused:
        rules.check_jobs(questions.parse_jobs(text))
    assert "\n" not in str(refused.value)


def test_copy_without_render_lists_exactly_the_files_that_read_checked_answers():
    """post_gen renders these with the checked answers (baking.render_checked); cookiecutter renders the rest,
    which must not read `jobs` (text to cookiecutter), an unasked setting (a "__" name to cookiecutter) or the
    modules' addresses (`module_sources`, which post_gen derives: baking.module_sources) and the tools package's pin
    (`tools_requirement`, derived from them: baking.tools_requirement)."""
    names = "|".join(["jobs", "module_sources", "tools_requirement", *UNASKED])
    reads = re.compile(rf"cookiecutter\.({names})\b")
    project = ROOT / "{{cookiecutter.project_slug}}"
    reading = sorted(
        path.relative_to(project).as_posix()
        for path in project.rglob("*")
        if path.is_file() and reads.search(path.read_text(encoding="utf-8", errors="ignore"))
    )
    listed = DEFAULTS["_copy_without_render"]
    assert [path for path in reading if not any(fnmatch.fnmatch(path, pattern) for pattern in listed)] == []
    assert [pattern for pattern in listed if not any(fnmatch.fnmatch(path, pattern) for path in reading)] == []


@pytest.mark.parametrize("variable", [key for key in VARIABLES if isinstance(DEFAULTS[key], list)])
def test_every_choice_has_a_question_and_a_label(variable):
    prompt = PROMPTS[variable]
    assert isinstance(prompt, dict) and prompt.get("__prompt__")
    assert sorted(key for key in prompt if key != "__prompt__") == sorted(DEFAULTS[variable])


def test_targets_are_the_rules_targets():
    assert sorted(DEFAULTS["target"]) == sorted(questions.TARGETS)


def test_defaults_pass_every_rule(default_answers):
    assert default_answers["project_slug"] == "nightly-report"
    checked = questions.validate(default_answers)
    assert checked["project_slug"] == default_answers["project_slug"]
    assert checked["target"] == DEFAULTS["target"][0]


def keys_read_by_hooks() -> set[str]:
    """Every `<answers>["key"]` the hook modules read from the cookiecutter context."""
    context_names = {"context", "values", "answers", "ANSWERS"}
    keys = set()
    for path in [*sorted((ROOT / "hooks").glob("*.py")), ROOT / "{{cookiecutter.project_slug}}" / "rules.py"]:
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
    assert {"project_slug", "gcp_project_id", "attempt_deadline_seconds", "target"} <= read, "the scan found too little"
    public = {key for key in read if not key.startswith("_")}
    assert sorted(public - set(VARIABLES) - set(UNASKED)) == []


TIMING_AND_RETRY = [
    "attempt_deadline_seconds",
    "lease_seconds",
    "retention_seconds",
    "retry_count",
    "min_backoff_seconds",
    "max_backoff_seconds",
    "max_doublings",
    "max_retry_duration_seconds",
]


def test_the_terraform_modules_defaults_are_the_bakes(default_answers):
    """A module used without a bake (its optional() defaults) gets the same numbers, which pass every rule."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    module = {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*optional\(number, (\d+)\)", variables)}
    written = questions.config_from_answers(default_answers)
    bake = {name: int(value) for name, value in written["defaults"].items()}
    bake["retention_seconds"] = int(written["retention_seconds"])
    assert {name: module.get(name) for name in bake} == bake


# --- questions that lead somewhere (issue 11): change one number, press Enter for the rest ---------


def answered(changes: dict[str, object]) -> dict[str, object]:
    """The answers of a user who types `changes` at their questions (or gives an unasked setting as extra
    context) and presses Enter at every other one, under the bake's names.

    cookiecutter asks through rich's Prompt, which reads each line from Console.input: that is the one
    thing replaced, so every default is rendered from the answers before it exactly as at a terminal
    (prompt_for_config renders each default just before its question), and "" is the Enter key.
    """
    unasked = {key: value for key, value in changes.items() if key in UNASKED}
    context = generate_context(context_file=str(ROOT / "cookiecutter.json"), extra_context=extra_context(unasked))
    questions = {PROMPTS[key]: str(value) for key, value in changes.items() if key not in unasked}

    def typed(console, prompt="", **options):
        asked = [text for question, text in questions.items() if question in str(prompt)]
        return asked[0] if asked else ""

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rich.console.Console, "input", typed)
        return baking.public_answers(prompt_for_config(context, no_input=False))


# Each numeric question's range, as its prompt states it, with the other answers at their defaults
# (deadline 300, timeout 300, lease 360, 5 retries, waits from 30 s doubling 3 times up to 300 s, audit every
# 60 min): both ends, and values between. Where a rule ties a question to later ones, its end is the
# last value for which the rules leave later answers that bake.
NUMBERS_IN_RANGE = {
    "attempt_deadline_seconds": (15, 60, 900, 1800),
    # Below 18000: five retries wait at most 5 x 3600 s in all, and must outlast the lease.
    "lease_seconds": (330, 361, 9000, 17999),
    "retry_count": (0, 1, 2, 3, 4, 5),
    # 12: the least whose five doubling waits can outlast the 360 s lease (12 + 24 + 48 + 96 + 192 = 372).
    "min_backoff_seconds": (12, 13, 14, 60, 361, 1800, 3600),
    # 91: the least with which 30 + 60 + 91 + 91 + 91 = 363 s outlasts the lease.
    "max_backoff_seconds": (91, 120, 1800, 3600),
    "max_doublings": (0, 1, 3, 8, 16),
    "audit_interval_minutes": rules.AUDIT_INTERVALS_MINUTES,
    # 86400 - 60 x 60 - 360 - 300 - 300: the audit's interval and settle time fill the day exactly.
    "max_retry_duration_seconds": (0, 1, 40000, 81840),
    # 60 x 60 + 360 + 3300 (the retry window): the least the audit's lookback needs.
    "retention_seconds": (7260, 86400, 604800, 31536000),
}
# One step past each range end: refused, so the ends above are the ones the prompts state.
NUMBERS_PAST_THE_RANGE = {
    "attempt_deadline_seconds": (14, 1801),
    "lease_seconds": (329, 18000),
    "retry_count": (6,),
    "min_backoff_seconds": (11, 3601),
    "max_backoff_seconds": (90, 3601),
    "max_doublings": (17,),
    "audit_interval_minutes": (7,),
    "max_retry_duration_seconds": (81841,),
    "retention_seconds": (7259,),
}


def numeric_questions() -> list[str]:
    """The unasked settings given as a number; "" (nothing given) where rules.derive_timing gives the default."""
    return [
        key
        for key in UNASKED
        if isinstance(DEFAULT_ANSWERS[key], str)
        and (DEFAULT_ANSWERS[key].isdigit() or key in questions.DERIVED_ANSWERS)
    ]


def test_every_numeric_question_is_covered():
    assert list(NUMBERS_IN_RANGE) == numeric_questions() == list(NUMBERS_PAST_THE_RANGE)


def test_the_default_timing_follows_the_earlier_answers(default_answers):
    """Pressing Enter everywhere gives the numbers the docs and the module's defaults use: derived in Python
    (rules.derive_timing), no Jinja program in cookiecutter.json."""
    assert answered({}) == default_answers
    assert not [key for key, value in DEFAULTS.items() if isinstance(value, str) and "{%" in value]
    written = questions.config_from_answers(default_answers)
    assert {key: int(value) for key, value in written["defaults"].items()} == {
        "attempt_deadline_seconds": 300,
        "retry_count": 5,
        "min_backoff_seconds": 30,
        "max_backoff_seconds": 300,
        "max_doublings": 3,
        "max_retry_duration_seconds": 0,
    }
    # The case: a 600 s deadline, then Enter: each job's lease follows its deadline.
    changed = rules.check_config(questions.config_from_answers(answered({"attempt_deadline_seconds": 600})))
    assert changed["jobs"]["nightly"]["timing"]["lease_seconds"] == 660


@pytest.mark.parametrize(
    ("question", "value"),
    [(question, value) for question, values in NUMBERS_IN_RANGE.items() for value in values],
    ids=lambda item: str(item),
)
def test_one_number_changed_and_enter_for_the_rest_bakes(question, value):
    answers = answered({question: value})
    assert answers[question] == str(value)
    checked = questions.validate(answers)
    # The one warning there is: no retries at all is allowed, and said.
    assert bool(checked["warnings"]) == (question == "retry_count" and value == 0)


@pytest.mark.parametrize(
    ("question", "value"),
    [(question, value) for question, values in NUMBERS_PAST_THE_RANGE.items() for value in values],
    ids=lambda item: str(item),
)
def test_one_number_past_its_range_is_refused(question, value):
    with pytest.raises(rules.RuleError):
        questions.validate(answered({question: value}))


# --- the answers that decide a first apply on a new project (issue 9) --------------------------


def test_a_default_bake_creates_a_database_named_after_its_slug(default_answers):
    """A new project has no Firestore database: by default the bake creates one of its own, named
    from the slug, so it never collides with a (default) database other applications use."""
    assert default_answers["create_firestore_database"] is True
    assert default_answers["firestore_database"] == "nightly-report-db"
    assert questions.validate(default_answers)["firestore_database"] == "nightly-report-db"


@pytest.mark.parametrize("slug", ["abc", "a" * 20, "x-1"])
def test_the_slug_derived_database_id_passes_firestores_rule(slug):
    """<slug>-db is a valid Firestore database id for every valid slug (3-20 chars -> 6-23)."""
    rules.check_field("project_slug", slug)
    assert rules.check_field("firestore_database", f"{slug}-db") == f"{slug}-db"


@pytest.mark.parametrize(
    "database", ["abcdef01-2345-6789-abcd-ef0123456789", "Runs", "abc", "a" * 64, "db-", "1db"], ids=str
)
def test_database_ids_firestore_refuses_are_refused(database):
    with pytest.raises(rules.RuleError, match=r"^firestore_database=.*not UUID-like"):
        rules.check_field("firestore_database", database)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_create_firestore_database_must_be_a_bool(value):
    with pytest.raises(rules.RuleError, match=r"^create_firestore_database=.*: must be yes or no$"):
        questions.check_answer("create_firestore_database", value)


@pytest.mark.parametrize("email", ["", "oncall@example.com", "a.b+c@sub.example.org"])
def test_alert_email_accepts_an_address_or_nothing(email):
    assert questions.check_answer("alert_email", email) == email


@pytest.mark.parametrize("email", ["oncall", "oncall@example", "on call@example.com", "a@b@c.com"])
def test_alert_email_refuses_what_is_not_an_address(email):
    with pytest.raises(rules.RuleError, match=r"^alert_email=.*: must be an e-mail address"):
        questions.check_answer("alert_email", email)


def test_the_email_rule_is_terraforms():
    """The hook and the module's variable "alert_email" check the same shape."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    terraform_pattern = re.search(r'can\(regex\("\^(.+?)\$", var\.alert_email\)\)', variables)
    assert terraform_pattern and terraform_pattern.group(1).replace("\\\\", "\\") == questions.EMAIL.pattern


def test_the_modules_database_default_is_the_bakes():
    """A module used without a bake also creates its database (a new project has none)."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    module_default = re.search(r"create_database\s*=\s*optional\(bool, (true|false)\)", variables).group(1)
    assert module_default == str(DEFAULTS["create_firestore_database"]).lower() == "true"
