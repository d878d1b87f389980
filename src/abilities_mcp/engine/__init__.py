"""The run engine: one task per live run, each transition checked by the state machine and written to the store
before anyone is told about it.

* core.py      Engine: start, drive the steps, finish, record
* handback.py  agent steps: hand out, take back, refuse out-of-step hand-backs
* control.py   wait, cancel, resume
* live.py      LiveRun: a run this process is executing
"""

from .core import Engine
from .live import AWAITING_STATES, LiveRun

__all__ = ["AWAITING_STATES", "Engine", "LiveRun"]
