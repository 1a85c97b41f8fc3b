"""A schema-only stand-in for a Terraform provider (protocol 6, over go-plugin).

Terraform runs this as ``terraform-provider-<name>`` (see ``build_plugins`` in
``__init__.py``).  It serves the schema stored in ``schema/<name>.json`` and accepts
every configuration that matches it, so ``terraform validate`` does the real type and
structure checks, and ``terraform test`` with ``mock_provider`` works.  It refuses
anything that would need the real cloud (plan/apply/read of a real resource) with an
error diagnostic that says to mock the provider instead.

The go-plugin handshake (TLS, stdout line, shutdown) is the one from the ``tf``
package (PyPI ``tf``), whose ``run_provider`` is reused with this servicer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tf.gen import tfplugin_pb2 as pb
from tf.gen import tfplugin_pb2_grpc as rpc

_NESTING = {
    "single": pb.Schema.NestedBlock.NestingMode.SINGLE,
    "list": pb.Schema.NestedBlock.NestingMode.LIST,
    "set": pb.Schema.NestedBlock.NestingMode.SET,
    "map": pb.Schema.NestedBlock.NestingMode.MAP,
    "group": pb.Schema.NestedBlock.NestingMode.GROUP,
}


def _block(js: dict) -> pb.Schema.Block:
    attrs = [
        pb.Schema.Attribute(
            name=name,
            type=json.dumps(a["type"], separators=(",", ":")).encode(),
            required=a.get("required", False),
            optional=a.get("optional", False),
            computed=a.get("computed", False),
            sensitive=a.get("sensitive", False),
        )
        for name, a in js.get("attributes", {}).items()
    ]
    blocks = [
        pb.Schema.NestedBlock(
            type_name=name,
            block=_block(b["block"]),
            nesting=_NESTING[b["nesting_mode"]],
            min_items=b.get("min_items", 0),
            max_items=b.get("max_items", 0),
        )
        for name, b in js.get("block_types", {}).items()
    ]
    return pb.Schema.Block(attributes=attrs, block_types=blocks)


def _schema(js: dict) -> pb.Schema:
    return pb.Schema(version=js.get("version", 0), block=_block(js["block"]))


def schema_response(schema: dict) -> pb.GetProviderSchema.Response:
    return pb.GetProviderSchema.Response(
        provider=_schema(schema["provider"]),
        provider_meta=pb.Schema(block=pb.Schema.Block()),
        resource_schemas={k: _schema(v) for k, v in schema["resource_schemas"].items()},
        data_source_schemas={k: _schema(v) for k, v in schema["data_source_schemas"].items()},
        server_capabilities=pb.ServerCapabilities(plan_destroy=True, get_provider_schema_optional=False),
    )


def _decode(dv: pb.DynamicValue):
    if dv.msgpack:
        import msgpack

        # cty's unknown value is msgpack extension 0: any non-None value counts as "set".
        return msgpack.unpackb(dv.msgpack, strict_map_key=False, raw=False)
    if dv.json:
        return json.loads(dv.json)
    return None


def _computed_only_set(block: dict, value, path: str) -> list[str]:
    """Paths of computed-only attributes given a value in a configuration object."""
    found: list[str] = []
    if not isinstance(value, dict):
        return found
    for name, a in block.get("attributes", {}).items():
        if a.get("computed") and not a.get("optional") and value.get(name) is not None:
            found.append(f"{path}{name}")
    for name, b in block.get("block_types", {}).items():
        v = value.get(name)
        items = (
            v
            if isinstance(v, list)
            else list(v.values())
            if isinstance(v, dict) and b["nesting_mode"] == "map"
            else [v]
        )
        for item in items:
            found += _computed_only_set(b["block"], item, f"{path}{name}.")
    return found


def _validate(schema: dict | None, config: pb.DynamicValue) -> list:
    """What the real providers' SDK rejects and core leaves to them: setting computed-only attributes."""
    if schema is None:
        return []
    return [
        _error(
            "Value for unconfigurable attribute",
            f'Can\'t configure a value for "{p}": its value will be decided automatically '
            "based on the result of applying this configuration.",
        )[0]
        for p in _computed_only_set(schema["block"], _decode(config), "")
    ]


