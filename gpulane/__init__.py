"""gpulane: measure the paths between GPUs and what they cost an LLM workload."""

__version__ = "0.1.0"
