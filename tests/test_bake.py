"""Bake a matrix of option combinations; each bake renders fully, lints clean, and passes its own suite."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import MATRIX, ROOT, TOOLS_SOURCE, bake, run_baked_suite, run_proofs

pytestmark = pytest.mark.bake


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def baked(request, tmp_path_factory):
    return bake(tmp_path_factory.mktemp(request.param), **MATRIX[request.param])


def baked_files(project):
    return [p for p in project.rglob("*") if p.is_file() and ".terraform" not in p.parts]


def test_nothing_is_left_unrendered(baked):
    leftovers = [
        str(path.relative_to(baked))
        for path in baked_files(baked)
        if re.search(r"{{\s*cookiecutter|{%", path.read_text(errors="ignore")) or "{{" in str(path)
    ]
    assert leftovers == []


def test_baked_code_is_ruff_clean(baked):
    for command in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command], cwd=baked, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_baked_suite_passes_against_the_shared_emulator(baked, emulator_host):
    result = run_baked_suite(baked, emulator_host)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\d+ passed", result.stdout)


# The proofs that start real servers and inject their own faults serve the harness's own job module
# (proofs/harness/served_job.py) over the protocol files, which are the same bytes in every bake
# (test_the_protocol_files_are_the_template_s_own_bytes_in_every_bake), with their jobs and deadlines the test's own
# (config.use): every bake gives the same proof, so they run once, on the defaults bake. So does the years simulation
# (harness/years_sim.py), which serves its own jobs (config.use) and work in place of job.py's, and the proofs of
# schedule history and per-job timing, which serve their own jobs and dates (Config.with_jobs, config.yaml's defaults).
SERVER_FAULT_PROOFS = (
    "test_stop.py",
    "test_timeout.py",
    "test_outage.py",
    "test_faults.py",
    "test_load.py",
    "test_years_sim.py",
    "test_schedule_history.py",
    "test_job_timing.py",
)
SERVER_PROOFS_BAKE = "defaults"


def test_the_template_s_proofs_pass_in_a_copy_of_the_bake(baked, emulator_host, request):
    """tests/proofs/ (faults, outages, store errors, timeouts, load, fuzz, the window), laid into a copy of
    this bake so that its conftest and its protocol modules apply; the copy's laid-in tests lint clean too."""
    elsewhere = request.node.callspec.params["baked"] != SERVER_PROOFS_BAKE
    result = run_proofs(
        baked, emulator_host, *(f"--deselect=tests/{name}" for name in SERVER_FAULT_PROOFS if elsewhere)
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\d+ passed", result.stdout) and " skipped" not in result.stdout, result.stdout[-2000:]
    copy = baked.parent / "proved" / baked.name
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "tests"], cwd=copy, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_the_bake_keeps_no_proof(baked):
    """The proofs live in the template only (the bake's own suite stays fast): no file of tests/proofs/ is baked."""
    import prove

    laid = {(ROOT / "tests" / "proofs" / path).name for path in prove.proof_files()}
    assert not laid & {path.name for path in baked_files(baked)}


def test_a_default_bake_keeps_only_its_users_tests(tmp_path):
    """Issue 17: the bake holds a fast contract test of the protocol, the configuration's tests and an example
    test of the work; what proves the protocol runs from tests/proofs/ (test_the_template_s_proofs_pass_...)."""
    project = bake(tmp_path)
    kept = sorted(path.relative_to(project).as_posix() for path in (project / "tests").rglob("*") if path.is_file())
    assert kept == ["tests/conftest.py", "tests/test_config.py", "tests/test_contract.py", "tests/test_job.py"]


def test_the_functions_source_holds_no_deploy_time_rules(baked):
    """Issue 28: the schedule rules (fire times, daylight saving, one fault, capacity) run before a deploy (python
    config.py, the hook), never in the function: they live in the tools package the bake pins, outside its source
    (the project root's *.py), and config.yaml loaded as the function loads it imports none of them."""
    assert "def smallest_gap" in (TOOLS_SOURCE / "schedule_rules.py").read_text()
    source = "".join(path.read_text() for path in baked.rglob("*.py"))
    assert not re.search(r"def (smallest_gap|dst_hits|busy_after_one_fault|busiest_minute)\b", source)
    tools = "sorted(m for m in sys.modules if m.startswith('scheduled_dedup_tools'))"
    code = f"import sys, config, main; config.load(); print({tools})"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=baked, capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_bakes_rules_are_the_hooks_rules(baked):
    """The rules live once: the hook imports the template's rules.py, the bake carries the same bytes."""
    template = ROOT / "{{cookiecutter.project_slug}}"
    assert (baked / "rules.py").read_bytes() == (template / "rules.py").read_bytes()
    assert not (ROOT / "hooks" / "rules.py").exists() and not (baked / "tests" / "harness" / "rules.py").exists()