def _error(summary: str, detail: str = "") -> list:
    return [pb.Diagnostic(severity=pb.Diagnostic.Severity.ERROR, summary=summary, detail=detail)]


_NEEDS_MOCK = (
    "This is the offline stand-in for provider {name} (tests/terraform_offline): it only "
    'knows the schema. Use `mock_provider "{name}" {{}}` (or override_resource / '
    "override_data) in the .tftest.hcl file."
)


class StandinServicer(rpc.ProviderServicer):
    def __init__(self, name: str, schema: dict):
        self.name = name
        self.schema = schema
        self._resp = schema_response(schema)

    def GetMetadata(self, request, context):
        return pb.GetMetadata.Response(
            server_capabilities=self._resp.server_capabilities,
            resources=[pb.GetMetadata.ResourceMetadata(type_name=t) for t in self.schema["resource_schemas"]],
            data_sources=[pb.GetMetadata.DataSourceMetadata(type_name=t) for t in self.schema["data_source_schemas"]],
        )

    def GetProviderSchema(self, request, context):
        return self._resp

    def ValidateProviderConfig(self, request, context):
        return pb.ValidateProviderConfig.Response()

    def ValidateResourceConfig(self, request, context):
        schema = self.schema["resource_schemas"].get(request.type_name)
        return pb.ValidateResourceConfig.Response(diagnostics=_validate(schema, request.config))

    def ValidateDataResourceConfig(self, request, context):
        schema = self.schema["data_source_schemas"].get(request.type_name)
        return pb.ValidateDataResourceConfig.Response(diagnostics=_validate(schema, request.config))

    def ConfigureProvider(self, request, context):
        return pb.ConfigureProvider.Response()

    def UpgradeResourceState(self, request, context):
        # States come from mocks, written with the current schema: pass them through.
        return pb.UpgradeResourceState.Response(upgraded_state=pb.DynamicValue(json=request.raw_state.json or b"null"))

    def _unsupported(self, resp_cls, what: str):
        return resp_cls(diagnostics=_error(f"{what} is not supported offline", _NEEDS_MOCK.format(name=self.name)))

    def ReadResource(self, request, context):
        return self._unsupported(pb.ReadResource.Response, f"Reading {request.type_name}")

    def PlanResourceChange(self, request, context):
        return self._unsupported(pb.PlanResourceChange.Response, f"Planning {request.type_name}")

    def ApplyResourceChange(self, request, context):
        return self._unsupported(pb.ApplyResourceChange.Response, f"Applying {request.type_name}")

    def ImportResourceState(self, request, context):
        return self._unsupported(pb.ImportResourceState.Response, f"Importing {request.type_name}")

    def ReadDataSource(self, request, context):
        return self._unsupported(pb.ReadDataSource.Response, f"Reading data.{request.type_name}")

    def GetFunctions(self, request, context):
        return pb.GetFunctions.Response()

    def StopProvider(self, request, context):
        return pb.StopProvider.Response()


def main(name: str, schema_path: str) -> None:
    import tf.provider
    import tf.runner

    schema = json.loads(Path(schema_path).read_text())
    servicer = StandinServicer(name, schema)
    # tf.runner.run_provider builds `tf.provider.ProviderServicer(provider)`; hand it ours.
    tf.provider.ProviderServicer = lambda _provider: servicer
    tf.runner.run_provider(None, [sys.argv[0]])  # type: ignore[arg-type]


if __name__ == "__main__":  # python standin.py NAME SCHEMA.json
    main(sys.argv[1], sys.argv[2])
