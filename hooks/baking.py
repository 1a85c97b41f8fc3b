"""What post_gen_project does, as small functions the tests import."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import questions
import rules

# The reusable Terraform modules live once, in the template's terraform/modules; a bake's Terraform calls them at
# a pinned address, as users of Cloud Foundation Fabric call its modules
# (github.com/GoogleCloudPlatform/cloud-foundation-fabric//modules/project?ref=vX), so the bake holds only its root
# configuration and a module upgrade is one ref bump. Terraform's "Module Sources" page: a generic git source
# `git::<URL>//<sub-directory>?ref=<tag or commit>` clones the whole repository and reads the module from the
# sub-directory ("Modules in Package Sub-directories"), so the core module's "../image-repository" resolves in the
# same clone. An absolute path is no local path but a package installed into .terraform/modules (Terraform 1.15 links
# it there), so "<checkout>/terraform/modules//<module>" installs the modules alone, not the checkout's venvs.
MODULES_DIR = Path("terraform") / "modules"
MODULES = (
    "scheduled-dedup",
    "image-repository",
    "scheduled-dedup-project",
    "scheduled-dedup-cloud-run-job",
    "scheduled-dedup-workflow",
)
# Where a module's name goes in an address: `_module_source` (cookiecutter.json, asked of no one) may set one,
# e.g. "git::https://example.com/dedup.git//terraform/modules/{module}?ref=v2", and the template's tests do.
MODULE = "{module}"
MODULE_SOURCE_EXAMPLE = f"git::https://github.com/acme/dedup.git//terraform/modules/{MODULE}?ref=v1.2.0"
# A team bake's CI runs `terraform init` on a fresh runner: an absolute or relative path, a home-relative one or a
# file:// URL (git::file:// from a clone of a local repository) names the machine that baked, which the runner is not.
LOCAL_ADDRESS = re.compile(r"(?:git::)?(?:file://|/|~|\.\.?/|[A-Za-z]:[\\/])")
# A bake's tools (runs, the schedule rules, make dev, the emulator) are a package of the template's repository, pinned
# by the bake's requirements-dev.txt where its modules are: the same repository at the same ref, in pip's spelling
# (pip's "VCS Support": git+<URL>@<ref>#subdirectory=<dir>), or the same checkout's directory (a local bake).
TOOLS_PACKAGE = "scheduled-dedup-tools"
TOOLS_DIR = Path("packages") / TOOLS_PACKAGE
MODULES_AT = re.compile(
    rf"(?:git::(?P<url>\w[\w+.-]*://.+?)//(?P<prefix>.*?)|(?P<path>/.*?)/){MODULES_DIR.as_posix()}/?/[^/?]+"
    r"(?:\?ref=(?P<ref>[^&]+))?"
)
# The template's release, semantic version (CHANGELOG.md says what each asks of a bake): a bake records it in
# .cookiecutter.json as TEMPLATE_VERSION_KEY, read from here at bake time, so the version lives in this file alone.
VERSION_FILE = "VERSION"
TEMPLATE_VERSION_KEY = "template_version"
# The project's one configuration file, written from the answers (render_config, with the bake's own rules.py:
# the post hook puts the template's copy on the path); from then on the user edits it.
CONFIG_FILE = "config.yaml"

# Each target's own files, one directory per target (as agent-starter-pack keeps one per deployment target): the
# hook copies the chosen target's over the base, rendered, and removes the directory (apply_target), so the shared
# files hold no branch per target. A part of a shared file (a README section, requirements lines) is a file under
# the overlay's PARTS, which the shared file includes by the target's name ({% include "_targets/" ~
# cookiecutter.target ~ "/_parts/..." %}); PARTS are never copied. In the template, not beside it: cookiecutter
# copies the directory into the project (raw: `_copy_without_render`), so the hook finds it there under cookiecutter
# and cruft alike, and cruft update, which bakes the old and the new release with their own hooks and applies the
# difference, sees only the files' final places: a file moving into an overlay changes no bake.
TARGETS_DIR = "_targets"
TEMPLATE_DIR_NAME = "{" + "{cookiecutter.project_slug}" + "}"  # the project's template in the checkout
PARTS = "_parts"

# Paths (relative to the baked project) that only the given targets use; a path listed under two
# targets is kept for either.
TARGET_ONLY_PATHS: dict[str, tuple[str, ...]] = {
    "function": ("tests/test_job.py",),  # the example test of the work; a proxy's has its own
    "cloud_run_job": (
        "cloud_run_job",
        "executions.py",
        "tests/test_cloud_run_job.py",
        "tests/test_proxy.py",
    ),
    "workflow": (
        "workflow",
        "executions.py",
        "tests/test_workflow.py",
        "tests/test_proxy.py",
    ),
}

# Paths only a bake with a state_bucket answer keeps: the bootstrap makes the bucket and the deploy
# pipeline's identities, and a pipeline that deploys from local state would start from nothing each run.
STATE_BUCKET_ONLY_PATHS: tuple[str, ...] = ("terraform/bootstrap",)


class ModuleSourceError(ValueError):
    """No pinned address of the template's modules can be derived."""


