"""Localization inside a node: when a node-level collective falls short, the same
collective on subsets of the node's GPUs (pairs, halving or ring, the campaign planner's
patterns) names the GPU or the GPU pair that accounts for it.

``plan`` (pure: which subsets, and what their figures name), ``rank`` (the job every rank
runs: the subsets measured as torch.distributed subgroups of one launch), ``evidence``
(the pre-flight's and the doctor's words for the GPUs named); `gpulane accept` calls it
from :mod:`gpulane.campaigns.accept.localize`.
"""