# The files of a bake whose text can use a name of its Python code (docs only talk about it; the CI workflow's
# words are Terraform's), by a `module.name`, an import, a string (an entry point) or a test's fixture argument.
CODE_SUFFIXES = (".py", ".tf", ".hcl", ".toml", ".cfg")


def top_level_names(tree: ast.Module) -> dict[str, ast.stmt]:
    """The names a module defines at its top and their statements, but pytest's autouse fixtures."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            if not any("autouse" in ast.unparse(decorator) for decorator in node.decorator_list):
                names[node.name] = node
        else:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names |= {target.id: node for target in targets if isinstance(target, ast.Name)}
    return {name: node for name, node in names.items() if not name.startswith(("test_", "__"))}


def unused_names(project: Path) -> set[tuple[str, str]]:
    """(file, name) of each top-level name of the bake's Python that nothing of the bake uses, but the code of
    other unused names (a chain of them is found whole)."""
    baked = [path for path in baked_files(project) if path.suffix in CODE_SUFFIXES or path.name == "Makefile"]
    code = [*baked, *sorted(TOOLS_SOURCE.glob("*.py"))]  # the tools package the bake pins uses its code too
    sources = {path: path.read_text(encoding="utf-8").splitlines(keepends=True) for path in code}
    defined = {
        (path, name): node
        for path in baked
        if path.suffix == ".py"
        for name, node in top_level_names(ast.parse("".join(sources[path]))).items()
    }

    def text(path: Path, without: set[tuple[Path, str]]) -> str:
        lines = sources[path]
        for (where, _), node in ((key, defined[key]) for key in without):
            if where == path:
                first = min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", []))])
                lines = [*lines[: first - 1], *[""] * (node.end_lineno - first + 1), *lines[node.end_lineno :]]
        return "".join(lines)

    unused: set[tuple[Path, str]] = set()
    while True:
        found = set()
        for (path, name), _ in defined.items():
            if (path, name) in unused:
                continue
            elsewhere = {other: text(other, unused) for other in code if other != path}
            module = path.stem
            uses = (
                rf"\b{module}\.{name}\b|^from [\w.]*\b{module} import [^#(]*\b{name}\b",
                rf"^from [\w.]*\b{module} import \([^)]*\b{name}\b|[\"']{name}[\"']",
            )
            # A function its own module's decorator registers (runs.py's @command) is used through the registry.
            registered = any(
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Name)
                and (path, decorator.func.id) in defined
                for decorator in getattr(defined[(path, name)], "decorator_list", [])
            )
            used = (
                registered
                or re.search(rf"\b{name}\b", text(path, unused | {(path, name)}))
                or any(
                    any(re.search(use, source, re.MULTILINE) for use in uses)
                    or (other.suffix != ".py" or (path.name == "conftest.py" and other.parent == path.parent))
                    and re.search(rf"\b{name}\b", source)
                    for other, source in elsewhere.items()
                )
            )
            if not used:
                found.add((path, name))
        if not found:
            return {(str(path.relative_to(project)), name) for path, name in unused}
        unused |= found


def test_the_bake_carries_no_code_only_the_hooks_or_the_templates_tests_use(tmp_path):
    """Every top-level name of a bake's Python is used by the bake (of one target at least: conftest's fixtures
    serve every target's tests): what only turns answers into the first config.yaml lives in hooks/, what only
    the template's tests use in tests/."""
    targets = ("function", "cloud_run_job", "workflow")
    unused = [unused_names(bake(tmp_path / target, target=target)) for target in targets]
    assert set.intersection(*unused) == set()


def test_answers_are_recorded(baked):
    answers = json.loads((baked / ".cookiecutter.json").read_text())
    assert answers["project_slug"] == baked.name
    assert not [key for key in answers if key.startswith("_")]
    # The release it was baked at, from the template's VERSION (the one place it is written).
    assert answers["template_version"] == (ROOT / "VERSION").read_text().strip()


def test_baked_pins_match_the_template_venv(baked):
    """The template's venv runs every baked suite, so its pins must be the baked ones."""
    template_pins = dict(
        line.split("==") for line in (ROOT / "requirements-dev.txt").read_text().splitlines() if "==" in line
    )
    for requirements in ("requirements.txt", "requirements-dev.txt"):
        for line in (baked / requirements).read_text().splitlines():
            if "==" in line:
                name, version = line.split("==")
                assert template_pins.get(name) == version, f"{requirements}: {line} not pinned alike in the template"


def test_two_default_bakes_share_no_collection(tmp_path):
    """Side by side in one GCP project: the Terraform tests check every name carries the slug; the
    collection (and so its TTL policy) must differ by default too, or two roots would manage one."""
    first = bake(tmp_path / "a", project_name="Nightly Report")
    second = bake(tmp_path / "b", project_name="Hourly Sync")
    answers = [json.loads((project / ".cookiecutter.json").read_text()) for project in (first, second)]
    assert answers[0]["project_slug"] != answers[1]["project_slug"]
    assert answers[0]["firestore_collection"] == "nightly-report-runs"
    assert answers[1]["firestore_collection"] == "hourly-sync-runs"


