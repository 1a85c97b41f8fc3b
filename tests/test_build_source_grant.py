"""The build account reads the function's source and no other bucket (issue 26).

A gen2 build reads, of Cloud Storage, the function's code, which Cloud Functions stores in its own
gcf-v2-sources-<project number>-<region> bucket ("Build process overview",
https://cloud.google.com/functions/docs/building);
the image goes to Artifact Registry. The module's project-level storage.objectViewer for the build account carries
a condition on those buckets' names (and the bake's own upload bucket): evaluated here with cel-python on the names
Cloud Storage gives IAM Conditions (projects/_/buckets/B, .../objects/O: IAM "Resource attributes for IAM Conditions",
https://cloud.google.com/iam/docs/conditions-resource-attributes), on an offline plan of the module (the grant is
scheduled-dedup-project's, which scheduled-dedup calls).
"""

from __future__ import annotations

import celpy
import pytest
from module_plan import hcl_jobs, plan_runs

pytestmark = pytest.mark.terraform

PROJECT, SLUG = "dashboard-project", "dash"  # module_plan.PREAMBLE's


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> dict[str, dict]:
    return plan_runs(tmp_path_factory.mktemp("build"), {"default": f"    jobs = {hcl_jobs({'nightly': '0 3 * * *'})}"})[
        "default"
    ]


def reaches(expression: str, name: str) -> bool:
    environment = celpy.Environment()
    program = environment.program(environment.compile(expression))
    return bool(program.evaluate({"resource": celpy.json_to_cel({"name": name})}))


def test_the_build_reads_the_function_sources_only(plan):
    grant = plan['module.project[0].google_project_iam_member.build["roles/storage.objectViewer"]']
    (condition,) = grant["condition"]
    sources = "projects/_/buckets/gcf-v2-sources-123456789-europe-west1"
    own = f"projects/_/buckets/{PROJECT}-{SLUG}-src"
    verdicts = {
        name: reaches(condition["expression"], name)
        for name in (
            sources,
            f"{sources}/objects/dash/function-source.zip",
            own,
            f"{own}/objects/dash/function-source-abc.zip",
            "projects/_/buckets/another-team-data",
            "projects/_/buckets/another-team-data/objects/export.csv",
            f"{own}-copy",  # a bucket whose name starts with the bake's
            "projects/_/buckets/tf-state/objects/other-bake/default.tfstate",
        )
    }
    assert verdicts == {
        sources: True,
        f"{sources}/objects/dash/function-source.zip": True,
        own: True,
        f"{own}/objects/dash/function-source-abc.zip": True,
        "projects/_/buckets/another-team-data": False,
        "projects/_/buckets/another-team-data/objects/export.csv": False,
        f"{own}-copy": False,
        "projects/_/buckets/tf-state/objects/other-bake/default.tfstate": False,
    }


def test_the_build_writes_logs_anywhere_as_the_page_says(plan):
    """logging.logWriter has no resource to narrow it to (log entries are written to the project)."""
    assert plan['module.project[0].google_project_iam_member.build["roles/logging.logWriter"]'].get("condition") in (
        None,
        [],
    )
