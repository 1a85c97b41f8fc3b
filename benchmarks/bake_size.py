"""The size of a default bake, side by side: this work tree and a reference commit (issue 17's budget).

    python benchmarks/bake_size.py [--reference REF ...] [--json FILE]

For each side: files, lines per category (code, terraform, tests, docs, tools, other), the questions a bake
asks (cookiecutter.json's keys without a leading underscore), the README's lines and the lines outside the
README that name the template. Figures, never asserted here; tests/test_bake_size.py checks the counting.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import REFERENCE  # noqa: E402
from two_bakes import bake, template_at  # noqa: E402

CATEGORIES = ("code", "terraform", "tests", "docs", "tools", "other")
# A line that names the template: "the template", "this template", "the template's" (issue 17's budget: at most 3
# lines outside the README); not Terraform's templatefile or a dashboard's legendTemplate.
NAMES_TEMPLATE = re.compile(r"\b(?:the|this) template\b|\btemplate's\b", re.IGNORECASE)


def category(relative: Path) -> str:
    """The category of a bake's file, by its place first (tests/, tools/, docs/), then by its kind."""
    top = relative.parts[0]
    if top in ("tests", "tools"):
        return top
    if top == "docs" or relative.suffix == ".md":
        return "docs"
    if top == "terraform" or relative.suffix in (".tf", ".hcl"):
        return "terraform"
    if relative.suffix == ".py":
        return "code"
    return "other"


def line_count(path: Path) -> int:
    """Lines as `wc -l` counts them (newlines); 0 for a binary file."""
    data = path.read_bytes()
    return 0 if b"\0" in data else data.count(b"\n")


def questions(cookiecutter_json: Path) -> int:
    """The prompts a bake asks: cookiecutter skips keys that start with an underscore."""
    return sum(1 for key in json.loads(cookiecutter_json.read_text()) if not key.startswith("_"))


def measure(project: Path) -> dict[str, int]:
    """Files, lines per category, total lines, README lines and the lines outside it that name the template."""
    figures = dict.fromkeys(("files", *CATEGORIES, "lines", "readme", "template_lines"), 0)
    for path in sorted(p for p in project.rglob("*") if p.is_file()):
        relative = path.relative_to(project)
        lines = line_count(path)
        figures["files"] += 1
        figures[category(relative)] += lines
        figures["lines"] += lines
        if relative == Path("README.md"):
            figures["readme"] = lines
    figures["template_lines"] = len(template_naming(project))
    return figures


def template_naming(project: Path) -> list[str]:
    """The lines outside the README that name the template, as "path: line"."""
    return [
        f"{path.relative_to(project)}: {line.strip()}"
        for path in sorted(project.rglob("*"))
        if path.is_file() and path != project / "README.md"
        for line in path.read_text(errors="ignore").splitlines()
        if NAMES_TEMPLATE.search(line)
    ]


def measure_template(template: Path, scratch: Path) -> dict[str, int]:
    """A default bake of `template`, measured; plus the template's question count."""
    return {**measure(bake(template, scratch)), "questions": questions(template / "cookiecutter.json")}


ROWS = (
    ("files", "files"),
    *((name, f"lines: {name}") for name in CATEGORIES),
    ("lines", "lines: total"),
    ("questions", "questions asked"),
    ("readme", "README lines"),
    ("template_lines", "lines outside the README naming the template"),
)


def table(sides: dict[str, dict[str, int]]) -> str:
    """One Markdown table, a column per side."""
    names = list(sides)
    out = ["| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    out += [f"| {label} | " + " | ".join(f"{sides[name][key]:,}" for name in names) + " |" for key, label in ROWS]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="append", help=f"a commit to compare with (default: {REFERENCE})")
    parser.add_argument("--no-reference", action="store_true", help="measure this work tree only")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    references = [] if args.no_reference else (args.reference or [REFERENCE])
    sides: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="bake-size-") as scratch:
        for ref in references:
            template = template_at(ref, Path(scratch) / f"ref-{ref}")
            sides[ref] = measure_template(template, Path(scratch) / f"bake-{ref}")
        sides["this tree"] = measure_template(ROOT, Path(scratch) / "bake-this-tree")
    print(table(sides))
    if args.json:
        args.json.write_text(json.dumps(sides, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
