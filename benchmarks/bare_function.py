"""The import-time baseline: a bare functions-framework function that imports google-cloud-firestore."""

import functions_framework
from google.cloud import firestore  # noqa: F401  (imported for its import cost: the point of the baseline)


@functions_framework.http
def handle(request):
    return "ok", 200
