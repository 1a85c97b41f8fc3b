"""benchmarks/bake_size.py counts a toy tree right, and prints its table for this work tree."""

from __future__ import annotations

import json
import subprocess
import sys

import bake_size
from conftest import ROOT


def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_toy_tree_is_counted_per_category(tmp_path):
    write(tmp_path, "README.md", "# Toy\nMade from the template.\n")  # the README may name the template
    write(tmp_path, "main.py", "a = 1\nb = 2\n")
    write(tmp_path, "tests/test_main.py", "def test():\n    pass\n# the template's proofs\n")  # names it
    write(tmp_path, "tools/cli.py", "print()\n")
    write(tmp_path, "docs/ops.md", "One\nTwo\nThree\n")
    write(tmp_path, "terraform/main.tf", 'locals {\n  legendTemplate = "x"\n}\n')  # not the template
    write(tmp_path, "terraform/modules/m/README.md", "This template holds both.\n")  # docs, and names it
    write(tmp_path, "Makefile", "all:\n\ttrue\n")
    write(tmp_path, ".cookiecutter.json", '{"_template": "gh:o/r"}\n')  # cruft's record: no words
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\0\n\n")

    figures = bake_size.measure(tmp_path)

    assert figures == {
        "files": 10,
        "code": 2,
        "terraform": 3,
        "tests": 3,
        "docs": 2 + 3 + 1,
        "tools": 1,
        "other": 2 + 1 + 0,
        "lines": 2 + 2 + 3 + 1 + 3 + 3 + 1 + 2 + 1,
        "readme": 2,
        "template_lines": 2,
    }


def test_only_unprefixed_keys_are_questions(tmp_path):
    answers = {"project_name": "x", "target": ["a", "b"], "__timing": 3, "_copy_without_render": [], "__prompts__": {}}
    (tmp_path / "cookiecutter.json").write_text(json.dumps(answers))
    assert bake_size.questions(tmp_path / "cookiecutter.json") == 2


def test_the_script_prints_this_tree_s_figures(tmp_path):
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bake_size.py"), "--no-reference", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())["this tree"]
    assert figures["lines"] == sum(figures[name] for name in bake_size.CATEGORIES)
    assert figures["questions"] == bake_size.questions(ROOT / "cookiecutter.json")
    assert "| lines: total |" in result.stdout and f"{figures['lines']:,}" in result.stdout
