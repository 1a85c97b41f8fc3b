"""The years simulation (harness/years_sim.py), short: each move kind alone with the faults, then all together, on
the real handler, Google's emulator and a moved clock. Each fire time ends as one execution or a state the audit and
`runs.py missed` both report; nothing runs twice. The long run is benchmarks/years_sim.py. A failure prints its seed:
`YEARS_SIM_SEED=<seed>` replays it.
"""

import os

import pytest
import years_sim

JOBS = 4
SEED = int(os.environ.get("YEARS_SIM_SEED", "24"))
# Simulated days per kind: dst spans New York's, Europe's and Sydney's transitions; the stop job's armed runs are slow.
DAYS = {"all": 20, "dst": 17, "process_group": 3}


@pytest.mark.parametrize("kind", [*years_sim.MOVE_KINDS, "all"])
def test_every_fire_time_is_one_execution_or_a_reported_state(kind, emulator_host):
    moves = years_sim.MOVE_KINDS if kind == "all" else (kind,)
    sim = years_sim.simulate(SEED, days=DAYS.get(kind, 8), jobs=JOBS, moves=moves, stop_runs=2)
    table = sim.tally.table(SEED, DAYS.get(kind, 8), JOBS, sim.seconds)
    print(table)
    assert not sim.tally.duplicates and not sim.tally.unexplained, table
    assert sum(sim.tally.states.values()) > 0, table
