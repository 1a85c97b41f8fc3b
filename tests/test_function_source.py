"""The function's source zip: an allow-list of files, the same bytes on any machine (issue 19).

In CI the checkout is the zipped directory, and google-github-actions/auth writes the job's credentials
into it as gha-creds-<random>.json (its src/main.ts, createCredentialsFile; its README says to ignore
the file). A deny-list of excludes zipped, uploaded and deployed it, and its random name changed the
zip's md5 on every run. The module now zips only var.source_files, as `source` blocks of content
(terraform/modules/scheduled-dedup/function.tf), and each bake derives its list in terraform/main.tf (issue 24:
every *.py of its root, config.yaml and requirements.txt, so a new module is deployed with the code).

What is checked here, offline: the bake's list, as Terraform evaluates it, holds what the handler needs (main.py's
local imports, followed, the files those modules read beside themselves, and requirements.txt); the module
zips that list and nothing else; and, modelled on the archive provider's own code, a zip built from
`source` blocks does not change with the files' modes or times while one built from a directory does.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import hcl2
import pytest
from conftest import MATRIX, ROOT, bake

from tests.terraform_offline import terraform

pytestmark = pytest.mark.bake

FUNCTION_TF = ROOT / "terraform" / "modules" / "scheduled-dedup" / "function.tf"
HCL = hcl2.SerializationOptions(with_comments=False, explicit_blocks=False, strip_string_quotes=True)
CREDENTIALS = "gha-creds-4f1c2a9d0b7e.json"  # google-github-actions/auth: gha-creds-<random hex>.json


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def project(request, tmp_path_factory) -> Path:
    return bake(tmp_path_factory.mktemp(f"source-{request.param}"), **MATRIX[request.param])


def source_files(project: Path) -> list[str]:
    """The function's source as Terraform derives it: module "scheduled_dedup"'s source_files in terraform/main.tf,
    evaluated by Terraform itself (its path.root: the bake's terraform/) in a root of one output."""
    with (project / "terraform" / "main.tf").open() as file:
        parsed = hcl2.load(file, serialization_options=HCL)
    (call,) = [block["scheduled_dedup"] for block in parsed["module"] if "scheduled_dedup" in block]
    if isinstance(call["source_files"], list):  # a list written out (an allow-list): nothing to evaluate
        return call["source_files"]
    (expression,) = re.findall(r"(?m)^  source_files\s*=\s*(.+)$", (project / "terraform" / "main.tf").read_text())
    scratch = project.parent / f"{project.name}-source-files"
    scratch.mkdir(exist_ok=True)
    root = (project / "terraform").resolve().as_posix()
    (scratch / "main.tf").write_text(f'output "files" {{ value = {expression.replace("${path.root}", root)} }}\n')
    applied = terraform(scratch, "apply", "-auto-approve", "-input=false", f"-state={scratch / 'state'}")
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
    shown = terraform(scratch, "output", "-json", f"-state={scratch / 'state'}")
    return json.loads(shown.stdout)["files"]["value"]


# A file a module reads beside itself: Path(__file__).with_name("x") or Path(__file__).parent / "x".
READ_BESIDE = re.compile(r"""with_name\(\s*["']([^"']+)["']\s*\)|\.parent\s*/\s*["']([^"']+)["']""")


def needed_files(project: Path, roots: tuple[str, ...] = ("main",)) -> set[str]:
    """main.py (or `roots`) and every module of the project it imports, followed; the files they read beside
    themselves; requirements.txt (what Google's Python buildpack installs)."""
    local = {path.stem for path in project.glob("*.py")}
    needed, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if f"{name}.py" in needed:
            continue
        needed.add(f"{name}.py")
        source = (project / f"{name}.py").read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                todo += [alias.name.split(".")[0] for alias in node.names if alias.name.split(".")[0] in local]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo += [node.module.split(".")[0]] if node.module.split(".")[0] in local else []
        needed |= {a or b for a, b in READ_BESIDE.findall(source)}
    return needed | {"requirements.txt"}


def test_the_bakes_source_holds_what_the_handler_needs_and_only_its_modules_and_files(project):
    listed = source_files(project)
    assert len(listed) == len(set(listed)), listed
    assert needed_files(project) <= set(listed)
    assert set(listed) == {path.name for path in project.glob("*.py")} | {"config.yaml", "requirements.txt"}
    assert all((project / name).is_file() for name in listed), listed


def test_a_helper_module_job_py_imports_is_deployed_with_it(tmp_path):
    """Issue 24 item 7: a module beside job.py that it imports passed `make test`, but the source was an allow-list
    that did not hold it: the deployed function would fail at import. The list is derived now."""
    project = bake(tmp_path, **MATRIX["defaults"])
    (project / "helpers.py").write_text("GREETING = 'hello'\n")
    (project / "job.py").write_text("import helpers  # noqa: F401\n" + (project / "job.py").read_text())
    assert "helpers.py" in needed_files(project)
    assert needed_files(project) <= set(source_files(project))
    checked = subprocess.run([sys.executable, "config.py"], cwd=project, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr


def test_a_package_job_py_imports_is_named_by_python_config_py_and_make_test(tmp_path):
    """A package (a directory) is not in the source (every *.py of the root): `python config.py`, which
    `make deploy` and the bake's tests/test_config.py run, fails naming it."""
    project = bake(tmp_path, **MATRIX["defaults"])
    (project / "helpers").mkdir()
    (project / "helpers" / "__init__.py").write_text("GREETING = 'hello'\n")
    (project / "job.py").write_text("from helpers import GREETING  # noqa: F401\n" + (project / "job.py").read_text())
    checked = subprocess.run([sys.executable, "config.py"], cwd=project, capture_output=True, text=True, timeout=120)
    (line,) = checked.stderr.splitlines()
    assert checked.returncode == 1 and "main.py imports helpers, a directory" in line, checked.stderr
    assert "helpers/__init__.py" not in source_files(project)
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_config.py", "-k", "check_command"],
        cwd=project, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert tested.returncode != 0 and "main.py imports helpers" in tested.stdout, tested.stdout[-2000:]


def test_the_job_image_copies_every_project_module_the_job_imports(tmp_path):
    """target=cloud_run_job: the job's image holds the project's modules its code imports, followed (the store's
    Firestore calls are ledger.py's), the files they read, and its pins. Its COPY once lacked schedules.py,
    which the protocol imported: `python -m cloud_run_job` would not have started."""
    project = bake(tmp_path, **MATRIX["cloud-run-job"])
    local = {path.stem for path in project.glob("*.py")}
    roots = set()
    for path in (project / "cloud_run_job").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            roots |= {name.split(".")[0] for name in names} & local
    dockerfile = (project / "cloud_run_job" / "Dockerfile").read_text().splitlines()
    copies = [line.split()[1:-1] for line in dockerfile if line.startswith("COPY ")]
    copied = {name for line in copies for name in line} - {"cloud_run_job/"}
    assert roots and copied == needed_files(project, tuple(roots))


def test_needed_files_follows_imports_and_files_read_beside_a_module(tmp_path):
    """The helper can fail: a new module imported by job.py, and the file it reads, are needed."""
    (tmp_path / "main.py").write_text("import job\nimport os\n")
    (tmp_path / "job.py").write_text("from helpers import x\n")
    (tmp_path / "helpers.py").write_text('import pathlib\nDATA = pathlib.Path(__file__).with_name("table.csv")\n')
    (tmp_path / "unused.py").write_text("")
    assert needed_files(tmp_path) == {"main.py", "job.py", "helpers.py", "table.csv", "requirements.txt"}


def archive_file() -> dict:
    with FUNCTION_TF.open() as file:
        parsed = hcl2.load(file, serialization_options=HCL)
    (block,) = [data["archive_file"]["source"] for data in parsed["data"] if "archive_file" in data]
    return block


def test_the_module_zips_the_list_as_content_and_never_a_directory():
    """function.tf: no source_dir / source_file / excludes (a deny-list zips whatever else lies in the
    checkout), one `source` block per listed file, and a fixed output_file_mode."""
    block = archive_file()
    assert not {"source_dir", "source_file", "source_content", "excludes"} & set(block), sorted(block)
    assert block["output_file_mode"] == "0644"
    (dynamic,) = block["dynamic"]
    assert dynamic["source"]["for_each"] == "${toset(var.source_files)}"
    (content,) = dynamic["source"]["content"]
    assert content == {"filename": "${source.value}", "content": '${file("${var.source_dir}/${source.value}")}'}


# --- the archive provider's zip, modelled ---------------------------------------------------------
# hashicorp/terraform-provider-archive, internal/provider/zip_archiver.go: ArchiveMultiple (`source`
# blocks) sorts the names and adds each with zip.Writer.Create(name): a header with the name and
# Deflate only, so no mode (external attributes 0, MS-DOS creator) and no time (the zero DOS date,
# 1980-01-01). ArchiveDir (`source_dir`) walks the directory and builds each header with
# zip.FileInfoHeader(info): the file's own mode, unless output_file_mode overrides it. Python's
# deflate is not Go's, so the bytes differ from Terraform's; what is shown is which inputs count.


def zip_of_sources(root: Path, names: list[str]) -> bytes:
    """ArchiveMultiple: sorted names, content only."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name in sorted(names):
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.create_system, entry.external_attr, entry.compress_type = 0, 0, zipfile.ZIP_DEFLATED
            archive.writestr(entry, (root / name).read_bytes())
    return out.getvalue()


def zip_of_directory(root: Path, excludes: set[str]) -> bytes:
    """ArchiveDir without output_file_mode: every file not excluded, each with its own mode."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            name = path.relative_to(root).as_posix()
            if name in excludes:
                continue
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.create_system, entry.external_attr = 3, (path.stat().st_mode & 0xFFFF) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, path.read_bytes())
    return out.getvalue()


def checkout(tmp_path: Path, project: Path, name: str, mode: int, mtime: int) -> Path:
    """A copy of the bake's top level as a checkout on some machine: its own file modes and times,
    and google-github-actions/auth's credentials file beside the code."""
    target = tmp_path / name
    target.mkdir()
    for path in project.iterdir():
        if path.is_file():
            (target / path.name).write_bytes(path.read_bytes())
            (target / path.name).chmod(mode)
            os.utime(target / path.name, (mtime, mtime))
    (target / CREDENTIALS).write_text('{"type": "external_account", "credential_source": {"url": "..."}}')
    return target


def test_two_checkouts_give_the_same_zip_and_no_credentials(tmp_path):
    project = bake(tmp_path / "bake", **MATRIX["defaults"])
    names = source_files(project)
    laptop = checkout(tmp_path, project, "laptop", 0o664, 1_700_000_000)
    ci = checkout(tmp_path, project, "ci", 0o644, 1_800_000_000)
    from_sources = [zip_of_sources(root, names) for root in (laptop, ci)]
    assert hashlib.md5(from_sources[0]).digest() == hashlib.md5(from_sources[1]).digest()
    assert zipfile.ZipFile(io.BytesIO(from_sources[1])).namelist() == sorted(names)
    # What a directory with a deny-list did: another hash per machine, and the credentials inside.
    from_directory = [zip_of_directory(root, set()) for root in (laptop, ci)]
    assert hashlib.md5(from_directory[0]).digest() != hashlib.md5(from_directory[1]).digest()
    assert CREDENTIALS in zipfile.ZipFile(io.BytesIO(from_directory[1])).namelist()