def module_source(
    template: str, checkout: str | None, repo_dir: Path, head: str | None, origin: str | None, prefix: str = ""
) -> str:
    """The address of the template's modules, MODULE where a module's name goes, from cookiecutter's `_template`
    and `_checkout`, the template checkout `repo_dir`, its HEAD commit, its `origin` remote (None: none) and its
    place in that repository (`prefix`, "sub/" for a template in a sub-directory). A git source is pinned: to the
    checkout asked for, else to the commit baked from."""
    from cookiecutter.config import BUILTIN_ABBREVIATIONS
    from cookiecutter.repository import expand_abbreviations, is_repo_url

    url = expand_abbreviations(template, BUILTIN_ABBREVIATIONS)  # gh:, gl:, bb: -> their https URLs
    if not is_repo_url(url) and origin:  # a local clone: where it came from (cruft clones a local template too)
        url, checkout = origin if is_repo_url(origin) else (repo_dir / origin).as_uri(), None
    if not is_repo_url(url):
        return f"{repo_dir.resolve() / MODULES_DIR}//{MODULE}"
    ref = checkout or head
    if not ref:
        raise ModuleSourceError(f"_template={template!r}: no checkout and no commit to pin the modules' source to")
    return f"git::{url.removeprefix('git+')}//{prefix}{MODULES_DIR.as_posix()}/{MODULE}?ref={ref}"


def git_facts(repo_dir: Path) -> tuple[str | None, str | None, str]:
    """(HEAD commit, origin remote URL, the checkout's sub-directory in its repository) of the template checkout;
    None for what it lacks (not a git repository)."""

    def git(*args: str) -> str | None:
        result = subprocess.run(["git", "-C", str(repo_dir), *args], capture_output=True, text=True, check=False)
        return result.stdout.strip() or None if result.returncode == 0 else None

    return git("rev-parse", "HEAD"), git("remote", "get-url", "origin"), git("rev-parse", "--show-prefix") or ""


def module_address(answers: Mapping[str, object], repo_dir: Path) -> tuple[str, bool]:
    """The modules' address, MODULE where a module's name goes, and whether `_module_source` gave it (else it is
    derived: module_source)."""
    given = str(answers.get("_module_source") or "")
    if given:
        return given, True
    head, origin, prefix = git_facts(repo_dir)
    head = str(answers.get("_commit") or "") or head  # cruft records the commit it baked from
    checkout = str(answers.get("_checkout") or "") or None
    return module_source(str(answers.get("_template") or repo_dir), checkout, repo_dir, head, origin, prefix), False


def is_local(address: str) -> bool:
    """The address names a place on the machine that bakes: a path, or a file:// URL (a git one too)."""
    return bool(LOCAL_ADDRESS.match(address))


