"""The docs render on GitHub: the template's docs/ and the docs/ a default bake carries (rendered with its
names). Every mermaid diagram parses with mermaid's own parser, every link between the pages (file and
#anchor) resolves, and no page exists in both places."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, TEMPLATE_PROJECT, bake

DOCS = ROOT / "docs"
BAKED_DOCS = TEMPLATE_PROJECT / "docs"  # the baked pages' templates
CHECKER = ROOT / "tests" / "docs-check"
INSTALL_HINT = "run `make test` (it runs `npm ci --prefix tests/docs-check`), or that npm command yourself"
MERMAID_BLOCK = re.compile(r"^```mermaid\n(.*?)^```", re.M | re.S)
# [text](target): targets without a scheme are links inside the repository.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PAGES = sorted(DOCS.glob("*.md"))
# What is about the template, and what a bake's user needs.
TEMPLATE_TOPICS = {
    "README.md",
    "targets.md",
    "performance.md",
    "delivery.md",
    "upgrading.md",
    "faults.md",
    "choosing-the-numbers.md",
    # Derivations and design: the protocol, IAM, the threats, the audit, the cost model.
    "how-it-works.md",
    "iam.md",
    "security.md",
    "audit.md",
    "cost-model.md",
}
# What a bake's user operates with; its README holds the recipes.
BAKED_TOPICS = {"operations.md", "schedules-and-manual-runs.md", "cost.md"}


@pytest.fixture(scope="module")
def baked_pages(tmp_path_factory) -> list[Path]:
    """A default bake's docs/ and README.md, rendered."""
    project = bake(tmp_path_factory.mktemp("docs"))
    return [project / "README.md", *sorted((project / "docs").glob("*.md"))]


def mermaid_blocks(pages: list[Path], prefix: str = "") -> list[dict[str, str]]:
    blocks = []
    for page in pages:
        for number, match in enumerate(MERMAID_BLOCK.finditer(page.read_text()), 1):
            blocks.append({"name": f"{prefix}{page.name} diagram {number}", "code": match[1]})
    return blocks


def parse_mermaid(blocks: list[dict[str, str]]) -> list[dict]:
    """mermaid.parse() on each block, in one node process (tests/docs-check/check_mermaid.mjs)."""
    node = shutil.which("node")
    if not node:
        pytest.fail(f"node is not installed; the mermaid check needs Node.js 18+. Then {INSTALL_HINT}.", pytrace=False)
    if not (CHECKER / "node_modules" / "mermaid").is_dir():
        pytest.fail(f"the pinned mermaid parser is not installed: {INSTALL_HINT}.", pytrace=False)
    result = subprocess.run(
        [node, "check_mermaid.mjs"], cwd=CHECKER, input=json.dumps(blocks), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


# A baked page's per-target text sits in the overlays' parts it includes by the target's name (hooks/baking.py, PARTS):
# a link into the template's page may point at a heading of any target's part.
INCLUDE = re.compile(r'\{%-? include "_targets/" ~ cookiecutter\.target ~ "/_parts/([^"]+)"')


def anchors(page: Path) -> set[str]:
    text = page.read_text()
    parts = [part for name in INCLUDE.findall(text) for part in TEMPLATE_PROJECT.glob(f"_targets/*/_parts/{name}")]
    text = MERMAID_BLOCK.sub("", "\n".join([text, *(part.read_text() for part in sorted(parts))]))
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {github_anchor(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_docs_cover_the_topics_each_once(baked_pages):
    template, baked = {page.name for page in PAGES}, {page.name for page in baked_pages[1:]}
    assert template >= TEMPLATE_TOPICS
    assert baked == BAKED_TOPICS, "a bake's docs/ is what its user operates with; derivations live in docs/"
    assert not template & baked, f"pages both in the template's docs/ and in a bake's: {sorted(template & baked)}"
    assert {page.name for page in BAKED_DOCS.glob("*.md")} == baked


def test_the_docs_indexes_link_every_page(baked_pages):
    indexed = set(LINK.findall((DOCS / "README.md").read_text()))
    missing = [page.name for page in PAGES if page.name != "README.md" and page.name not in indexed]
    missing += [page.name for page in baked_pages[1:] if f"../{BAKED_DOCS.parent.name}/docs/{page.name}" not in indexed]
    assert not missing, f"docs/README.md does not link: {missing}"
    in_readme = set(LINK.findall(baked_pages[0].read_text()))
    unlinked = [page.name for page in baked_pages[1:] if f"docs/{page.name}" not in in_readme]
    assert not unlinked, f"the baked README does not link: {unlinked}"


def test_every_mermaid_diagram_parses(baked_pages):
    blocks = mermaid_blocks(PAGES) + mermaid_blocks(baked_pages, prefix="baked ")
    results = parse_mermaid(blocks)
    failures = [f"{r['name']}: {r['error']}" for r in results if not r["ok"]]
    assert not failures, "\n".join(failures)
    types = {r["name"].split(" diagram")[0]: set() for r in results}
    for r in results:
        types[r["name"].split(" diagram")[0]].add(r["type"])
    assert {"sequence", "stateDiagram"} <= types["how-it-works.md"]


def test_the_checker_rejects_a_broken_diagram():
    broken = [
        {"name": "arrow without a target", "code": "sequenceDiagram\n    A->>: hello\n"},
        {"name": "dangling transition", "code": "stateDiagram-v2\n    [*] --> \n"},
        {"name": "unknown diagram type", "code": "sequenceDiagramm\n    A->>B: hi\n"},
    ]
    results = parse_mermaid(broken)
    assert [r["ok"] for r in results] == [False, False, False], results
    assert all("error" in r and r["error"] for r in results)


def broken_links(pages: list[Path]) -> list[str]:
    broken = []
    for page in pages:
        for target in LINK.findall(MERMAID_BLOCK.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: outside the repository
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{page.name}: {target} (no heading with that anchor)")
    return broken


def test_links_between_docs_resolve():
    assert not broken_links(PAGES), "\n".join(broken_links(PAGES))


def test_links_between_a_bakes_docs_resolve_inside_it(baked_pages):
    assert not broken_links(baked_pages), "\n".join(broken_links(baked_pages))


def test_the_link_check_finds_a_missing_page_and_a_missing_heading(tmp_path):
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## Why it's `safe`\n")
    page.write_text("[ok](b.md#why-its-safe) [gone](c.md) [bad anchor](b.md#nope) [web](https://example.com)\n")
    assert broken_links([page]) == ["a.md: c.md (no such file)", "a.md: b.md#nope (no heading with that anchor)"]


# A path or file name in backquotes: "hooks/baking.py", "terraform/modules/*/*.tf", "cloud_run_job/", "test_faults.py".
MAP_PATH = re.compile(r"`([\w.*<>-]+(?:/[\w.*<>-]*)*\.(?:py|json|md|tf)|[\w.-]+(?:/[\w.*-]+)*/)`")


def test_the_maintainers_map_names_files_that_exist():
    """The README's "when to modify what": every file it names is the template's, the baked tree's, or (a bare name)
    one of the template's tests, so the map follows a moved or renamed file."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Maintaining the template") :]
    named = sorted(set(MAP_PATH.findall(section)))
    assert "tests/test_upgrade.py" in named and "hooks/baking.py" in named

    def exists(name: str) -> bool:
        found = [path for base in (ROOT, TEMPLATE_PROJECT) for path in base.glob(name)]
        return bool(found or ("/" not in name and list((ROOT / "tests").rglob(name))))

    missing = [name for name in named if not exists(name)]
    assert missing == []
