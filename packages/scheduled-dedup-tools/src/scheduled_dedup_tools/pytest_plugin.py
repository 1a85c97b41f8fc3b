"""The bake's tests' emulator: a pytest plugin (this package's pytest11 entry point), so a baked conftest.py holds only
the fixtures of its own protocol. A conftest.py fixture of the same name overrides it."""

import pytest

from scheduled_dedup_tools.firestore_emulator import EmulatorNotFound, running_emulator


@pytest.fixture(scope="session")
def emulator_host():
    """FIRESTORE_EMULATOR_HOST if set, else one emulator started for the whole session."""
    try:
        with running_emulator() as host:
            yield host
    except EmulatorNotFound as error:
        pytest.fail(str(error), pytrace=False)
