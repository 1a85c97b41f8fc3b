"""The bakes' tools are one package of this repository (packages/scheduled-dedup-tools), versioned with the template
and pinned by each bake where its Terraform modules are: the same repository and ref (baking.tools_requirement)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import baking
import pytest
from conftest import ROOT, TOOLS_SOURCE, bake
from test_hooks import refused_bake

PACKAGE = TOOLS_SOURCE.parent.parent


def test_the_package_is_the_templates_release():
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    assert project["name"] == baking.TOOLS_PACKAGE and PACKAGE == ROOT / baking.TOOLS_DIR
    assert project["version"] == (ROOT / baking.VERSION_FILE).read_text().strip()


@pytest.mark.parametrize(
    ("address", "requirement"),
    [
        (
            baking.MODULE_SOURCE_EXAMPLE,
            "git+https://github.com/acme/dedup.git@v1.2.0#subdirectory=packages/scheduled-dedup-tools",
        ),
        (  # a template in a sub-directory of its repository, one module's address
            "git::file:///src/mono//dedup/terraform/modules/scheduled-dedup?ref=0123abc",
            "git+file:///src/mono@0123abc#subdirectory=dedup/packages/scheduled-dedup-tools",
        ),
        ("/home/me/dedup/terraform/modules//{module}", "file:///home/me/dedup/packages/scheduled-dedup-tools"),
    ],
)
def test_the_tools_are_pinned_where_the_modules_are(address, requirement):
    assert baking.tools_requirement(address) == f"scheduled-dedup-tools @ {requirement}"


@pytest.mark.parametrize(
    "address",
    [
        "git::https://example.com/x.git//m/{module}?ref=v9",  # no terraform/modules: no package beside it
        "git::https://github.com/acme/dedup.git//terraform/modules/{module}",  # unpinned
        "github.com/acme/dedup//terraform/modules/{module}?ref=v2",  # not a source pip reads
    ],
)
def test_an_address_the_tools_cannot_follow_is_refused_naming_the_rule(address):
    with pytest.raises(baking.ModuleSourceError, match=r"the tools package \(packages/scheduled-dedup-tools\) is"):
        baking.tools_requirement(address)


@pytest.mark.bake
def test_a_bake_pins_the_tools_at_its_modules_address(tmp_path):
    given = "git::https://example.com/dedup.git//terraform/modules/{module}?ref=v2"
    project = bake(tmp_path, _module_source=given)
    pins = [
        line for line in (project / "requirements-dev.txt").read_text().splitlines() if "scheduled-dedup-tools" in line
    ]
    assert pins == [baking.tools_requirement(given)]
    assert (
        'source = "git::https://example.com/dedup.git//terraform/modules/scheduled-dedup?ref=v2"'
        in (project / "terraform" / "main.tf").read_text()
    )
    assert not (project / "tools").exists()


@pytest.mark.bake
def test_a_module_source_the_tools_cannot_follow_is_refused_before_anything_is_written(tmp_path, capfd):
    address = "git::https://example.com/x.git//m/{module}?ref=v9"
    line = refused_bake(ROOT, tmp_path / "out", capfd, _module_source=address)
    assert line.startswith(f"ERROR: _module_source={address!r}: the tools package (packages/scheduled-dedup-tools) is")


@pytest.mark.bake
def test_python_config_py_without_the_tools_is_one_line_naming_the_fix(tmp_path):
    """`python config.py` (make deploy's check) in a venv without the tools package, as if it were not installed."""
    project = bake(tmp_path)
    hidden = "sys.path[:] = [p for p in sys.path if not p.rstrip('/').endswith('scheduled-dedup-tools/src')]"
    blocked = f"import runpy, sys; {hidden}; runpy.run_path('config.py', run_name='__main__')"
    checked = subprocess.run([sys.executable, "-c", blocked], cwd=project, capture_output=True, text=True, check=False)
    assert (checked.returncode, checked.stdout) == (1, "")
    assert (
        checked.stderr
        == "ERROR: scheduled_dedup_tools is not installed: `make venv` (pip install -r requirements-dev.txt)\n"
    )
