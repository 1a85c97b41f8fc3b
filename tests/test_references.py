"""Every path a bake names resolves inside that bake: its README, docs, comments, Makefile and Terraform can
be read without the template (issue 11).

A reference is a relative path written in a file: `docs/how-it-works.md`, `tools/runs.py`,
`terraform/bootstrap/`, or a bare file name such as `test_terraform.py`. It resolves when the bake has it
relative to its root or to the directory of the file (or any directory between the two: a module's
README names its own `variables.tf`), or, for a bare name, anywhere in the bake. Not references:
URLs (with or without a scheme: `cloud.google.com/run/docs/...`), paths inside an installed Python
package (`functions_framework/_http/gunicorn.py`, checked against that package instead), patterns
(`*.tfvars`, `outputs/{run_id}`), and what is said to be the template's (`the template's hooks/rules.py`):
the bake points at the template only in those words. FILES_THE_USER_MAKES lists the files a bake tells
its user to create, which therefore are not there yet.
"""

from __future__ import annotations

import importlib.util
import re
import sysconfig
from pathlib import Path

import pytest
from conftest import MATRIX, ROOT, bake, called_modules

pytestmark = pytest.mark.bake

# File names a bake's text may end a reference with.
EXTENSIONS = "py|md|tf|hcl|yaml|yml|toml|txt|json|mjs|cfg|ini|sh"
# Bare file names worth checking (`args.json` in code is an attribute, `executions.txt` a test's temporary file).
NAMED = "py|md|tf|hcl|yaml|yml|toml"
# Top-level names that make a token a path even without an extension (`tests/`, `terraform/bootstrap`); alone,
# without a "/", they are words ("the workflow", "hooks").
DIRECTORIES = "docs|hooks|tests|tools|terraform|benchmarks|workflow|cloud_run_job|modules|\\.github"
# A path is made of [\w.-] segments joined by "/"; it may not touch another path-ish character
# (so `https://x/y.md`, `a*/b.md`, `outputs/{run_id}` and `~/x` are not cut into a shorter path).
SEGMENT = r"[\w.-]+"
REFERENCE = re.compile(
    rf"(?<![\w./:~@$*{{}}<>-])"
    rf"((?:{SEGMENT}/)+{SEGMENT}\.(?:{EXTENSIONS})|(?:{DIRECTORIES})(?:/{SEGMENT})+/?|(?:{DIRECTORIES})/|[\w-]+\.(?:{NAMED}))"
    rf"(?![\w/*{{}}<>$-]|\.\w)"
)
URL = re.compile(r"\b[a-z][a-z+.-]*://\S+|\b(?:[a-z0-9-]+\.)+(?:com|org|io|dev|net|googleapis\.com)\b/\S*", re.I)
# "the template's hooks/rules.py", "this template's `docs/targets.md`": a reference out of the bake, in words.
TEMPLATES = re.compile(r"\b(?:the|this)(?:\s|#|//)+template's(?:\s|#|//)+[`\"']?$", re.I)
# Files a bake tells its user to make (or that `terraform init` / `plan` writes): named, not yet there.
FILES_THE_USER_MAKES = {
    "terraform/.terraform.lock.hcl",  # `terraform init` writes it; the README says to commit it
    "terraform/terraform.tfstate",  # local state, written by the first apply of a bake without a state bucket
    "terraform/terraform.tfvars",  # where the docs say to set a variable for every apply (git-ignored: never baked)
    "terraform/bootstrap/backend.tf",  # the README's step: move the bootstrap's state into the bucket
    "terraform/tfplan",  # ci.yml's plan job writes the saved plan the apply job applies
    "terraform/tfplan.txt",  # ci.yml's plan job writes the plan's text, kept as the artifact plan-text
    "terraform/.terraform/scheduled-dedup",  # `terraform plan` writes the function's zip there (function.tf)
}
SITE_PACKAGES = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
SKIPPED_DIRECTORIES = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".terraform", "node_modules"}


def text_files(project: Path) -> list[Path]:
    files = []
    for path in sorted(project.rglob("*")):
        if not path.is_file() or SKIPPED_DIRECTORIES & set(path.relative_to(project).parts):
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def references(text: str) -> list[str]:
    """The paths `text` names, in order; URLs and the template's files (so phrased) left out."""
    text = URL.sub(" ", text)
    return [
        match[1]
        for match in REFERENCE.finditer(text)
        if not TEMPLATES.search(text[max(0, match.start() - 40) : match.start()])
    ]


