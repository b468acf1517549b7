"""Fan-out (S1-S10): the SPAWNER's plan and batches, and the MERGE and its rule."""
