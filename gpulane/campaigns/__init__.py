"""Floor 6: cluster acceptance campaigns (per-node, pairs, halving) over any launcher that
can put ranks on named hosts; each element is an ordinary run in its own directory."""