# The protocol and its adapter: no answer is rendered into them, so a template change to them reaches
# every bake as the same diff (the answers live in config.yaml, which config.py reads).
PROTOCOL_FILES = (
    "dedup.py",
    "keys.py",
    "ledger.py",
    "outcomes.py",
    "main.py",
    "run_context.py",
    "config.py",
    "rules.py",
    "schedules.py",
    "stop.py",
    "run_log.py",
)


def test_the_protocol_files_are_the_template_s_own_bytes_in_every_bake(tmp_path):
    template = ROOT / "{{cookiecutter.project_slug}}"
    for name, answers in MATRIX.items():
        project = bake(tmp_path / name, **answers)
        for file in PROTOCOL_FILES:
            assert (project / file).read_bytes() == (template / file).read_bytes(), f"{name}: {file} differs"


# The run ledger is the only code that touches Firestore (issue 17); a proxy bake's item store shares its client.
FIRESTORE_TOUCHERS = {"ledger.py", "cloud_run_job/store.py"}


def firestore_uses(source: str) -> list[str]:
    """What a module does with Firestore itself: imports of google.cloud.firestore*, uses of firestore_client."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("google.cloud.firestore")]
        elif isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [name for name in names if name.startswith("google.cloud.firestore") or "firestore_client" in name]
        elif isinstance(node, ast.Name | ast.Attribute) and "firestore_client" in (
            getattr(node, "id", None),
            getattr(node, "attr", None),
        ):
            found.append("firestore_client")
    return found


@pytest.mark.parametrize("answers", [{}, MATRIX["cloud-run-job"]], ids=["defaults", "cloud-run-job"])
def test_only_the_protocol_modules_touch_firestore(tmp_path, answers):
    """The tools and the handler read and write run records through ledger.RunLedger, never a client of their own."""
    project = bake(tmp_path, **answers)
    modules = [path for path in project.rglob("*.py") if "tests" not in path.relative_to(project).parts]
    tools = sorted(TOOLS_SOURCE.glob("*.py"))  # the tools package the bake pins
    assert TOOLS_SOURCE / "runs.py" in tools
    offending = {
        path.name if path in tools else str(path.relative_to(project)): uses
        for path in [*modules, *tools]
        if path in tools or str(path.relative_to(project)) not in FIRESTORE_TOUCHERS
        if (uses := firestore_uses(path.read_text()))
    }
    assert offending == {}


def test_the_function_reads_config_yaml_the_bake_wrote_from_the_answers(baked):
    """config.yaml, written from the answers, is what config.py reads: the jobs by their Scheduler names with their
    job ids and each job's own numbers, and the audit's job name. No settings.json beside it."""
    import baking
    import questions
    import rules

    answers = json.loads((baked / ".cookiecutter.json").read_text())
    written = yaml.safe_load((baked / "config.yaml").read_text())
    rendered = baking.render_config(questions.config_from_answers({**answers, "jobs": written["jobs"]}))
    assert written == yaml.safe_load(rendered)
    assert sorted(written["jobs"]) == answers["jobs"]
    code = (
        "import config, json; c = config.load(); print(json.dumps({'audit_job': c.audit_job, 'jobs': {name: {"
        "'job_id': j.job_id, 'lease_seconds': j.lease.total_seconds(), 'retry_window_seconds':"
        " j.retry_window.total_seconds()} for name, j in c.jobs.items()}}))"
    )
    printed = subprocess.run([sys.executable, "-c", code], cwd=baked, capture_output=True, text=True, check=True)
    loaded = json.loads(printed.stdout)
    slug = answers["project_slug"]
    checked = rules.check_config(written, schedules=False)
    jobs = loaded["jobs"]
    assert set(jobs) == {f"{slug}-{job_id}" for job_id in written["jobs"]}
    assert {name: job["job_id"] for name, job in jobs.items()} == {
        f"{slug}-{job_id}": job_id for job_id in written["jobs"]
    }
    for job_id, job in checked["jobs"].items():
        timing = job["timing"]
        window = rules.retry_window_seconds(
            timing["attempt_deadline_seconds"],
            timing["retry_count"],
            timing["max_backoff_seconds"],
            timing["max_retry_duration_seconds"],
        )
        assert jobs[f"{slug}-{job_id}"]["retry_window_seconds"] == window
        assert jobs[f"{slug}-{job_id}"]["lease_seconds"] == timing["lease_seconds"]
    assert loaded["audit_job"] == f"{slug}_audit"
    assert not (baked / "settings.json").exists()
