"""The work, one item at a time, as a list of stages: your room.

Each stage takes the previous stage's artifact (the input item for the first) and returns its own,
which must be storable in Firestore (dicts, lists, strings, numbers). A stage may run again for the
same item after a crash, so it must not change anything outside its return value; the job saves
each artifact, checkpoints it, and commits the last one as the item's single output.
Raise TerminalItemError when the item itself is bad (retrying cannot help); any other exception
makes Cloud Run retry the task, which resumes after the last checkpointed stage.
"""

from __future__ import annotations

from collections.abc import Callable


class TerminalItemError(Exception):
    """The item cannot be processed as it is: it is marked failed and dead-lettered, never retried."""


def parse(item: dict) -> dict:
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise TerminalItemError(f"item {item['id']}: text={text!r}: must be a non-empty string")
    return {"id": item["id"], "words": text.split()}


def transform(parsed: dict) -> dict:
    return {"id": parsed["id"], "words": [word.lower().strip(".,;:!?") for word in parsed["words"]]}


def render(transformed: dict) -> dict:
    words = transformed["words"]
    return {"id": transformed["id"], "word_count": len(words), "longest": max(words, key=len)}


STAGES: list[tuple[str, Callable[[dict], dict]]] = [("parse", parse), ("transform", transform), ("render", render)]