def in_installed_package(reference: str) -> bool:
    """Whether the reference is a file of an installed Python package (`functions_framework/...`)."""
    top, _, rest = reference.partition("/")
    spec = importlib.util.find_spec(top) if rest and top.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        return False
    # Only installed packages: the template's own directories (hooks/, tests/) are importable here too.
    locations = [Path(location) for location in spec.submodule_search_locations]
    return any(location.parent in SITE_PACKAGES and (location / rest).exists() for location in locations)


def resolves(project: Path, source: Path, reference: str, names: set[str]) -> bool:
    if reference.rstrip("/") in FILES_THE_USER_MAKES:
        return True
    if "/" not in reference:
        return reference in names  # a bare file name: somewhere in the bake
    bases = [project, *[d for d in source.parents if d.is_relative_to(project) and d != project]]
    return any((base / reference).exists() for base in bases) or in_installed_package(reference)


def missing_references(project: Path) -> list[str]:
    """What the bake names and lacks. The modules it calls are at their address, not in it: their files resolve
    by name, or by their path in the template (terraform/modules/<module>/<file>)."""
    files = text_files(project)
    modules = called_modules(project)
    names = {path.name for path in [*project.rglob("*"), *(file for module in modules for file in module.rglob("*"))]}
    missing = []
    for source in files:
        for reference in references(source.read_text(encoding="utf-8")):
            in_a_module = any(f"{reference}/".startswith(f"{module.relative_to(ROOT)}/") for module in modules)
            if in_a_module and (ROOT / reference).exists():
                continue
            if not resolves(project, source, reference, names):
                missing.append(f"{source.relative_to(project)}: {reference}")
    return missing


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def matrix_bake(request, tmp_path_factory):
    return bake(tmp_path_factory.mktemp(f"refs-{request.param}"), **MATRIX[request.param])


def test_every_path_a_bake_names_is_in_the_bake(matrix_bake):
    missing = missing_references(matrix_bake)
    assert not missing, "paths named but not in the bake:\n" + "\n".join(missing)


def test_what_counts_as_a_reference():
    text = """See docs/how-it-works.md and `tools/runs.py`; the suite in tests/, terraform/bootstrap/main.tf,
    test_terraform.py alone. Not: https://github.com/o/r/blob/main/docs/x.md, cloud.google.com/run/docs/a.md,
    the template's hooks/rules.py, this template's `docs/targets.md`, the
    # template's tests/test_dashboard.py, *.tfvars, outputs/{run_id}, modules/${name}/main.tf, the workflow,
    hooks and docs as words, args.json and e.g. job.run."""
    assert references(text) == [
        "docs/how-it-works.md",
        "tools/runs.py",
        "tests/",
        "terraform/bootstrap/main.tf",
        "test_terraform.py",
    ]


def test_the_scan_finds_what_a_bake_lacks(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "how-it-works.md").write_text("# How\n")
    module = tmp_path / "terraform" / "modules" / "m"
    module.mkdir(parents=True)
    (module / "variables.tf").write_text("")
    (module / "README.md").write_text("`variables.tf` here; `outputs.tf` not; hooks/rules.py neither.\n")
    (tmp_path / "main.py").write_text(
        "# docs/how-it-works.md, docs/operations.md, functions_framework/request_timeout.py,\n"
        "# functions_framework/no_such_module.py, terraform/.terraform.lock.hcl (terraform init writes it)\n"
    )
    assert missing_references(tmp_path) == [
        "main.py: docs/operations.md",
        "main.py: functions_framework/no_such_module.py",
        "terraform/modules/m/README.md: outputs.tf",
        "terraform/modules/m/README.md: hooks/rules.py",
    ]


def test_the_files_of_the_modules_a_bake_calls_resolve_at_their_address(tmp_path):
    """A bake calls its modules at an address (here this working tree's terraform/modules): their files are named
    as that holds them, or by name; a file they lack, or one of a module the bake does not call, is missing."""
    (tmp_path / "terraform").mkdir()
    (tmp_path / "terraform" / "main.tf").write_text(
        f'module "m" {{\n  source = "{ROOT}/terraform/modules//scheduled-dedup"\n}}\n'
    )
    (tmp_path / "README.md").write_text(
        "terraform/modules/scheduled-dedup/scheduler.tf, `tasks.tf`, terraform/modules/image-repository/main.tf,\n"
        "terraform/modules/scheduled-dedup/nope.tf, terraform/modules/scheduled-dedup-workflow/main.tf, `nope.tf`\n"
    )
    assert missing_references(tmp_path) == [
        "README.md: terraform/modules/scheduled-dedup/nope.tf",
        "README.md: terraform/modules/scheduled-dedup-workflow/main.tf",
        "README.md: nope.tf",
    ]
