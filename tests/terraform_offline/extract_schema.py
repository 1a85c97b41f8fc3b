"""Regenerate ``schema/*.json``: the provider schemas the stand-in providers serve.

hashicorp/google and hashicorp/archive cannot be downloaded here, but their schemas
ship inside the PyPI packages ``cdktn-provider-google`` / ``cdktn-provider-archive``
(CDK Terrain bindings generated from ``terraform providers schema -json``).  Each wheel
holds ``_jsii/*.jsii.tgz``; its ``package/.jsii`` is the jsii type metadata and its
``package/lib/<resource>/index.js`` the generated code, whose inline source map carries
the generated TypeScript.  That TypeScript is regular, generated text that records, per
attribute, everything ``terraform validate`` needs:

* ``// attempt_deadline - computed: false, optional: true, required: false`` before
  every getter (flags, Terraform name);
* ``synthesizeHclAttributes`` / ``<struct>ToHclTerraform`` give each configurable
  name ``isBlock``, ``type`` (simple/list/set/map/struct) and ``storageClassType``
  (string, stringList, numberMap, <Struct>List, ...);
* the config interfaces say whether a block is one struct (``max_items = 1``) or an
  array, and the ``Docs at Terraform Registry`` anchor gives each property's
  Terraform name;
* computed-only attributes have only a getter (``getStringAttribute``,
  ``new XList(this, "conditions", wrapsSet)``, ``new cdktn.StringMap(...)`` ...).

An unknown name in ``GOOGLE_RESOURCES`` or a construct the parser does not
understand fails loudly (``ExtractError``) rather than producing a wrong schema.

Usage (downloads the two wheels with pip into a temporary directory)::

    python tests/terraform_offline/extract_schema.py            # rewrite schema/*.json
    python tests/terraform_offline/extract_schema.py --check    # exit 1 if they would change

To support another resource, add its Terraform type to ``GOOGLE_RESOURCES`` /
``GOOGLE_DATA_SOURCES`` (or the archive lists) and rerun.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA_DIR = HERE / "schema"

# Pinned wheels.  cdktn-provider-google 21.1.0 == hashicorp/google 8.7.0,
# cdktn-provider-archive 14.0.1 == hashicorp/archive 2.8.1,
# cdktn-provider-time 14.0.2 == hashicorp/time 0.14.2, cdktn-provider-http 13.0.2 ==
# hashicorp/http 3.6.2 (their package READMEs say so).
GOOGLE_WHEEL = "cdktn-provider-google==21.1.0"
ARCHIVE_WHEEL = "cdktn-provider-archive==14.0.1"
TIME_WHEEL = "cdktn-provider-time==14.0.2"
HTTP_WHEEL = "cdktn-provider-http==13.0.2"

# ---------------------------------------------------------------------------
# The schema subset.  Extend these lists and rerun the script.
# ---------------------------------------------------------------------------
GOOGLE_RESOURCES: tuple[str, ...] = (
    # A team bake's project, which its bootstrap creates (terraform/bootstrap: one project per bake).
    "google_project",
    "google_project_service",
    "google_artifact_registry_repository",
    "google_artifact_registry_repository_iam_member",
    "google_firestore_database",
    "google_firestore_field",
    "google_firestore_index",
    "google_service_account",
    "google_service_account_iam_member",
    # The baked bootstrap root (terraform/bootstrap): GitHub Actions' Workload Identity Federation.
    "google_iam_workload_identity_pool",
    "google_iam_workload_identity_pool_provider",
    "google_project_iam_member",
    "google_project_iam_custom_role",
    # Cloud Tasks' Data Access audit logs: who queued a re-run (the module's tasks.tf, the bootstrap root).
    "google_project_iam_audit_config",
    "google_cloud_run_service_iam_member",
    "google_cloud_run_v2_service",
    "google_cloud_run_v2_service_iam_member",
    "google_cloud_run_v2_job",
    "google_cloud_run_v2_job_iam_member",
    "google_cloudfunctions2_function",
    "google_cloudfunctions2_function_iam_member",
    "google_storage_bucket",
    "google_storage_bucket_object",
    "google_storage_bucket_iam_member",
    "google_cloud_scheduler_job",
    # Manual runs, backfill and catch-up (the module's tasks.tf): a Cloud Tasks queue and who may enqueue.
    "google_cloud_tasks_queue",
    "google_cloud_tasks_queue_iam_member",
    "google_workflows_workflow",
    "google_logging_metric",
    "google_monitoring_alert_policy",
    "google_monitoring_dashboard",
    "google_monitoring_notification_channel",
    "google_pubsub_topic",
    "google_secret_manager_secret",
    "google_secret_manager_secret_iam_member",
)
GOOGLE_DATA_SOURCES: tuple[str, ...] = (
    "google_project",
    "google_client_config",
    "google_service_account",
    "google_storage_bucket",
)
ARCHIVE_RESOURCES: tuple[str, ...] = ()
ARCHIVE_DATA_SOURCES: tuple[str, ...] = ("archive_file",)
# time_sleep: the module's waits for eventual consistency (APIs, IAM grants, new log-based metrics).
# time_static: the instants that bracket an apply's schedule changes (history.tf).
TIME_RESOURCES: tuple[str, ...] = ("time_sleep", "time_static")
TIME_DATA_SOURCES: tuple[str, ...] = ()
# data "http": reads an existing Firestore database at plan (the google provider has no data source for it).
HTTP_RESOURCES: tuple[str, ...] = ()
HTTP_DATA_SOURCES: tuple[str, ...] = ("http",)

# cdktn's generated code does not record `sensitive`; these are marked by hand so
# that Terraform demands `sensitive = true` on outputs that expose them, as it would
# with the real provider.  {provider: {"provider" | "resource.<type>" | "data.<type>": names}}
SENSITIVE: dict[str, dict[str, tuple[str, ...]]] = {
    "google": {
        "provider": ("access_token", "credentials"),
        "data.google_client_config": ("access_token",),
    },
}

PROVIDERS = {
    # name: (wheel, pip package dir, version, resources, data sources)
    "google": (GOOGLE_WHEEL, "cdktn_provider_google", "8.7.0", GOOGLE_RESOURCES, GOOGLE_DATA_SOURCES),
    "archive": (ARCHIVE_WHEEL, "cdktn_provider_archive", "2.8.1", ARCHIVE_RESOURCES, ARCHIVE_DATA_SOURCES),
    "time": (TIME_WHEEL, "cdktn_provider_time", "0.14.2", TIME_RESOURCES, TIME_DATA_SOURCES),
    "http": (HTTP_WHEEL, "cdktn_provider_http", "3.6.2", HTTP_RESOURCES, HTTP_DATA_SOURCES),
}


class ExtractError(RuntimeError):
    pass


# ---------------------------------------------------------------------------
# Parsing the generated TypeScript
# ---------------------------------------------------------------------------
_SECTION_RE = re.compile(
    r"\n  // ([a-z0-9_]+) - computed: (true|false), optional: (true|false), required: (true|false)\n"
)
_HCL_ENTRY_RE = re.compile(
    r"\n\s+([a-z0-9_]+): \{\n\s+value: [^\n]*\n\s+isBlock: (true|false),\n"
    r"\s+type: \"(\w+)\",\n\s+storageClassType: \"(\w+)\","
)
_IFACE_RE = re.compile(r"^export interface (\w+)(?: extends [^{]*)? \{\n(.*?)\n\}$", re.S | re.M)
_IFACE_PROP_RE = re.compile(r"(?:/\*\*(.*?)\*/\s*)?readonly (\w+)(\?)?: ([^;]+);", re.S)
_HCL_FN_RE = re.compile(r"^export function \w+ToHclTerraform\(struct\?: ([^)]*)\): any \{\n(.*?)\n\}$", re.S | re.M)
_CLASS_RE = re.compile(r"^export class (\w+) extends ([\w.]+) \{\n(.*?)\n\}$", re.S | re.M)


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class TsModule:
    """One generated ``index.ts`` (one resource / data source / provider)."""

    def __init__(self, src: str):
        self.src = src
        self.interfaces: dict[str, dict[str, tuple[str, bool]]] = {}
        for m in _IFACE_RE.finditer(src):
            props: dict[str, tuple[str, bool]] = {}
            for pm in _IFACE_PROP_RE.finditer(m.group(2)):
                doc, camel, opt, ts_type = pm.groups()
                anchor = re.search(r"#([a-z0-9_]+) ", doc or "")
                tf_name = anchor.group(1) if anchor else _camel_to_snake(camel)
                props[tf_name] = (ts_type.strip(), not opt)
            self.interfaces[m.group(1)] = props
        self.hcl_fns: dict[str, dict[str, tuple[bool, str, str]]] = {}
        for m in _HCL_FN_RE.finditer(src):
            entries = self._hcl_entries(m.group(2))
            for t in m.group(1).split("|"):
                t = t.strip()
                if t and not t.endswith("OutputReference") and not t.startswith("cdktn."):
                    self.hcl_fns[t] = entries
        self.classes: dict[str, tuple[str, str]] = {
            m.group(1): (m.group(2), m.group(3)) for m in _CLASS_RE.finditer(src)
        }
        self.main = None
        for name, (base, _body) in self.classes.items():
            if base in ("cdktn.TerraformResource", "cdktn.TerraformDataSource", "cdktn.TerraformProvider"):
                self.main = name
        if self.main is None:
            raise ExtractError("no resource/data source/provider class found")
        body = self.classes[self.main][1]
        tm = re.search(r'tfResourceType = "([a-z0-9_]+)"', body)
        self.tf_type = tm.group(1) if tm else None
        synth = body.split("synthesizeHclAttributes()", 1)
        if len(synth) != 2:
            raise ExtractError(f"{self.main}: no synthesizeHclAttributes")
        self.main_hcl = self._hcl_entries(synth[1])

    @staticmethod
    def _hcl_entries(text: str) -> dict[str, tuple[bool, str, str]]:
        return {m.group(1): (m.group(2) == "true", m.group(3), m.group(4)) for m in _HCL_ENTRY_RE.finditer(text)}

    def sections(self, class_name: str) -> list[tuple[str, bool, bool, bool, str]]:
        body = self.classes[class_name][1]
        parts = _SECTION_RE.split(body)
        out = []
        for i in range(1, len(parts), 5):
            name, c, o, r, text = parts[i : i + 5]
            out.append((name, c == "true", o == "true", r == "true", text))
        return out

    # -- schema building -----------------------------------------------------
    def main_block(self) -> dict:
        iface = self.interfaces.get(self.main + "Config", {})
        sections = self.sections(self.main)
        hcl = self.main_hcl
        if self.classes[self.main][0] == "cdktn.TerraformProvider":
            # cdktn models the `alias` meta-argument as a provider attribute; Terraform does not.
            sections = [s for s in sections if s[0] != "alias"]
            hcl = {k: v for k, v in hcl.items() if k != "alias"}
        return self._block(sections, hcl, iface, self.main)

    def _struct_block(self, struct: str, where: str) -> dict:
        if struct not in self.hcl_fns:
            raise ExtractError(f"{where}: no ToHclTerraform function for struct {struct}")
        hcl = self.hcl_fns[struct]
        iface = self.interfaces.get(struct, {})
        ref = struct + "OutputReference"
        if ref in self.classes:
            sections = self.sections(ref)
        else:  # provider blocks have no output references: every field is an input
            sections = [(n, False, not req, req, "") for n, (_t, req) in iface.items()]
        return self._block(sections, hcl, iface, f"{where}.{struct}")

    def _block(self, sections, hcl, iface, where) -> dict:
        attributes: dict[str, dict] = {}
        block_types: dict[str, dict] = {}
        seen = set()
        for name, computed, optional, required, text in sections:
            seen.add(name)
            if name in hcl:
                is_block, kind, storage = hcl[name]
                if is_block:
                    if kind == "struct":
                        mode, struct = "single", storage
                    elif kind in ("list", "set") and storage.endswith("List"):
                        mode, struct = kind, storage[: -len("List")]
                    else:
                        raise ExtractError(f"{where}.{name}: unknown block kind {kind}/{storage}")
                    bt: dict = {"nesting_mode": mode, "block": self._struct_block(struct, f"{where}.{name}")}
                    ts_type = iface.get(name, ("", False))[0]
                    if mode != "single" and "[]" not in ts_type:
                        bt["max_items"] = 1
                    if required and mode != "single":
                        bt["min_items"] = 1
                    if computed and not optional and not required:
                        raise ExtractError(f"{where}.{name}: computed-only block")
                    block_types[name] = bt
                    continue
                typ = self._input_type(kind, storage, f"{where}.{name}")
            else:
                typ = self._computed_type(text, f"{where}.{name}")
                if not computed:
                    # cdktn emits a getter for every attribute; a non-computed one missing
                    # from synthesize means we mis-parsed.
                    raise ExtractError(f"{where}.{name}: not configurable but not computed")
            attr: dict = {"type": typ}
            if required:
                attr["required"] = True
            if optional:
                attr["optional"] = True
            if computed:
                attr["computed"] = True
            attributes[name] = attr
        missing = set(hcl) - seen
        if missing:
            raise ExtractError(f"{where}: configurable names without a getter: {sorted(missing)}")
        out: dict = {}
        if attributes:
            out["attributes"] = dict(sorted(attributes.items()))
        if block_types:
            out["block_types"] = dict(sorted(block_types.items()))
        return out

    @staticmethod
    def _input_type(kind: str, storage: str, where: str):
        prim = {"string": "string", "number": "number", "boolean": "bool"}
        if kind == "simple" and storage in prim:
            return prim[storage]
        if kind in ("list", "set"):
            for p, t in prim.items():
                if storage == p + "List":
                    return [kind, t]
        if kind == "map":
            for p, t in prim.items():
                if storage == p + "Map":
                    return ["map", t]
            if storage == "anyMap":
                return ["map", "dynamic"]
        raise ExtractError(f"{where}: unsupported configurable attribute type {kind}/{storage}")

    def _computed_type(self, text: str, where: str):
        getters = [
            ("cdktn.Fn.tolist(this.getListAttribute(", ["set", "string"]),
            ("cdktn.Fn.tolist(this.getNumberListAttribute(", ["set", "number"]),
            ("this.getStringAttribute(", "string"),
            ("this.getNumberAttribute(", "number"),
            ("this.getBooleanAttribute(", "bool"),
            ("this.getListAttribute(", ["list", "string"]),
            ("this.getNumberListAttribute(", ["list", "number"]),
            ("this.getBooleanListAttribute(", ["list", "bool"]),
            ("this.getStringMapAttribute(", ["map", "string"]),
            ("this.getNumberMapAttribute(", ["map", "number"]),
            ("this.getBooleanMapAttribute(", ["map", "bool"]),
            ("this.getAnyMapAttribute(", ["map", "dynamic"]),
            ("this.interpolationForAttribute(", "dynamic"),
        ]
        for needle, typ in getters:
            if needle in text:
                return typ
        m = re.search(r"= new cdktn\.(\w+)\(this, ", text)
        if m:
            maps = {
                "StringMap": ["map", "string"],
                "NumberMap": ["map", "number"],
                "BooleanMap": ["map", "bool"],
                "AnyMap": ["map", "dynamic"],
                "StringListMap": ["map", ["list", "string"]],
                "NumberListMap": ["map", ["list", "number"]],
                "StringMapList": ["list", ["map", "string"]],
                "NumberMapList": ["list", ["map", "number"]],
                "BooleanMapList": ["list", ["map", "bool"]],
            }
            if m.group(1) in maps:
                return maps[m.group(1)]
            raise ExtractError(f"{where}: unsupported computed type cdktn.{m.group(1)}")
        m = re.search(r"= new (\w+)List\(this, \"[a-z0-9_]+\", (true|false)\)", text)
        if m:
            return ["set" if m.group(2) == "true" else "list", self._object_type(m.group(1), where)]
        m = re.search(r"= new (\w+)OutputReference\(this, \"[a-z0-9_]+\"\)", text)
        if m:  # a computed-only single nested object
            return self._object_type(m.group(1), where)
        raise ExtractError(f"{where}: cannot tell the type of a computed attribute from:\n{text[:400]}")

    def _object_type(self, struct: str, where: str):
        ref = struct + "OutputReference"
        if ref not in self.classes:
            raise ExtractError(f"{where}: no class {ref}")
        attrs = {}
        for name, _c, _o, _r, text in self.sections(ref):
            attrs[name] = self._computed_type(text, f"{where}.{name}")
        return ["object", dict(sorted(attrs.items()))]


# ---------------------------------------------------------------------------
# Wheels
# ---------------------------------------------------------------------------
def _download(spec: str, dest: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest), spec],
        check=True,
    )
    name = spec.split("==")[0].replace("-", "_")
    wheels = list(dest.glob(f"{name}-*.whl"))
    if len(wheels) != 1:
        raise ExtractError(f"expected one wheel for {spec}, found {wheels}")
    return wheels[0]


class JsiiPackage:
    """The generated ``lib/<dir>/index.js`` files of one cdktn provider wheel."""

    def __init__(self, wheel: Path, pkg_dir: str, workdir: Path):
        with zipfile.ZipFile(wheel) as zf:
            tgz = [n for n in zf.namelist() if n.startswith(f"{pkg_dir}/_jsii/") and n.endswith(".jsii.tgz")]
            if len(tgz) != 1:
                raise ExtractError(f"{wheel.name}: expected one .jsii.tgz, found {tgz}")
            zf.extract(tgz[0], workdir)
        self.tar = tarfile.open(workdir / tgz[0])  # noqa: SIM115 - read lazily, lives as long as self
        self.members = {m.name: m for m in self.tar.getmembers()}

    def module_for(self, tf_type: str, data: bool, provider_name: str) -> TsModule:
        if tf_type == "provider":
            d = "provider"
        else:
            # resources: lib/<type without the provider prefix>, data sources: lib/data-<type>
            d = "data-" + tf_type if data else tf_type.removeprefix(provider_name + "_")
            d = d.replace("_", "-")
        # jsii renames a module whose name is a reserved word: time_static's is lib/static-resource.
        if f"package/lib/{d}/index.js" not in self.members and f"package/lib/{d}-resource/index.js" in self.members:
            d += "-resource"
        path = f"package/lib/{d}/index.js"
        if path not in self.members:
            raise ExtractError(f"{provider_name}: no generated code for {'data' if data else 'resource'} {tf_type!r}")
        js = self.tar.extractfile(self.members[path]).read().decode()
        m = re.search(r"sourceMappingURL=data:application/json;base64,(\S+)", js)
        if not m:
            raise ExtractError(f"{path}: no inline source map")
        sm = json.loads(base64.b64decode(m.group(1)))
        mod = TsModule(sm["sourcesContent"][0])
        expected = provider_name if tf_type == "provider" else tf_type
        if mod.tf_type != expected:
            raise ExtractError(f"{path}: tfResourceType {mod.tf_type!r} != {expected!r}")
        return mod


def extract(provider: str, workdir: Path) -> dict:
    spec, pkg_dir, version, resources, data_sources = PROVIDERS[provider]
    wheel = _download(spec, workdir)
    pkg = JsiiPackage(wheel, pkg_dir, workdir)
    out = {
        "provider_name": provider,
        "provider_version": version,
        "source_wheel": spec,
        "provider": {"version": 0, "block": pkg.module_for("provider", False, provider).main_block()},
        "resource_schemas": {},
        "data_source_schemas": {},
    }
    for r in resources:
        out["resource_schemas"][r] = {"version": 0, "block": pkg.module_for(r, False, provider).main_block()}
    for d in data_sources:
        out["data_source_schemas"][d] = {"version": 0, "block": pkg.module_for(d, True, provider).main_block()}
    for key, names in SENSITIVE.get(provider, {}).items():
        if key == "provider":
            block = out["provider"]["block"]
        else:
            kind, _, tf_type = key.partition(".")
            table = out["resource_schemas" if kind == "resource" else "data_source_schemas"]
            if tf_type not in table:
                continue
            block = table[tf_type]["block"]
        for n in names:
            block["attributes"][n]["sensitive"] = True
    return out


def dumps(schema: dict) -> str:
    return json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only compare with the committed files")
    ap.add_argument("providers", nargs="*", default=sorted(PROVIDERS))
    args = ap.parse_args(argv)
    changed = []
    with tempfile.TemporaryDirectory(prefix="tf-schema-") as td:
        for p in args.providers:
            text = dumps(extract(p, Path(td) / p))
            target = SCHEMA_DIR / f"{p}.json"
            if not target.exists() or target.read_text() != text:
                changed.append(target.name)
                if not args.check:
                    SCHEMA_DIR.mkdir(exist_ok=True)
                    target.write_text(text)
            print(f"{p}: {len(text)} bytes -> {target.relative_to(HERE)}")
    if args.check and changed:
        print("out of date:", ", ".join(changed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
