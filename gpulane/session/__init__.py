"""Floor 4: the one run session every kind of run goes through (sweep, nccl-tests, copy,
tokens): header, live table, progress, interrupts, error rows, summary, Parquet."""
