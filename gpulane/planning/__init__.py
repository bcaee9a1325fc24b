"""Floor 6, planning: the TP-vs-PP advisor (``gpulane advise``).

- :mod:`~gpulane.planning.compute`: roofline and calibration of a stage's compute;
- :mod:`~gpulane.planning.comm`: collective times from measured curves or projections;
- :mod:`~gpulane.planning.placement`: TP groups on the fast paths of the topology;
- :mod:`~gpulane.planning.predict`: one split's memory, decode step and prefill;
- :mod:`~gpulane.planning.recommend`: the split for latency and throughput, in words;
- :mod:`~gpulane.planning.advice`: every split at every workload, and the choice;
- :mod:`~gpulane.planning.inputs`: rows, topology and GPU model the advice reads;
- :mod:`~gpulane.planning.run`: one advise run (its Hydra task), printed as tables or JSON.

Planning imports analysis, inference, topology and the ground floor; nothing below
imports planning.
"""
