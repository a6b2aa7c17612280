"""Helpers of the test suite, not tests: the synthetic channels and PyPI indexes (channels.py, their fixtures
in channel_fixtures.py), real-record metadata channels (metadata_channel.py), environment builders for the
check, create and lock tests (check_envs.py, create_fixtures.py, lock_support.py), tune's datasets
(tune_datasets.py), ``require``, the one way a test skips for something missing (require.py), and what
makes a test slow (lanes.py)."""
