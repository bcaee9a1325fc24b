"""Floor 7: one thin module per `gpulane` command: parse the arguments, call one function
below, and let :func:`gpulane.cli.main` print what went wrong."""
