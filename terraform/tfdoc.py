"""Write each Terraform module's inputs and outputs tables into its README, from its variable and output blocks.

    python terraform/tfdoc.py          # rewrites the tables of every module under terraform/modules
    python terraform/tfdoc.py --check  # exit 1, naming each README whose tables are stale (tests/test_tfdoc.py)
    python terraform/tfdoc.py DIR ...  # these module directories only

As Cloud Foundation Fabric's terraform/tfdoc.py does: the tables sit between the markers BEGIN and END below, and
the description of each variable and output (variables.tf, outputs.tf) is their one source; the rest of the
README is written by hand. A module is a directory with a variables.tf or outputs.tf (nested ones too); each
must hold a README.md with the markers. Blocks are read with python-hcl2 (requirements-dev.txt), in the order
their files (sorted by name) declare them; a type is written as python-hcl2 gives it back, one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import hcl2

ROOT = Path(__file__).resolve().parents[1]
MODULES = ROOT / "terraform" / "modules"
BEGIN = "<!-- BEGIN TFDOC: generated from variables.tf and outputs.tf by the template's terraform/tfdoc.py -->"
END = "<!-- END TFDOC -->"


class TfdocError(Exception):
    """A module the tool cannot document: the message names the file and what is missing."""


def shown(path: Path) -> str:
    """A path as messages name it: relative to the template when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def modules(root: Path = MODULES) -> list[Path]:
    """Every module directory under `root`: one with a variables.tf or an outputs.tf."""
    found = {path.parent for name in ("variables.tf", "outputs.tf") for path in root.rglob(name)}
    return sorted(path for path in found if ".terraform" not in path.parts)


def blocks(module: Path, kind: str) -> list[tuple[str, dict]]:
    """(name, body) of each `kind` block ("variable", "output") the module's .tf files declare, in order."""
    found = []
    for path in sorted(module.glob("*.tf")):
        with path.open() as handle:
            parsed = hcl2.load(handle)
        for entry in parsed.get(kind, []):
            for name, body in entry.items():
                if not name.startswith("__"):
                    found.append((name.strip('"'), body))
    return found


def hcl(value: object) -> str:
    """A value as python-hcl2 gives it back (strings keep their quotes, expressions their ${...}), as HCL."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value[2:-1] if value.startswith("${") and value.endswith("}") else value
    if isinstance(value, list):
        return "[" + ", ".join(hcl(item) for item in value) + "]"
    if isinstance(value, dict):
        items = [f"{key} = {hcl(item)}" for key, item in value.items() if not key.startswith("__")]
        return "{" + (" " + ", ".join(items) + " " if items else "") + "}"
    return str(value)


def cell(text: str) -> str:
    """Text fit for one table cell: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def prose(text: str) -> str:
    """A description as one cell: `<slug>` shown, not taken for an HTML tag."""
    return cell(text).replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    return f"`{cell(text)}`" if text else ""


def description(module: Path, kind: str, name: str, body: dict) -> str:
    if "description" not in body:
        raise TfdocError(f"{shown(module)}: {kind} {name!r} has no description (the README's is it)")
    return prose(hcl(body["description"]).removeprefix('"').removesuffix('"').replace('\\"', '"'))


def tables(module: Path) -> str:
    """The generated part of the module's README (between the markers, which it excludes)."""
    lines = ["", "### Inputs", ""]
    variables = blocks(module, "variable")
    if variables:
        lines += ["| name | description | type | default |", "| --- | --- | --- | --- |"]
        for name, body in variables:
            default = code(hcl(body["default"])) if "default" in body else "required"
            lines.append(
                f"| `{name}` | {description(module, 'variable', name, body)} | {code(hcl(body.get('type', 'any')))} "
                f"| {default} |"
            )
    else:
        lines.append("None.")
    lines += ["", "### Outputs", ""]
    outputs = blocks(module, "output")
    if outputs:
        lines += ["| name | description | sensitive |", "| --- | --- | --- |"]
        for name, body in outputs:
            sensitive = "yes" if body.get("sensitive") is True else ""
            lines.append(f"| `{name}` | {description(module, 'output', name, body)} | {sensitive} |")
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def rendered(module: Path) -> tuple[str, str]:
    """The module's README as it is and as it should be."""
    readme = module / "README.md"
    if not readme.is_file():
        raise TfdocError(f"{shown(readme)}: missing (every module has a README with the tables)")
    text = readme.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise TfdocError(f"{shown(readme)}: needs one {BEGIN!r} line, then one {END!r} line")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return text, head + BEGIN + "\n" + tables(module) + "\n" + END + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a README's tables are stale")
    parser.add_argument("modules", nargs="*", type=Path, help="module directories (default: every module)")
    args = parser.parse_args(argv)
    try:  # every README rendered before any is written: a module refused leaves all as they were
        chosen = [path.resolve() for path in args.modules] or modules()
        readmes = {module / "README.md": rendered(module) for module in chosen}
    except TfdocError as error:
        print(f"tfdoc: {error}", file=sys.stderr)
        return 2
    stale = [readme for readme, (current, wanted) in readmes.items() if current != wanted]
    for readme in stale:
        if not args.check:
            readme.write_text(readmes[readme][1])
        verb = "is stale (run python terraform/tfdoc.py)" if args.check else "rewritten"
        print(f"{shown(readme)}: {verb}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
