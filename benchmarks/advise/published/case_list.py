"""The published TP-vs-PP (and P2P on/off) cases run_cases.py puts to the advisor. Every
figure is quoted from its source (``quote``), read on 2026-12-02 with the search tools
named in README.md. What the advisor cannot be given as the publication ran it (a model
gpulane does not package, 4-bit weights) is a stand-in, said in ``stand_in``.

Fields: gpu (a gpu_specs key), link (PCIe gen, width), gpus, model, dtype, concurrency
(the decode step's batch), input_len, output_len, p2p, per_gpu (the figures are per GPU),
arms (name, tp, pp, and gpus or p2p where the arms differ), published (the arms' output
tok/s, as quoted), deciding_input (what differs between the arms that the advisor has no
input for; None where the arms differ only in what the advisor is given).
"""

from __future__ import annotations

from typing import Any

SUBSTRATUS = "https://substratus.ai/blog/benchmarking-llama-3.1-70b-on-l4"
ATROCIEL = (
    "Atrociel/dual-rtx3090-llm-inference-platform benchmarks/parallelism-comparison.md "
    "(commit 489a432)"
)
TRTLLM = "NVIDIA/TensorRT-LLM docs/source/developer-guide/perf-overview.md (commit 03e27c7)"
RTX6KPRO = "local-inference-lab/rtx6kpro hardware/pcie-bandwidth.md (commit 41d9d68)"

# vLLM V0 with --enforce-eager against V1 with CUDA graphs and FlashInfer: the page's own
# "Test Conditions" table
ENGINE_3090 = (
    "the engine version and settings: TP=2 ran vLLM V0 (VLLM_USE_V1=0) eager, without "
    "CUDA graphs and custom all-reduce; PP=2 ran V1 with CUDA graphs, FlashInfer and an "
    "fp8 KV cache"
)
NCCL_P2P_OFF = (
    "NCCL's settings that came with P2P off (NCCL_MIN_NCHANNELS=32, NCCL_MAX_NCHANNELS=64, "
    "NCCL_BUFFSIZE=67108864, CUDA_DEVICE_MAX_CONNECTIONS=64: optimization/nccl-tuning.md, "
    "'NCCL_P2P_DISABLE=1 alone is not enough'), and the DRAM channels of the host"
)

