"""Floor 0: the typed configuration of every command (dataclasses registered with Hydra's
ConfigStore), validated once before any rank starts."""
