"""The per-rank token job: build the stage, prefill, decode, time it, and (rank 0) write rows.

Ranks are laid out stage-major: rank = stage * tp + tp_rank. Every rank runs the same
configurations in the same order. For each (input_len, output_len, batch):

1. prefill the batch (in chunks of whole sequences of at most ``prefill_chunk_tokens``,
   and in at least ``micro_batches`` chunks when pp > 1 so that stages overlap), timed
   from the first token id in to the last first-token out at stage 0: time to first token;
2. the same with the TP collectives turned into no-ops (``comm_off``): compute alone;
3. decode ``output_len - 1`` steps from the prompt, one CUDA graph per micro-batch and
   stage on GPUs (``graph``), eagerly on CPUs; each step's time is taken at stage 0 when
   the step's last tokens are back (CUDA events on GPUs, perf_counter on CPUs);
4. the decode again with no-op collectives.

Pipeline sends go stage to stage over one process group and the sampled tokens go back
from the last stage to the first over another, so the two directions never queue behind
each other. Sends are not waited for at once (the compute stream goes on); a stage waits
for a send of the previous step before it reuses the buffer.

The job's parts, one module each: ``plan`` (which configurations, in which order, split
how), ``state`` (what every part reads), ``groups`` (process groups and the pipeline's
sends), ``graphs`` (CUDA-graph capture and the step clock), ``prefill``, ``decode``,
``rows`` (the result rows) and ``rank`` (the stage built, every configuration run:
``rank.run_rank`` is the job the launchers start).
"""