def tools_requirement(address: str) -> str:
    """The pip requirement of the tools package at the modules' `address` (any module's, or with MODULE)."""
    found = MODULES_AT.fullmatch(address)
    if not found or bool(found["url"]) != bool(found["ref"]):
        rule = (
            f"the tools package ({TOOLS_DIR.as_posix()}) is pinned where the modules are, so the address must be "
            f"git::<URL>//[<dir>/]{MODULES_DIR.as_posix()}/{MODULE}?ref=<ref> or a path, e.g. {MODULE_SOURCE_EXAMPLE}"
        )
        raise ModuleSourceError(f"_module_source={address!r}: {rule}")
    if found["url"]:
        subdirectory = f"{found['prefix']}{TOOLS_DIR.as_posix()}"
        return f"{TOOLS_PACKAGE} @ git+{found['url']}@{found['ref']}#subdirectory={subdirectory}"
    return f"{TOOLS_PACKAGE} @ {(Path(found['path']) / TOOLS_DIR).as_uri()}"


def check_module_address(answers: Mapping[str, object], repo_dir: Path) -> str:
    """The modules' address, refused in one line (pre_gen_project.py, before anything is written) when it has no
    MODULE, or when a team bake (a state_bucket answer, deployed by CI from a fresh runner) would call the modules
    where only the baking machine has them. A `_module_source` given is taken as the user's word on locality: a
    self-hosted runner may hold the modules at that path (and the template's offline tests do)."""
    address, given = module_address(answers, repo_dir)
    if MODULE not in address:
        rule = f"must hold {MODULE} where each module's name goes, e.g. {MODULE_SOURCE_EXAMPLE}"
        raise ModuleSourceError(f"_module_source={address!r}: {rule}")
    state_bucket = str(answers.get("state_bucket") or "")
    if state_bucket and not given and is_local(address):
        raise ModuleSourceError(
            f"_module_source='': a team bake (state_bucket={state_bucket!r}) is deployed by CI, whose terraform init "
            f"cannot fetch the modules at this machine's {address.replace('//' + MODULE, '')}; give _module_source, "
            f"an address CI can fetch with {MODULE} where each module's name goes, e.g. {MODULE_SOURCE_EXAMPLE}"
        )
    tools_requirement(address)
    return address


def module_sources(answers: Mapping[str, object], repo_dir: Path) -> dict[str, str]:
    """Each module's address (module_address, which pre_gen_project.py has checked); a local path is said."""
    address, given = module_address(answers, repo_dir)
    if not given and not address.startswith("git::"):
        print(f"terraform/main.tf calls the modules at the local path {address.replace('//' + MODULE, '')}")
    return {name: address.replace(MODULE, name) for name in MODULES}


# config.yaml's first version (write_config); from then on the user edits it, and the bake never writes it again.
HEADER = """\
# The only place this project's jobs and their timing live; `python config.py` (`make deploy` runs it) checks it.
# Adding or removing a job: here, and its work in job.py's WORK (tests/test_config.py fails when they disagree).
"""

TARGET_COMMENT = """\
# What a scheduled run does, as baked (its code came with it: job.py, terraform/target.tf): the handler reads it here.
"""

TIMING_COMMENT = """\
# Timing, in seconds, for every job that does not set its own (any of these keys may sit under a job):
#   attempt_deadline_seconds  how long Scheduler waits for an answer (15-1800); the work stops 10 s before
#   lease_seconds             how long a claimed run stays locked (default: the job's deadline + 60)
#   retry_count, min_backoff_seconds, max_backoff_seconds, max_doublings, max_retry_duration_seconds:
#                             Cloud Scheduler's retry_config, given to Terraform as written
"""

FUNCTION_COMMENT = """\
# Capacity: max_instance_count x max_instance_request_concurrency runs each (default 1; above 1, a whole CPU).
# `python config.py` refuses one below the runs in flight at the busiest minute, and names the value that passes.
"""

JOBS_COMMENT = """\
# job id (the Cloud Scheduler job "<slug>-<job id>") => schedule (5-field unix-cron), time_zone (IANA, default Etc/UTC),
# timing keys as above, max_lateness_seconds (a later delivery is skipped, not run), paused (true/false).
"""


def _scalar(value: object) -> str:
    """A YAML scalar (JSON's spelling of strings, numbers and booleans is YAML too); cookiecutter hands numbers over
    as text (questions.config_from_answers keeps them so): written as numbers."""
    return json.dumps(int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]+", value) else value)


