"""The plan job's summary for whoever approves the deploy (.github/workflows/ci.yml): how many resources of each
type each action touches, then the plan's text if it fits. GitHub refuses a step summary over 1 MiB ("supports
content up to a size of 1024k"; docs.github.com/actions/using-workflows/workflow-commands-for-github-actions,
"Adding a job summary"), which a first deploy of many jobs exceeds: the counts always fit, and the whole text is the
run's artifact PLAN_TEXT_ARTIFACT.

    python3 -m scheduled_dedup_tools.plan_summary tfplan.json tfplan.txt >> "$GITHUB_STEP_SUMMARY"

tfplan.json is `terraform show -json tfplan`, tfplan.txt `terraform show -no-color tfplan`. Standard library only:
the plan job installs this package alone (--no-deps) into the runner's python3.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

# Terraform's JSON plan ("JSON Output Format", developer.hashicorp.com/terraform/internals/json-format): each entry
# of resource_changes has its resource `type` and `change.actions`, one of ["no-op"], ["create"], ["read"],
# ["update"], ["delete", "create"] or ["create", "delete"] (a replacement, in either order), ["delete"], ["forget"].
ACTIONS = ("create", "update", "replace", "delete", "read", "forget")
REPLACE = {"create", "delete"}
# The text goes into the summary only below this, leaving the rest of GitHub's 1 MiB to the table.
PLAN_TEXT_LIMIT = 512 * 1024
PLAN_TEXT_ARTIFACT = "plan-text"  # the upload step's name: the whole text, whatever its size


def action_of(actions: list[str]) -> str:
    """One word for a change's actions: a replacement's two are "replace"."""
    return "replace" if set(actions) == REPLACE else "+".join(actions)


def counts(plan: dict) -> dict[str, Counter[str]]:
    """Per resource type, how many of its resources each action touches; no-ops left out."""
    by_type: dict[str, Counter[str]] = {}
    for change in plan.get("resource_changes", []):
        action = action_of(change["change"]["actions"])
        if action != "no-op":
            by_type.setdefault(change["type"], Counter())[action] += 1
    return by_type


def table(by_type: dict[str, Counter[str]]) -> list[str]:
    """A Markdown table: a row per resource type, a column per action that occurs, a total row."""
    totals: Counter[str] = sum(by_type.values(), Counter())
    columns = [action for action in ACTIONS if totals[action]] + sorted(set(totals) - set(ACTIONS))
    if not columns:
        return ["No changes."]
    lines = ["| resource type | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for kind in sorted(by_type):
        lines.append(f"| `{kind}` | " + " | ".join(str(by_type[kind][action]) for action in columns) + " |")
    lines.append("| **total** | " + " | ".join(f"**{totals[action]}**" for action in columns) + " |")
    return lines


def summary(plan: dict, text: str) -> str:
    """The summary: the counts, then the text when it fits, else where it is."""
    size = len(text.encode())
    lines = ["### terraform plan", "", *table(counts(plan)), ""]
    if size <= PLAN_TEXT_LIMIT:
        fence = "`" * max(3, 1 + max(map(len, re.findall("`+", text)), default=0))  # longer than any in the text
        lines += ["<details><summary>The plan</summary>", "", fence, text.rstrip("\n"), fence, "", "</details>", ""]
        lines.append(f"The same text is this run's artifact `{PLAN_TEXT_ARTIFACT}`.")
    else:
        lines.append(
            f"The plan's text ({size} bytes) is too long for this summary: read it whole in this run's artifact "
            f"`{PLAN_TEXT_ARTIFACT}` before approving."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: plan_summary.py PLAN.json PLAN.txt", file=sys.stderr)
        return 2
    plan = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    sys.stdout.write(summary(plan, Path(argv[1]).read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
