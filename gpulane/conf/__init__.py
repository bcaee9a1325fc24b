"""The YAML configurations of Hydra commands. Importing this package (Hydra does, to read
pkg://gpulane.conf) registers the typed schemas the YAML files name in their defaults."""

from gpulane.config.store import register

register()
