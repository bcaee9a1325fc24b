"""The P2P trust check on a real GPU pair: ``python -m benchmarks.p2p_trust.run_gpu OUT``.

Runs ``campaigns.accept.p2p_trust.check_pairs`` on GPU0-GPU1 with NCCL (64 MiB all_reduce,
10 timed iterations, 20 s timeout), as the machine is and with NCCL_P2P_DISABLE=1, and
writes the results to OUT/results.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpulane.analysis.doctor.p2p_trust import PairEvidence
from gpulane.campaigns.accept.p2p_trust import NOT_APPLICABLE, check_pairs, gpu_job


def main(out: str) -> None:
    import torch

    n = torch.cuda.device_count()
    names = {f"GPU{i}": i for i in range(n)}
    pairs = [(f"GPU{i}", f"GPU{j}") for i in range(n) for j in range(i + 1, n)]
    results = check_pairs(pairs, gpu_job(names), lambda a, b: PairEvidence(), timeout_s=20)
    rows: object = [r.to_dict() for r in results] if pairs else {"not_applicable": NOT_APPLICABLE}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