def render_config(config: Mapping[str, object]) -> str:
    """The text of config.yaml for a checked config (questions.config_from_answers), with its comments."""
    lines = [HEADER]
    for key in ("slug", "project", "region"):
        lines.append(f"{key}: {_scalar(config[key])}")
    lines.append(TARGET_COMMENT.rstrip("\n"))
    lines.append(f"target: {_scalar(config['target'])}")
    for key in ("database", "collection", "retention_seconds"):
        lines.append(f"{key}: {_scalar(config[key])}")
    lines.append("# How often the audit checks every job's expected runs against the records (minutes).")
    lines.append(f"audit_interval_minutes: {_scalar(config['audit_interval_minutes'])}")
    lines.append("# The (project, location) pairs whose deliveries the function takes; default: only its own.")
    own = f"project: {_scalar(config['project'])}, location: {_scalar(config['region'])}"
    lines.append("# serve:\n#   - {" + own + "}")
    if "function" in config:
        lines.append(FUNCTION_COMMENT.rstrip("\n"))
        lines.append("function:")
        lines.extend(f"  {key}: {_scalar(value)}" for key, value in config["function"].items())
    lines.append("")
    lines.append(TIMING_COMMENT.rstrip("\n"))
    lines.append("defaults:")
    lines.extend(f"  {key}: {_scalar(value)}" for key, value in config["defaults"].items())
    lines.append("")
    lines.append(JOBS_COMMENT.rstrip("\n"))
    lines.append("jobs:")
    for job_id, job in sorted(config["jobs"].items()):
        lines.append(f"  {job_id}:")
        first = [key for key in ("schedule", "time_zone") if key in job]
        ordered = first + [key for key in job if key not in first]
        lines.extend(f"    {key}: {_scalar(job[key])}" for key in ordered)
    return "\n".join(lines) + "\n"


def write_config(project_dir: Path, answers: Mapping[str, object]) -> Path:
    """config.yaml from the answers: questions.config_from_answers decides the numbers, render_config the text."""
    path = project_dir / CONFIG_FILE
    path.write_text(render_config(questions.config_from_answers(public_answers(answers))), encoding="utf-8")
    return path


def remove_unused_paths(project_dir: Path, target: str) -> list[Path]:
    """Delete what other targets need and this one does not."""
    removed = []
    for other, paths in TARGET_ONLY_PATHS.items():
        if other == target:
            continue
        for relative in paths:
            if relative in TARGET_ONLY_PATHS[target]:
                continue
            path = project_dir / relative
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            else:
                continue
            removed.append(path)
    return removed


def remove_pipeline_paths(project_dir: Path, state_bucket: str) -> list[Path]:
    """Without a state bucket there is no deploy pipeline, so no bootstrap for it (nor the target's part of it, which
    apply_target copied before)."""
    if state_bucket:
        return []
    removed = [project_dir / relative for relative in STATE_BUCKET_ONLY_PATHS]
    for path in removed:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return removed


# Settings that are not questions: cookiecutter renders a "__" variable without asking it, and extra context
# (a --config-file, cruft's --extra-context) may still set it under that name. The bake knows them without the prefix.
UNASKED = "__"


def public_answers(answers: Mapping[str, object]) -> dict[str, object]:
    """The user's answers under the names the bake uses: the unasked settings without their prefix,
    cookiecutter's private (underscore) keys left out."""
    public = {}
    for key, value in answers.items():
        if key.startswith(UNASKED):
            public[key.removeprefix(UNASKED)] = value
        elif not key.startswith("_"):
            public[key] = value
    return public


def as_extra_context(answers: Mapping[str, object], variables: Mapping[str, object]) -> dict[str, object]:
    """`answers` under the names cookiecutter.json (`variables`) gives them: an unasked setting under its "__" name.
    cookiecutter silently drops extra context for a name it does not have (apply_overwrites_to_context)."""
    return {key if key in variables else UNASKED + key: value for key, value in answers.items()}


def checked_answers(answers: Mapping[str, object]) -> dict[str, object]:
    """The public answers with `jobs` as the rules read it (an object, whether it was given as one or as text)."""
    public = public_answers(answers)
    return {**public, "jobs": rules.check_jobs(questions.parse_jobs(public["jobs"]))}


