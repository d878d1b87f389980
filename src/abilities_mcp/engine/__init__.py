"""The run engine: one task per live run, each transition checked by the state machine and written to the store
before anyone is told about it.

* core.py       Engine: start, drive the steps in order, record every transition, finish
* machine.py    run and step states as transition tables, one function that applies an event or refuses it
* flow.py       which steps run: needs, `when`, always()/failure()
* scripts.py    script steps: a safe command line, and judging what it produced
* process.py    one shell command in its own process group, bounded capture, nothing left behind
* reaper.py     a watchdog that kills step process groups when the server dies
* recovery.py   runs a dead server left live become `interrupted`
* handoff.py    what an agent or skill step hands out, and the checks a hand-back must pass
* handback.py   agent steps: hand out, take back, refuse out-of-step hand-backs
* asking.py     approvals, the plan approval and decisions, answered by a person
* questions.py  the questions only a person may answer
* nesting.py    workflow steps: child runs
* control.py    wait, cancel, resume
* live.py       LiveRun: a run this process is executing
"""
