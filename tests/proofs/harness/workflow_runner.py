{%- if cookiecutter.target == "workflow" -%}
"""Runs workflow/workflow.yaml's steps in the test's process: the subset of the Workflows language the sample uses
(assign, switch, call, try/except, raise, return, next, nested steps; `${...}` expressions), its Firestore connector
calls against the emulator's REST API, its Workflows executions connector against the bake's fake of the API
(tests/test_proxy.py), sys.log into `logged`, sys.sleep into a hook. A test cancels an execution before a step
(`cancel_before`), as Workflows does: nothing of the workflow runs after it, no handler either; makes a step's call
fail (`fail_at`); or holds it before a step (`before`).

The connectors' documented shapes: arguments with dots (currentDocument.updateTime) are nested maps, the REST API's
query parameters; an HTTP error is raised as a map with `code` (the HTTP status), `message` and `body`
(cloud.google.com/workflows/docs/reference/googleapis/firestore/v1/projects.databases.documents/patch: "HttpError
If the response status is >= 400").
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import types
from collections.abc import Callable
from pathlib import Path

import grpc
import yaml
from google.api_core import exceptions as api_exceptions
from google.cloud.firestore_v1.services.firestore import FirestoreClient
from google.cloud.firestore_v1.services.firestore.transports import FirestoreGrpcTransport
from google.cloud.firestore_v1.types import Document, Precondition
from google.cloud.workflows import executions_v1
from google.protobuf import timestamp_pb2

WORKFLOW = Path(__file__).resolve().parents[2] / "workflow" / "workflow.yaml"
FIRESTORE = "googleapis.firestore.v1.projects.databases.documents."
EXECUTIONS = "googleapis.workflowexecutions.v1.projects.locations.workflows.executions."


class Raised(Exception):
    """A workflow error (a map, as `except: as:` sees it) that no handler caught: the execution failed."""

    def __init__(self, error: object) -> None:
        super().__init__(error)
        self.error = error


class Cancelled(Exception):
    """The test cancelled the execution."""


class Map(dict):
    """A Workflows map: `a.b` reads a key."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise Raised({"message": f"KeyError: key not found: {name}", "tags": ["KeyError"]}) from None


def as_map(value):
    if isinstance(value, dict):
        return Map({key: as_map(item) for key, item in value.items()})
    if isinstance(value, list):
        return [as_map(item) for item in value]
    return value


def map_get(value, keys):
    for key in keys if isinstance(keys, list) else [keys]:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