CASES: list[dict[str, Any]] = [
    {
        "case": "8x L4, Llama 3.1 70B FP8, vLLM, PP4-TP2 vs PP2-TP4",
        "source": SUBSTRATUS,
        "quote": "Pipeline 4 and Tensor 2: 1.76 req/s, 307.61 output tok/s, 717.77 tok/s "
        "total; Pipeline 2 and Tensor 4: 1.50 req/s, 261.16 output tok/s, 610.69 tok/s total",
        "stand_in": "concurrency 64 (the page: 1000 ShareGPT requests at an unbounded rate, "
        "--max-num-seqs=512); lengths from the page's own totals: (717.77 - 307.61) / 1.76 = "
        "233 input and 307.61 / 1.76 = 175 output tokens a request",
        "gpu": "L4", "link": (4, 16), "gpus": 8, "model": "llama3-70b", "dtype": "fp8",
        "concurrency": 64, "input_len": 233, "output_len": 175,
        "arms": [{"name": "PP=4xTP=2", "tp": 2, "pp": 4}, {"name": "PP=2xTP=4", "tp": 4, "pp": 2}],
        "published": [307.61, 261.16],
        "deciding_input": None,
    },
    {
        "case": "2x RTX 3090, Gen4 x8 (Gen5 x8 slot), no P2P, Qwen3.6-35B-A3B AWQ, 1 request",
        "source": ATROCIEL,
        "quote": "| **Generation throughput** | 28.0 tok/s | **112.6 tok/s** | **+302%** | "
        "(TP=2 | PP=2); | P2P | No NVLink, no direct peer access |",
        "stand_in": "qwen3-30b-a3b for Qwen3.6-35B-A3B (both Qwen MoE, 3B active), fp8 (1 "
        "byte) for AWQ 4-bit; 266 input and 200 output tokens from the page's 'Prompt "
        "processing (266 tok)' and 'Sustained generation (200 tok)'; the page says Gen5 x8, "
        "but an RTX 3090 links at Gen4 at most: pcie:4x8",
        "gpu": "RTX 3090", "link": (4, 8), "gpus": 2, "model": "qwen3-30b-a3b", "dtype": "fp8",
        "p2p": "off", "concurrency": 1, "input_len": 266, "output_len": 200,
        "arms": [{"name": "PP=2", "tp": 1, "pp": 2}, {"name": "TP=2", "tp": 2, "pp": 1}],
        "published": [112.6, 28.0],
        "deciding_input": ENGINE_3090,
    },
    {
        "case": "2x RTX 3090, Gen4 x8, no P2P, Qwen3.6-35B-A3B AWQ, 2 requests",
        "source": ATROCIEL,
        "quote": "| **Concurrent throughput (2 req)** | ~48 tok/s | **199.5 tok/s** | **+316%** |",
        "stand_in": "as the 1-request case",
        "gpu": "RTX 3090", "link": (4, 8), "gpus": 2, "model": "qwen3-30b-a3b", "dtype": "fp8",
        "p2p": "off", "concurrency": 2, "input_len": 266, "output_len": 200,
        "arms": [{"name": "PP=2", "tp": 1, "pp": 2}, {"name": "TP=2", "tp": 2, "pp": 1}],
        "published": [199.5, 48.0],
        "deciding_input": ENGINE_3090,
    },
    {
        "case": "RTX PRO 6000 Server, Llama 3.3 70B FP4, TRT-LLM, TP1-PP2 (2 GPUs) vs TP1 "
        "(1 GPU), per GPU, 1000/1000",
        "source": TRTLLM,
        "quote": "| 1000/1000 | 1,724 | 1,901 | (TP1,PP1 (FP4) | TP1,PP2 (FP4)), unit: output "
        "tokens per second per GPU",
        "stand_in": "fp8 (1 byte) for FP4 weights; concurrency: each arm at the batch it "
        "holds (trtllm-bench queues all 3000 requests and fills the KV cache, "
        "kv_cache_free_gpu_mem_fraction 0.95; the advisor's memory model at 0.92)",
        "gpu": "RTX PRO 6000", "link": (5, 16), "gpus": 2, "model": "llama3-70b",
        "dtype": "fp8", "per_gpu": True, "concurrency": "fill", "input_len": 1000,
        "output_len": 1000,
        "arms": [{"name": "PP=2 (2 GPUs)", "tp": 1, "pp": 2, "gpus": 2},
                 {"name": "TP=1 (1 GPU)", "tp": 1, "pp": 1, "gpus": 1}],
        "published": [1901, 1724],
        "deciding_input": None,
    },
    {
        "case": "RTX PRO 6000 Server, Llama 3.3 70B FP4, TRT-LLM, TP1-PP2 vs TP1, per GPU, "
        "8192/1024",
        "source": TRTLLM,
        "quote": "| 8192/1024 | 296 | 327 |",
        "stand_in": "as the 1000/1000 case",
        "gpu": "RTX PRO 6000", "link": (5, 16), "gpus": 2, "model": "llama3-70b",
        "dtype": "fp8", "per_gpu": True, "concurrency": "fill", "input_len": 8192,
        "output_len": 1024,
        "arms": [{"name": "PP=2 (2 GPUs)", "tp": 1, "pp": 2, "gpus": 2},
                 {"name": "TP=1 (1 GPU)", "tp": 1, "pp": 1, "gpus": 1}],
        "published": [327, 296],
        "deciding_input": None,
    },
    {
        "case": "8x RTX PRO 6000, TP=8, P2P on vs off, 1 request",
        "source": RTX6KPRO,
        "quote": "| Single batch (low latency) | 90 tok/s | 70 tok/s | P2P | (P2P Enabled | "
        "P2P Disabled | Winner)",
        "stand_in": "glm-4.5-air (MoE, 12B active) for the page's unnamed model (90 tok/s "
        "matches its Kimi K2.5 INT4 'best single batch on vLLM'); fp8 for INT4; lengths "
        "512/256 (not on the page)",
        "gpu": "RTX PRO 6000", "link": (5, 16), "gpus": 8, "model": "glm-4.5-air",
        "dtype": "fp8", "concurrency": 1, "input_len": 512, "output_len": 256,
        "arms": [{"name": "P2P on", "tp": 8, "pp": 1, "p2p": "on"},
                 {"name": "P2P off", "tp": 8, "pp": 1, "p2p": "off"}],
        "published": [90, 70],
        "deciding_input": None,
    },
    {
        "case": "8x RTX PRO 6000, TP=8, P2P on vs off, 100 concurrent",
        "source": RTX6KPRO,
        "quote": "| 100 concurrent requests | 5000 tok/s | 10000 tok/s | No-P2P | "
        "(benchmarks/results.md: 'MiniMax M2.5 test as proxy')",
        "stand_in": "glm-4.5-air for MiniMax M2.5 (MoE, 10B active); fp8; lengths 512/256",
        "gpu": "RTX PRO 6000", "link": (5, 16), "gpus": 8, "model": "glm-4.5-air",
        "dtype": "fp8", "concurrency": 100, "input_len": 512, "output_len": 256,
        "arms": [{"name": "P2P on", "tp": 8, "pp": 1, "p2p": "on"},
                 {"name": "P2P off", "tp": 8, "pp": 1, "p2p": "off"}],
        "published": [5000, 10000],
        "deciding_input": NCCL_P2P_OFF,
    },
]  # fmt: skip