def render_context(answers: Mapping[str, object], sources: Mapping[str, str]) -> dict[str, object]:
    """What the hook renders with: the checked answers, the modules' `sources` and requirements-dev.txt's pin of the
    tools package (where the modules are); made once a bake."""
    tools = tools_requirement(sources[MODULES[0]])
    return {"cookiecutter": {**checked_answers(answers), "module_sources": dict(sources), "tools_requirement": tools}}


def render_checked(
    project_dir: Path, answers: Mapping[str, object], context: Mapping[str, object], template_dir: Path
) -> list[Path]:
    """Render the files cookiecutter copied unrendered (its `_copy_without_render`, the files that read an answer
    the rules normalise: `jobs`, the unasked settings; or the modules' sources), with cookiecutter's own Jinja
    environment and the hook's `context`. cookiecutter cannot: a hook never changes the context it renders with."""
    patterns = answers.get("_copy_without_render") or []
    rendered = []
    for path in sorted(project_dir.rglob("*")):
        relative = path.relative_to(project_dir).as_posix()
        if relative.startswith(TARGETS_DIR + "/"):  # rendered as apply_target copies them
            continue
        if path.is_file() and any(fnmatch.fnmatch(relative, pattern) for pattern in patterns):
            _render(path, path, template_dir, context)
            rendered.append(path)
    return rendered


def _render(source: Path, destination: Path, template_dir: Path, context: Mapping[str, object]) -> None:
    """`source` rendered into `destination` with cookiecutter's own Jinja environment and `context`
    (render_context); an {% include %} reads the template's own file (an overlay's part), as cookiecutter's does."""
    from cookiecutter.environment import StrictEnvironment
    from jinja2 import FileSystemLoader

    environment = StrictEnvironment(context=context, keep_trailing_newline=True)
    environment.loader = FileSystemLoader(str(template_dir))
    with source.open(encoding="utf-8", newline="") as file:
        template = file.read()
    destination.parent.mkdir(parents=True, exist_ok=True)
    with destination.open("w", encoding="utf-8", newline="") as file:
        file.write(environment.from_string(template).render(**context))


def apply_target(
    project_dir: Path, answers: Mapping[str, object], context: Mapping[str, object], template_dir: Path
) -> list[Path]:
    """The chosen target's overlay (TARGETS_DIR/<target>, but its PARTS) rendered over the base, from the template's
    own copy (whatever cookiecutter did with the project's); then every overlay removed. Returns the files written."""
    overlay = template_dir / TARGETS_DIR / str(answers["target"])
    written = []
    for path in sorted(overlay.rglob("*")):
        relative = path.relative_to(overlay)
        if path.is_file() and relative.parts[0] != PARTS:
            _render(path, project_dir / relative, template_dir, context)
            written.append(project_dir / relative)
    shutil.rmtree(project_dir / TARGETS_DIR)
    return written


def template_version(repo_dir: Path) -> str:
    """The release of the template checkout a bake comes from (its VERSION file)."""
    return (repo_dir / VERSION_FILE).read_text(encoding="utf-8").strip()


def write_answers(project_dir: Path, answers: Mapping[str, object], version: str) -> Path:
    """The answers, the jobs by id only (their schedules and timing live in config.yaml alone), and the template
    release they were baked at (`version`), which tells an upgrade which CHANGELOG.md entries it crosses."""
    path = project_dir / ".cookiecutter.json"
    public = public_answers(answers)
    recorded = {**public, "jobs": sorted(questions.parse_jobs(public["jobs"])), TEMPLATE_VERSION_KEY: version}
    path.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def finish_bake(project_dir: Path, repo_dir: Path, answers: Mapping[str, object]) -> None:
    context = render_context(answers, module_sources(answers, repo_dir))
    template_dir = repo_dir / TEMPLATE_DIR_NAME
    render_checked(project_dir, answers, context, template_dir)
    apply_target(project_dir, answers, context, template_dir)
    write_config(project_dir, answers)
    remove_unused_paths(project_dir, str(answers["target"]))
    remove_pipeline_paths(project_dir, str(answers["state_bucket"]))
    write_answers(project_dir, answers, template_version(repo_dir))