class Run:
    """One execution of the workflow: `name` its full resource name, `env` its user_env_vars."""

    def __init__(
        self,
        name: str,
        argument: dict,
        env: dict[str, str],
        emulator: str,
        api_client,
        sleep: Callable[[float], None] = lambda seconds: None,
        cancel_before: str | None = None,
        fail_at: str | None = None,
        before: Callable[[str], None] = lambda step: None,
    ) -> None:
        project, location, workflow, execution = re.fullmatch(
            r"projects/([^/]+)/locations/([^/]+)/workflows/([^/]+)/executions/([^/]+)", name
        ).groups()
        self.env = {
            "GOOGLE_CLOUD_PROJECT_ID": project,
            "GOOGLE_CLOUD_LOCATION": location,
            "GOOGLE_CLOUD_WORKFLOW_ID": workflow,
            "GOOGLE_CLOUD_WORKFLOW_EXECUTION_ID": execution,
            **env,
        }
        self.argument, self.emulator, self.api_client = argument, emulator, api_client
        self.sleep, self.cancel_before, self.fail_at, self.before = sleep, cancel_before, fail_at, before
        self.current = None
        self.logged: list[dict] = []
        self.variables: dict = {}
        self.steps_run: list[str] = []

    # Expressions --------------------------------------------------------------------------------

    def evaluate(self, value):
        if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
            return as_map(eval(value[2:-1], {"__builtins__": {}}, self.namespace()))  # noqa: S307 - the sample's own
        if isinstance(value, dict):
            return Map({key: self.evaluate(item) for key, item in value.items()})
        if isinstance(value, list):
            return [self.evaluate(item) for item in value]
        return value

    def namespace(self) -> dict:
        env = self.env
        now = dt.datetime.now(dt.UTC).timestamp()
        return {
            **self.variables,
            "true": True,
            "false": False,
            "null": None,
            "int": int,
            "len": len,
            "sys": types.SimpleNamespace(get_env=lambda name, default=None: env.get(name, default), now=lambda: now),
            "time": types.SimpleNamespace(
                format=lambda seconds: dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat().replace("+00:00", "Z")
            ),
            "text": types.SimpleNamespace(match_regex=lambda value, pattern: re.search(pattern, value) is not None),
            "json": types.SimpleNamespace(encode_to_string=json.dumps),
            "map": types.SimpleNamespace(get=map_get),
        }

    # Steps ----------------------------------------------------------------------------------------

    def __call__(self):
        definition = yaml.safe_load(WORKFLOW.read_text())["main"]
        (param,) = definition["params"]
        self.variables[param] = as_map(self.argument)
        outcome = self.steps(definition["steps"])
        return outcome[1] if outcome else None

    def steps(self, steps: list[dict]):
        """Runs a list of steps; returns ("return", value), ("next", name) for a jump out of it, or None."""
        names = [next(iter(step)) for step in steps]
        index = 0
        while index < len(steps):
            name, body = next(iter(steps[index].items()))
            if name == self.cancel_before:
                raise Cancelled(name)
            self.before(name)
            self.steps_run.append(name)
            self.current = name
            outcome = self.step(body)
            if outcome and outcome[0] == "next":
                if outcome[1] == "end":
                    return None
                if outcome[1] not in names:
                    return outcome
                index = names.index(outcome[1])
                continue
            if outcome:
                return outcome
            index += 1
        return None

    def step(self, body: dict):
        if "try" in body:
            try:
                outcome = self.step(body["try"])
            except Raised as raised:
                handler = body["except"]
                self.variables[handler["as"]] = as_map(raised.error)
                outcome = self.steps(handler["steps"])
            if outcome:
                return outcome
        elif "assign" in body:
            for line in body["assign"]:
                for key, value in line.items():
                    self.variables[key] = self.evaluate(value)
        elif "switch" in body:
            for branch in body["switch"]:
                if self.evaluate(branch["condition"]):
                    if "raise" in branch:
                        raise Raised(self.evaluate(branch["raise"]))
                    if "steps" in branch:
                        outcome = self.steps(branch["steps"])
                        if outcome:
                            return outcome
                    return ("next", branch["next"]) if "next" in branch else None
        elif "raise" in body:
            raise Raised(self.evaluate(body["raise"]))
        elif "return" in body:
            return ("return", self.evaluate(body["return"]))
        elif "call" in body:
            result = self.call(body["call"], self.evaluate(body.get("args", {})))
            if "result" in body:
                self.variables[body["result"]] = as_map(result)
        elif "steps" in body:
            outcome = self.steps(body["steps"])
            if outcome:
                return outcome
        return ("next", body["next"]) if "next" in body else None

    # Calls ------------------------------------------------------------------------------------------

    def call(self, function: str, args: dict):
        if self.current == self.fail_at:
            raise Raised({"message": f"injected: {function} failed", "tags": ["ConnectionError"]})
        if function == "sys.log":
            self.logged.append(dict(args))
            return None
        if function == "sys.sleep":
            self.sleep(args["seconds"])
            return None
        if function.startswith(FIRESTORE):
            return self.firestore(function.removeprefix(FIRESTORE), dict(args))
        if function == EXECUTIONS + "get":
            return self.execution(args["name"])
        raise AssertionError(f"the runner has no {function}")

    def firestore(self, method: str, args: dict):
        """The connector's REST call, made as the same gRPC request (the emulator's REST API ignores preconditions
        given as query parameters: it reads currentDocument.updateTime as 0); its gRPC error as the connector's
        HttpError, whose `code` is the REST mapping of the status and whose body names the status."""
        body = args.pop("body", None)
        document = Document.from_json(json.dumps(body)) if body is not None else None
        query = dict(flatten(args))
        precondition = {}
        if "currentDocument.updateTime" in query:
            update_time = timestamp_pb2.Timestamp()
            update_time.FromJsonString(query.pop("currentDocument.updateTime"))
            precondition = {"current_document": Precondition(update_time=update_time)}
        try:
            if method == "createDocument":
                found = self.firestore_client.create_document(
                    request={
                        "parent": query["parent"],
                        "collection_id": query["collectionId"],
                        "document_id": query["documentId"],
                        "document": document,
                    }
                )
            elif method == "get":
                found = self.firestore_client.get_document(request={"name": query["name"]})
            elif method == "patch":
                document.name = query["name"]
                mask = {"field_paths": query["updateMask.fieldPaths"]}
                request = {"document": document, "update_mask": mask, **precondition}
                found = self.firestore_client.update_document(request=request)
            else:
                self.firestore_client.delete_document(request={"name": query["name"]})
                return {}
        except api_exceptions.GoogleAPIError as error:
            status = error.grpc_status_code.name
            body = {"error": {"code": error.code, "message": error.message, "status": status}}
            raise Raised({"code": error.code, "message": error.message, "body": body, "tags": ["HttpError"]}) from None
        return json.loads(Document.to_json(found))

    @functools.cached_property
    def firestore_client(self):
        channel = grpc.intercept_channel(grpc.insecure_channel(self.emulator), Owner())
        return FirestoreClient(transport=FirestoreGrpcTransport(channel=channel))

    def execution(self, name: str):
        try:
            found = self.api_client.get_execution(name=name)
        except api_exceptions.GoogleAPIError as error:
            raise Raised({"code": error.code, "message": str(error), "tags": ["HttpError"]}) from None
        return {"name": found.name, "state": executions_v1.Execution.State(found.state).name}


class Owner(grpc.UnaryUnaryClientInterceptor):
    """The emulator's admin credentials ("Bearer owner"): its security rules do not apply."""

    def intercept_unary_unary(self, continuation, details, request):
        metadata = [*(details.metadata or []), ("authorization", "Bearer owner")]
        return continuation(details._replace(metadata=metadata), request)


def flatten(args: dict, prefix: str = ""):
    """Nested connector arguments as the REST API's dotted query parameters (updateMask.fieldPaths=a&...)."""
    for key, value in args.items():
        if isinstance(value, dict):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
{%- endif %}
