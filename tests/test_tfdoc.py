"""Each module's README holds its inputs and outputs tables as terraform/tfdoc.py writes them from the module's variable
and output blocks (as Cloud Foundation Fabric's tfdoc does): a description, type or default changed in a .tf file
and not in the README fails here; `make tfdoc` rewrites them."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "terraform"))

import tfdoc  # noqa: E402  (terraform/tfdoc.py)


def test_every_module_readme_holds_its_current_tables(capsys):
    found = tfdoc.modules()
    assert {path.name for path in found} >= {"scheduled-dedup", "image-repository"}, found
    assert tfdoc.main(["--check"]) == 0, capsys.readouterr().err


@pytest.fixture
def module_copy(tmp_path):
    copy = tmp_path / "image-repository"
    shutil.copytree(tfdoc.MODULES / "image-repository", copy)
    return copy


def test_a_changed_description_makes_the_readme_stale_until_rewritten(module_copy, capsys):
    variables = module_copy / "variables.tf"
    variables.write_text(variables.read_text().replace("Project of the repository.", "The repository's | project."))
    assert tfdoc.main(["--check", str(module_copy)]) == 1
    assert "is stale (run python terraform/tfdoc.py)" in capsys.readouterr().err
    assert tfdoc.main([str(module_copy)]) == 0
    readme = (module_copy / "README.md").read_text()
    assert "| `project_id` | The repository's \\| project. | `string` | required |\n" in readme
    assert readme.startswith("# image-repository\n") and readme.endswith(tfdoc.END + "\n")  # the rest as it was
    assert tfdoc.main(["--check", str(module_copy)]) == 0


def test_a_new_variable_and_output_get_rows(module_copy):
    """What another module or a new input needs: nothing but its blocks and the README's markers."""
    (module_copy / "extra.tf").write_text(
        'variable "cpu" {\n  description = "vCPUs <n>."\n  type = object({ count = optional(number, 1) })\n'
        '  default = {}\n}\n\noutput "secret" {\n  description = "A token."\n  value = "x"\n  sensitive = true\n}\n'
    )
    tfdoc.main([str(module_copy)])
    readme = (module_copy / "README.md").read_text()
    assert "| `cpu` | vCPUs &lt;n&gt;. | `object({count = optional(number, 1)})` | `{}` |\n" in readme
    assert "| `secret` | A token. | yes |\n" in readme


def test_a_module_without_markers_or_descriptions_is_refused(module_copy, capsys):
    readme = module_copy / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace(tfdoc.END, ""))
    assert tfdoc.main([str(module_copy)]) == 2
    assert "needs one" in capsys.readouterr().err
    readme.write_text(text)
    (module_copy / "extra.tf").write_text('variable "undocumented" {\n  type = string\n}\n')
    assert tfdoc.main([str(module_copy)]) == 2
    assert "variable 'undocumented' has no description" in capsys.readouterr().err
    assert readme.read_text() == text  # nothing half-written
