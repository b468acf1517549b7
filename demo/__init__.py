"""The demo and fault injection: ``demo.*`` TASK handlers (one SIGKILLs its worker), the demo
ledger (a destination served by this app, with its tables and switch) and the workflows
``make run`` starts. Installed only with ``SB_DEMO=1`` (``make run``, the tests, the
benchmarks and ``make chaos``); production settings never load it."""
