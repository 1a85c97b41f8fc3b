"""The provider pins hold in one place: the template's modules state minimum versions only (`>=`), and every root a
bake has (its terraform/ and a team bake's terraform/bootstrap) bounds each provider with one `~>`, the same in both,
no lower than the minimum of any module it calls. Terraform's advice ("Version Constraints", Best Practices:
https://developer.hashicorp.com/terraform/language/expressions/version-constraints#best-practices): "Reusable modules
should constrain only their minimum allowed versions of Terraform and providers"; "Root modules should use a ~>
constraint to set both a lower and upper bound on versions for each provider they depend on."
"""

from __future__ import annotations

import re
from pathlib import Path

import hcl2
from conftest import ROOT

MODULES = ROOT / "terraform" / "modules"
BAKED_TERRAFORM = ROOT / "{{cookiecutter.project_slug}}" / "terraform"
ROOTS = [BAKED_TERRAFORM, BAKED_TERRAFORM / "bootstrap"]
MINIMUM = re.compile(r">= ?(\d+(?:\.\d+)*)")
BOUNDED = re.compile(r"~> ?(\d+\.\d+)")


def unquoted(value: str) -> str:
    return value.strip('"')


def requirements(directory: Path) -> tuple[str, dict[str, tuple[str, str]]]:
    """A configuration's required_version and {provider: (source, version constraint)}, from its versions.tf."""
    (block,) = hcl2.load((directory / "versions.tf").open())["terraform"]
    providers = {
        name: (unquoted(spec["source"]), unquoted(spec["version"]))
        for entry in block["required_providers"]
        for name, spec in entry.items()
        if not name.startswith("__")
    }
    return unquoted(block["required_version"]), providers


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def pin_disagreements(modules: list[Path], roots: list[Path], base: Path = ROOT) -> list[str]:
    """Every broken pin rule, one line each (empty: all hold); roots are named relative to `base`."""
    problems = []
    cores = {}
    minimums: dict[str, tuple[str, tuple[int, ...], str]] = {}  # provider -> (source, highest minimum, module)
    for module in modules:
        core, providers = requirements(module)
        cores[module.name] = core
        for name, (source, constraint) in providers.items():
            match = MINIMUM.fullmatch(constraint)
            if not match:
                problems.append(f"{module.name}: {name} = {constraint!r}: a module states a minimum only (>= X)")
                continue
            if name not in minimums or version(match[1]) > minimums[name][1]:
                minimums[name] = (source, version(match[1]), module.name)
    pins = {}
    for root in roots:
        label = root.relative_to(base).as_posix()
        core, providers = requirements(root)
        cores[label] = core
        for name, (source, constraint) in providers.items():
            match = BOUNDED.fullmatch(constraint)
            if not match:
                problems.append(f"{label}: {name} = {constraint!r}: a root bounds a provider with one ~> X.Y")
                continue
            pins.setdefault(name, {})[label] = (source, constraint)
            if name in minimums and minimums[name][0] != source:
                problems.append(f"{label}: {name} is {source}, {minimums[name][2]} needs {minimums[name][0]}")
            if name in minimums and version(match[1]) < minimums[name][1]:
                needed = ".".join(map(str, minimums[name][1]))
                problems.append(f"{label}: {name} {constraint!r} allows less than {minimums[name][2]}'s >= {needed}")
    for name, by_root in sorted(pins.items()):
        if len(set(by_root.values())) > 1:
            problems.append(f"{name}: the roots disagree: {by_root}")
    if len(set(cores.values())) > 1:
        problems.append(f"required_version differs: {cores}")
    return problems


def test_modules_state_minimums_and_the_roots_pin_once():
    modules = sorted(path.parent for path in MODULES.rglob("versions.tf"))
    assert len(modules) >= 5, modules
    assert pin_disagreements(modules, ROOTS) == []


def test_every_root_pins_each_provider_its_modules_need():
    """The bake's root calls the core module: it pins each provider the core requires (bootstrap needs fewer)."""
    _, core = requirements(MODULES / "scheduled-dedup")
    _, root = requirements(ROOTS[0])
    assert set(core) <= set(root), (sorted(core), sorted(root))


def test_two_pins_that_disagree_are_found(tmp_path):
    """The check can fail: a root's pin that differs from the other root's, a module with an upper bound."""
    for source in [*ROOTS, MODULES / "image-repository"]:
        copy = tmp_path / source.relative_to(ROOT)
        copy.mkdir(parents=True)
        (copy / "versions.tf").write_text((source / "versions.tf").read_text())
    bootstrap = tmp_path / ROOTS[1].relative_to(ROOT) / "versions.tf"
    bootstrap.write_text(bootstrap.read_text().replace('version = "~> 8.0"', 'version = "~> 8.1"'))
    module = tmp_path / "terraform" / "modules" / "image-repository"
    (module / "versions.tf").write_text((module / "versions.tf").read_text().replace('">= 8.0"', '">= 8.0, < 9.0"'))
    roots = [tmp_path / root.relative_to(ROOT) for root in ROOTS]
    problems = pin_disagreements([module], roots, base=tmp_path)
    assert any(line.startswith("google: the roots disagree") for line in problems), problems
    assert any("a module states a minimum only" in line for line in problems), problems
