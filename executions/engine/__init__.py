"""Running a claimed step: load it, run its vertex (one module per kind), commit the outcome."""
