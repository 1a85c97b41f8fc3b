"""A Firestore that fails on purpose: a gRPC server in front of the emulator, for the store-error tests.

Point FIRESTORE_EMULATOR_HOST at `FaultyFirestore.host` and every call passes through to the emulator
(raw bytes: no protos are parsed), except the ones a test chose. `fail(method, code, after=n)` lets n
calls of that method through, then answers every later one with the status code, as a real Firestore
answers NOT_FOUND for a missing database or UNAVAILABLE in an outage. `hold(method, seconds, after=n)`
delays the call after those n by `seconds`, then passes it on. The client (google-cloud-firestore)
sends a create, an update and a delete as `Commit`, reads a document with `BatchGetDocuments` and
runs a query (a proxy target's started runs, ledger.RunLedger.started_runs) with `RunQuery` (both server
streaming); other methods are answered UNIMPLEMENTED, so a client that started using one would show
up as a failing test.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Iterator

import grpc

SERVICE = "google.firestore.v1.Firestore"
COMMIT = f"/{SERVICE}/Commit"
BATCH_GET_DOCUMENTS = f"/{SERVICE}/BatchGetDocuments"
RUN_QUERY = f"/{SERVICE}/RunQuery"
UNARY_METHODS = {COMMIT}
STREAMING_METHODS = {BATCH_GET_DOCUMENTS, RUN_QUERY}


@dataclasses.dataclass(frozen=True)
class Fault:
    method: str
    after: int  # calls of `method` passed through before the fault applies
    code: grpc.StatusCode | None = None  # answer every later call with this code, or else:
    delay: float = 0.0  # hold the next call this long, then pass it on


class FaultyFirestore(grpc.GenericRpcHandler):
    def __init__(self, upstream_host: str) -> None:
        self._upstream = grpc.insecure_channel(upstream_host)
        self._lock = threading.Lock()
        self._fault: Fault | None = None
        self._calls: collections.Counter[str] = collections.Counter()
        self.failed: list[tuple[str, grpc.StatusCode]] = []  # every call answered with a fault's code
        self._server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers([self])
        self.host = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    def start(self) -> FaultyFirestore:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None)
        self._upstream.close()

    def fail(self, method: str, code: grpc.StatusCode, after: int = 0) -> None:
        self._arm(Fault(method, after, code=code))

    def hold(self, method: str, seconds: float, after: int = 0) -> None:
        self._arm(Fault(method, after, delay=seconds))

    def clear(self) -> None:
        self._arm(None)

    def _arm(self, fault: Fault | None) -> None:
        with self._lock:
            self._fault, self._calls, self.failed = fault, collections.Counter(), []

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if method in UNARY_METHODS:
            return grpc.unary_unary_rpc_method_handler(self._passing_on(method, self._upstream.unary_unary(method)))
        if method in STREAMING_METHODS:
            return grpc.unary_stream_rpc_method_handler(self._streaming_on(method, self._upstream.unary_stream(method)))
        return None  # UNIMPLEMENTED

    def _passing_on(self, method: str, upstream: grpc.UnaryUnaryMultiCallable):
        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            self._apply_fault(method, context)
            try:
                return upstream(request, timeout=context.time_remaining(), metadata=_forwardable(context))
            except grpc.RpcError as error:  # the emulator's own answer (ALREADY_EXISTS, FAILED_PRECONDITION...)
                context.abort(error.code(), error.details())

        return answer

    def _streaming_on(self, method: str, upstream: grpc.UnaryStreamMultiCallable):
        def answer(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            self._apply_fault(method, context)
            try:
                yield from upstream(request, timeout=context.time_remaining(), metadata=_forwardable(context))
            except grpc.RpcError as error:
                context.abort(error.code(), error.details())

        return answer

    def _apply_fault(self, method: str, context: grpc.ServicerContext) -> None:
        """Counts the call; if the armed fault applies to it, waits its delay and answers its code."""
        with self._lock:
            self._calls[method] += 1
            fault = self._fault
            applies = fault is not None and fault.method == method and self._calls[method] > fault.after
            if applies and fault.code is None:
                applies = self._calls[method] == fault.after + 1
            if applies and fault.code is not None:
                self.failed.append((method, fault.code))
        if applies:
            time.sleep(fault.delay)
            if fault.code is not None:
                context.abort(fault.code, f"fake Firestore: {fault.code.name} on purpose")


def _forwardable(context: grpc.ServicerContext) -> list[tuple[str, str]]:
    """The caller's metadata (the emulator's `authorization: Bearer owner`, routing headers), minus
    what the channel sets itself."""
    return [(key, value) for key, value in context.invocation_metadata() if key not in ("user-agent",)]
