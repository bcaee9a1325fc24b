"""Host<->device and GPU<->GPU copy bandwidth and latency (`gpulane copy`), and importers
for bandwidthTest, p2pBandwidthLatencyTest and nvbandwidth printouts (`gpulane parse`).

Pure modules (no GPU): ``sizes`` (size rules), ``efficiency`` (line rates, efficiency),
``points`` (statistics, rows), ``matrices`` (tables), ``importers/`` (one module per tool),
``numa``, ``plot``.
GPU modules, importable without a GPU: ``measure`` (buffers, copies, timing, checks),
``gpuinfo`` (GPU identity, NVML link readings, topology), ``command``.

Rows: kind ``copy``, op ``h2d`` / ``d2h`` / ``p2p``, memory ``pageable`` / ``pinned`` /
``pinned-wc`` / ``device``, src/dst ``host`` or ``GPU<n>`` (``all`` for the sum of all GPUs
copying at once). A ``bidirectional`` row keeps its own direction's op and bandwidth,
measured while the reverse copy ran (see ``points``).
"""
