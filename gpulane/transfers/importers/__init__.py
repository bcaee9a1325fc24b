"""`gpulane parse bandwidthtest|p2p|nvbandwidth FILE...`: other copy tools' printouts as
gpulane copy rows, one module per tool (``bandwidthtest``, ``p2p``, ``nvbandwidth``) and
what they share (``common``: trusted lines, cells, rows, error rows, printing).

Each tool module follows the importer contract of :mod:`gpulane.session.imports`
(``WHAT``, ``OPTIONS``, ``stream_rows``, ``render``) and keeps a pure function from text to
rows (``parse_bandwidthtest``, ``parse_p2p``, ``parse_nvbandwidth``). What a printout does
not carry stays None (p2pBandwidthLatencyTest and nvbandwidth print no buffer size), and a
number on a line cut short is never a value: it becomes an error row at the cut.

Conventions, the same as gpulane copy's rows: GB/s is 1e9 bytes/s; diagonal entries (a GPU
copying within its own memory) become op ``d2d`` rows.
"""
