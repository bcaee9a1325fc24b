"""nccl-tests: its output read as gpulane rows, and the backend that runs the user's build.

Reading (pure, a line at a time): ``model`` (the dataclasses), ``text`` with ``header``,
``table`` and ``failures`` (the text output), ``jsonfile`` (the ``-J`` JSON), ``rows``
(rows of runs), ``logs`` (files and text), ``render`` (printed as nccl-tests prints) and
``importer`` (``gpulane parse nccl-tests``). Running: ``binaries``, ``args``, ``runner``
(``gpulane sweep backend=nccl_tests``).
"""
